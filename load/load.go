// Package load drives requests at an endpoint: closed-loop users (a fixed
// number of concurrent streams, each sending its next request when the last
// one ends), one level after another. Every finished request becomes a
// metrics.Record handed to the sink at once, so nothing measured is lost if
// the run is cut short.
//
// When the run's context is canceled, no new request is sent; streams in
// flight get Grace to finish (or until Hurry closes), then are canceled and
// recorded as "interrupted".
package load

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tokbench/tokbench/api"
	"github.com/tokbench/tokbench/internal/awake"
	"github.com/tokbench/tokbench/internal/gcroom"
	"github.com/tokbench/tokbench/internal/pace"
	"github.com/tokbench/tokbench/metrics"
	"github.com/tokbench/tokbench/tokenize"
)

// Level is one load level to run.
type Level struct {
	Load metrics.Load
	// Requests to send (recorded); with Duration set, the level instead
	// keeps sending until Duration has passed (Requests then caps it if > 0).
	Requests int
	Duration time.Duration
	// Warmup requests run first at the same concurrency and are not recorded.
	Warmup int
	// Open loop (Load.Mode "rate"): Burstiness is the gamma shape,
	// MaxInFlight caps requests in flight (0: no cap; sends that wait for
	// a slot count as client queue time), Seed fixes the arrival times.
	Burstiness  float64
	MaxInFlight int
	Seed        uint64
	// Steps > 1 makes each closed-loop request an agent chain of that many
	// dependent calls, with ThinkTime between them; Requests then counts chains.
	Steps     int
	ThinkTime time.Duration
	// RampUp starts a closed loop's users evenly over this time: user u
	// sends its first request at u×RampUp/users. Without it, the users'
	// starts are spread over one request's expected duration (the median
	// of the level's warm-up requests, else of the level before), so the
	// level runs in steady state rather than in rounds of simultaneous
	// prefills; Lockstep starts them all at once instead.
	RampUp   time.Duration
	Lockstep bool
	// Phase shifts an open-loop schedule (sharded constant-rate load).
	Phase time.Duration
	// Offsets, when set, are an open-loop level's send instants from its
	// start (a trace's), one request each, instead of a schedule drawn
	// from the arrival process; Requests and Duration are not used.
	Offsets []time.Duration
	// SummaryEvery, when positive, summarizes the level in windows of
	// this length as well (metrics.Accumulator.Every): its periodic
	// summaries, for long runs.
	SummaryEvery time.Duration
	// ramp places a sharded closed loop's users in the whole level's ramp:
	// this shard's user u is user first + u×stride of total (Shard.Apply).
	ramp struct{ first, stride, total int }
}

// Source supplies the requests of a level; it is called from several
// goroutines and must be safe for concurrent use.
type Source interface {
	// Request returns the i-th request of the level, with the prompt's
	// token count as the generator intended it (0 if unknown).
	Request(i int) (req *api.Request, inputTokens int)
}

// WarmupSource is a Source that also supplies warm-up requests: like the
// level's, but never one of them, so that a warm-up does not fill the
// server's prompt cache with a prompt the level then sends.
type WarmupSource interface {
	Source
	WarmupRequest(i int) (req *api.Request, inputTokens int)
}

// Warmups is the source of src's warm-up requests: src's WarmupRequest,
// or for a Source without one its requests from index skip on (the
// level's requests come first; a level run for a duration, skip 0, uses
// indices far past any it reaches).
func Warmups(src Source, skip int) Source {
	if w, ok := src.(WarmupSource); ok {
		return warmups{w}
	}
	if skip <= 0 {
		skip = 1 << 30
	}
	return offset{src, skip}
}

type warmups struct{ w WarmupSource }

func (w warmups) Request(i int) (*api.Request, int) { return w.w.WarmupRequest(i) }

type offset struct {
	src  Source
	skip int
}

func (o offset) Request(i int) (*api.Request, int) { return o.src.Request(o.skip + i) }

// Runner runs levels against one client.
type Runner struct {
	Client *api.Client
	// Tokenizer counts output tokens when the server sends no usage, and
	// spreads tokens over chunks.
	Tokenizer tokenize.Tokenizer
	// Timeout bounds one whole request; 0 means none.
	Timeout time.Duration
	// Grace is how long streams in flight may finish after an interrupt.
	Grace time.Duration
	// Hurry, closed once the run's context has ended, ends the grace at
	// once: streams in flight are canceled and recorded as interrupted.
	// Nil: the grace runs its length.
	Hurry <-chan struct{}
	// Sink receives every recorded request as it finishes; calls are
	// serialized by the runner.
	Sink func(metrics.Record)
	// MediaText is what the server's count adds to a request's text, for
	// the tokens of requests with media (see MediaText).
	MediaText MediaText
	// Retry retries a request that failed before its first token (HTTP
	// 429 and 5xx, refused or reset connections) up to this many times,
	// waiting as Retry-After says or backing off exponentially. The record
	// is the last attempt's, with the retries counted in it: a retried
	// request is one request, never several successes.
	Retry int
	// MaxErrorRate aborts a level (no new requests; those in flight finish)
	// once at least 10 requests have finished and more than this share
	// failed; 0 means never.
	MaxErrorRate float64

	// KeepRecords bounds the records a level's Result holds
	// (0: DefaultKeepRecords); every record still reaches the Sink and the
	// level's summary, which holds bounded memory however long the level.
	KeepRecords int
	// SLOs are judged by each level's summary, its goodput counted over
	// every record.
	SLOs []metrics.SLO
	// OnWindow, when set, is given each periodic summary of a level run
	// with SummaryEvery as its window closes (idx: the level's).
	OnWindow func(idx int, w metrics.Window)

	// Cold measures first contact: no connection is opened before a level
	// (the idle ones left from before are closed), so each user's first
	// request opens its own. Set Client.CountSetup with it to count that
	// set-up in TTFT. By default a level's connections are opened before
	// its clock starts (see preconnect).
	Cold bool

	// KeepAwake keeps the processors this process may run on from idling
	// while each level runs, with a busy loop at the idle scheduling
	// policy on each (package awake): a virtual machine's idle processor
	// can resume milliseconds late when a timer fires, and the pacer's
	// wake-up, a send and the clock's reads with it. Its CPU time is in
	// the level's client health (kept_awake).
	KeepAwake bool

	// Progress of the current level, readable while it runs.
	Progress Progress

	stamps    stampCounts
	abort     atomic.Bool
	stop      chan struct{} // closed when the level aborts
	stopOnce  sync.Once
	warnMu    sync.Mutex
	warnings  []string     // the current level's, from the load itself
	level     metrics.Load // the level running now, stamped on its records
	sinkMu    sync.Mutex
	nextID    atomic.Int64
	countOnce sync.Once
	thinkSpin pace.Spinner       // the last moments of conversations' think times
	counter   tokenize.Tokenizer // Tokenizer with a memo for short chunks
	toolCount toolCount          // the token count of the requests' tools
	// expected is a request's typical duration (start to end), from the
	// last warm-up or level: what a level's starts are spread over.
	expected time.Duration
	onWarmup func(metrics.Record) // sees the warm-up's records, which no sink gets
}

// ErrInterrupted is returned when the run's context was canceled.
var ErrInterrupted = errors.New("interrupted")

// DefaultKeepRecords is how many records a level's Result holds by
// default.
const DefaultKeepRecords = 10_000

// Result is one finished level.
type Result struct {
	Level metrics.Level
	// Records are the level's records, the first KeepRecords of them;
	// Dropped counts those past it (summarized, and given to the Sink).
	Records []metrics.Record
	Dropped int
}

// RunLevel runs one level. idx is recorded in each Record. It returns
// ErrInterrupted (with what was measured) when ctx was canceled.
func (r *Runner) RunLevel(ctx context.Context, idx int, lv Level, src Source) (Result, error) {
	if lv.Warmup > 0 {
		r.WarmUp(ctx, idx, lv, src)
	}
	r.Reset()
	spread := time.Duration(0) // the level's start spread, when the runner chose it
	if lv.Load.Mode != metrics.ModeRate && lv.RampUp <= 0 && !lv.Lockstep && lv.users() > 1 {
		lv.RampUp, spread = r.expected, r.expected
	}
	preopened, preErr := r.preconnect(ctx, lv)
	var (
		mu      sync.Mutex
		kept    recordBlocks
		dropped int
	)
	acc := metrics.NewAccumulator(lv.Load, r.SLOs)
	if onWindow := r.OnWindow; onWindow != nil {
		acc.Every(lv.SummaryEvery, func(w metrics.Window) { onWindow(idx, w) })
	} else {
		acc.Every(lv.SummaryEvery, nil)
	}
	keepAtMost := cmp.Or(r.KeepRecords, DefaultKeepRecords)
	r.Reset() // the level's clock starts after its warm-up and connections
	r.stamps.reset()
	r.warnings = nil
	r.level = lv.Load
	keep := func(rec metrics.Record) {
		mu.Lock()
		acc.Add(&rec)
		if kept.n < keepAtMost {
			kept.add(rec)
		} else {
			dropped++
		}
		mu.Unlock()
	}
	var wall time.Duration
	var pacer *metrics.Pacer
	var keeper *awake.Keeper
	if r.KeepAwake {
		var err error
		if keeper, err = awake.Start(); err != nil {
			r.addWarning(fmt.Sprintf("--keep-awake: %v; the level ran without", err))
		}
		defer keeper.Stop() // on an early return; the level's end stops it first
	}
	// The collector gets room while the level runs, so that its cycles,
	// each a processor's time taken from the pacer and the readers, are
	// rare (gcroom; a GOGC in the environment is left alone).
	gcRoom, releaseRoom := gcroom.Hold(0)
	defer releaseRoom()
	mon := startMonitor(&r.Progress.LateTicks)
	if lv.Load.Mode == metrics.ModeRate {
		var err error
		if wall, pacer, err = r.openLoop(ctx, idx, lv, src, keep); err != nil {
			mon.finish(&r.stamps)
			return Result{}, err
		}
	} else {
		wall = r.closedLoop(ctx, idx, lv, src, keep)
	}
	var awakeUse *metrics.KeptAwake
	if keeper != nil {
		u := keeper.Stop()
		awakeUse = &metrics.KeptAwake{CPUs: u.CPUs, CPUSeconds: u.CPUSeconds}
	}
	health, healthWarnings := mon.finish(&r.stamps)
	if health != nil {
		health.KeptAwake = awakeUse
		health.GCRoomBytes = gcRoom
	}
	recs := kept.all()
	res := Result{Records: recs, Dropped: dropped, Level: acc.Level(wall.Seconds())}
	res.Level.Client = health
	res.Level.Pacer = pacer
	if pacer != nil && pacer.LateBy != nil {
		w := "late sends by cause: " + pacer.LateBy.String() + " (pacer.late_by in docs/metrics.md)"
		if pacer.LateBy.Wake > 0 && !r.KeepAwake && runtime.GOOS == "linux" {
			w += "; where the pacer woke late on a virtual machine, --keep-awake keeps its idle processors from halting"
		}
		res.Level.Warnings = append(res.Level.Warnings, w)
	}
	r.LearnDuration(recs)
	switch {
	case lv.Load.Mode == metrics.ModeRate || lv.users() <= 1:
	case lv.Lockstep:
		res.Level.Lockstep = true // as asked: the level says so, without a warning
	case lv.RampUp <= 0:
		res.Level.Lockstep = true
		res.Level.Warnings = append(res.Level.Warnings, fmt.Sprintf(
			"lockstep: the level's %d users started together, as no request's duration was known yet to spread their starts over (give a warm-up, or --ramp-up): its first requests ran as one burst of simultaneous prefills, which raises TTFT", lv.Load.Concurrency))
	case spread > 0:
		res.Level.StartSpreadMs = ms(spread)
	}
	if c := res.Level.Connections; c != nil || !r.Cold {
		if c == nil {
			c = &metrics.Connections{}
			res.Level.Connections = c
		}
		c.Preopened = preopened
		c.SetupInTTFT = r.Client.CountSetup
		if pacer != nil && c.Opened > 0 && !r.Cold {
			res.Level.Warnings = append(res.Level.Warnings, fmt.Sprintf(
				"connections: %d of %d sends found no open connection at their instant and opened one (set-up p99 %.1f ms, in their client queue), beside %d opened ahead of the sends and %d before the level",
				c.Opened, res.Level.Requests.Sent, setupP99(c), pacer.SpareOpened, preopened))
		}
	}
	if preErr != nil && ctx.Err() == nil {
		res.Level.Warnings = append(res.Level.Warnings, fmt.Sprintf(
			"connections: %d of the level's %d could be opened before it started: %s",
			preopened, lv.connections(), api.Scrub(preErr.Error(), r.Client.Secrets)))
	}
	res.Level.Warnings = append(res.Level.Warnings, r.warnings...)
	res.Level.Warnings = append(res.Level.Warnings, healthWarnings...)
	if r.abort.Load() {
		res.Level.Aborted = fmt.Sprintf("aborted: error rate %.0f%% passed --max-error-rate %.0f%% after %d requests",
			100*res.Level.ErrorRate, 100*r.MaxErrorRate, res.Level.Requests.Sent)
		res.Level.Warnings = append(res.Level.Warnings, res.Level.Aborted)
	}
	if ctx.Err() != nil {
		return res, ErrInterrupted
	}
	return res, nil
}

// setupP99 is the p99 of the set-up of the connections the requests
// opened, 0 when none did.
func setupP99(c *metrics.Connections) float64 {
	if c.SetupMs == nil {
		return 0
	}
	return c.SetupMs.P99
}

// Reset clears the runner's Progress and starts its clock, so that what
// watches it (a progress line started as a level starts) reads nothing of
// the level before; RunLevel calls it, and so may a caller about to start
// a level's watchers.
func (r *Runner) Reset() {
	r.Progress.reset()
	r.Progress.Start.Store(time.Now().UnixNano())
	r.abort.Store(false)
	r.stop, r.stopOnce = make(chan struct{}), sync.Once{}
	if r.Client != nil && r.Client.Chunks == nil {
		r.Client.Chunks = &r.Progress.Chunks
	}
}

// WarmUp runs lv's warm-up (lv.Warmup requests, counted nowhere; Progress
// says Warmup meanwhile) as RunLevel does before the level, for a caller
// that acts between the two (reads the server's counters): it then gives
// RunLevel lv with Warmup 0.
func (r *Runner) WarmUp(ctx context.Context, idx int, lv Level, src Source) {
	r.Reset()
	if lv.Warmup > 0 && ctx.Err() == nil {
		r.warmUp(ctx, idx, lv, src)
	}
	r.Progress.Start.Store(time.Now().UnixNano()) // the warm-up's time is not the level's
}

// warmUp runs a level's warm-up requests, unrecorded, at its
// concurrency, and learns their duration (LearnDuration).
func (r *Runner) warmUp(ctx context.Context, idx int, lv Level, src Source) {
	r.Progress.Warmup.Store(true)
	defer r.Progress.Warmup.Store(false)
	w := Level{Load: metrics.Load{Mode: metrics.ModeConcurrency, Concurrency: max(lv.Load.Concurrency, 1)}, Requests: lv.Warmup, Lockstep: true}
	var mu sync.Mutex
	var warm []metrics.Record
	r.onWarmup = func(rec metrics.Record) {
		mu.Lock()
		warm = append(warm, rec)
		mu.Unlock()
	}
	r.closedLoop(ctx, idx, w, Warmups(src, lv.Requests), nil)
	r.onWarmup = nil
	r.LearnDuration(warm)
}

// recordBlocks keeps a level's records in blocks of a fixed size, so
// that keeping one never copies those before it: one slice grown by
// append copies megabytes at a time as a level's records pass the
// thousands (528 bytes each), holding the processor for milliseconds
// while sends are due (5,000 req/s on one processor).
type recordBlocks struct {
	blocks [][]metrics.Record
	n      int
}

// recordBlock is how many records a block holds.
const recordBlock = 1024

func (k *recordBlocks) add(rec metrics.Record) {
	if len(k.blocks) == 0 || len(k.blocks[len(k.blocks)-1]) == recordBlock {
		k.blocks = append(k.blocks, make([]metrics.Record, 0, recordBlock))
	}
	last := &k.blocks[len(k.blocks)-1]
	*last = append(*last, rec)
	k.n++
}

// all is the records kept, in one slice, once the level has ended.
func (k *recordBlocks) all() []metrics.Record {
	if len(k.blocks) <= 1 {
		if len(k.blocks) == 0 {
			return nil
		}
		return k.blocks[0]
	}
	recs := make([]metrics.Record, 0, k.n)
	for _, b := range k.blocks {
		recs = append(recs, b...)
	}
	return recs
}

// LearnDuration keeps the median duration of the completed requests among
// recs as the next level's expected request duration, which its users'
// starts are spread over (a warm-up run apart from the runner teaches it
// this way).
func (r *Runner) LearnDuration(recs []metrics.Record) {
	var d []float64
	for i := range recs {
		if recs[i].OK {
			d = append(d, recs[i].DoneMs)
		}
	}
	if len(d) == 0 {
		return
	}
	slices.Sort(d)
	r.expected = time.Duration(metrics.Percentile(d, 50) * float64(time.Millisecond))
}

func (r *Runner) addWarning(w string) {
	r.warnMu.Lock()
	r.warnings = append(r.warnings, w)
	r.warnMu.Unlock()
}

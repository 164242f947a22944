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
	"maps"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tokbench/tokbench/api"
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
	// expected is a request's typical duration (start to end), from the
	// last warm-up or level: what a level's starts are spread over.
	expected time.Duration
	onWarmup func(metrics.Record) // sees the warm-up's records, which no sink gets
}

// Progress counts the current level's requests and tokens, the retries
// (--retry) and the sends on a new connection after a kept one closed.
type Progress struct {
	Done, Failed, Tokens atomic.Int64
	Retries, Reconnects  atomic.Int64
	// InFlight counts requests sent and not yet answered in full (all levels).
	InFlight atomic.Int64
	Start    atomic.Int64 // level start, unix nanoseconds
	// Warmup is set while the level's warm-up runs (its requests count in
	// none of the other counters).
	Warmup atomic.Bool
	// Chunks counts the token chunks streamed so far (as they arrive, the
	// warm-up's too); DoneChunks those of completed requests, whose
	// Tokens they carried.
	Chunks, DoneChunks atomic.Int64
	// LateTicks counts the client self-check's ticks that woke more than
	// LagWarnMs late during the level: a client too busy to stamp on time.
	LateTicks atomic.Int64

	mu     sync.Mutex
	errors map[string]int
	ttfts  [recentTTFTs]float64 // the latest completed requests' TTFTs, a ring
	nTTFT  int                  // how many were ever put in it
}

// recentTTFTs is how many of the latest TTFTs RecentTTFT looks at.
const recentTTFTs = 256

// addTTFT keeps a completed request's TTFT among the recent ones.
func (p *Progress) addTTFT(ms float64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.ttfts[p.nTTFT%recentTTFTs] = ms
	p.nTTFT++
}

// RecentTTFT is the median TTFT of the level's latest completed requests
// (up to 256), and how many that is.
func (p *Progress) RecentTTFT() (p50 float64, n int) {
	p.mu.Lock()
	n = min(p.nTTFT, recentTTFTs)
	v := slices.Clone(p.ttfts[:n])
	p.mu.Unlock()
	if n == 0 {
		return 0, 0
	}
	slices.Sort(v)
	return metrics.Percentile(v, 50), n
}

// Errors are the level's failed requests by error class so far.
func (p *Progress) Errors() map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return maps.Clone(p.errors)
}

// CountError counts one failed request of class in Errors.
func (p *Progress) CountError(class string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.errors == nil {
		p.errors = map[string]int{}
	}
	p.errors[cmp.Or(class, "unknown")]++
}

func (p *Progress) reset() {
	p.Done.Store(0)
	p.Failed.Store(0)
	p.Tokens.Store(0)
	p.DoneChunks.Store(0)
	p.LateTicks.Store(0)
	p.Retries.Store(0)
	p.Reconnects.Store(0)
	p.mu.Lock()
	p.errors, p.nTTFT = nil, 0
	p.mu.Unlock()
}

// StreamedTPS estimates the tokens per second streaming now from the
// chunks that arrived over d (chunksThen at its start): chunks at the
// tokens per chunk of the completed requests (1 before any completed).
func (p *Progress) StreamedTPS(chunksThen int64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	perChunk := 1.0
	if c := p.DoneChunks.Load(); c > 0 {
		perChunk = float64(p.Tokens.Load()) / float64(c)
	}
	return float64(p.Chunks.Load()-chunksThen) * perChunk / d.Seconds()
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
		recs    []metrics.Record
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
		if len(recs) < keepAtMost {
			recs = append(recs, rec)
		} else {
			dropped++
		}
		mu.Unlock()
	}
	var wall time.Duration
	var pacer *metrics.Pacer
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
	health, healthWarnings := mon.finish(&r.stamps)
	res := Result{Records: recs, Dropped: dropped, Level: acc.Level(wall.Seconds())}
	res.Level.Client = health
	res.Level.Pacer = pacer
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

// closedLoop runs lv.Load.Concurrency users until the level's requests or
// duration are used up. It returns the level's wall time, from its start to
// the end of the last request.
func (r *Runner) closedLoop(ctx context.Context, idx int, lv Level, src Source, keep func(metrics.Record)) time.Duration {
	users := lv.Load.Concurrency
	if users <= 0 {
		return 0 // a shard whose part of this level is no user at all
	}
	// Requests run on their own context so an interrupt lets them finish
	// within the grace period instead of cutting every stream at once.
	reqCtx, done := r.requestContext(ctx)
	defer done()

	// The level's first request for every user is built before the clock
	// starts, so the users can all write within moments of each other.
	var firsts []prebuilt
	if lv.Steps <= 1 {
		n := users
		if lv.Requests > 0 {
			n = min(n, lv.Requests)
		}
		firsts = make([]prebuilt, n)
		for u := range firsts {
			firsts[u] = r.prebuild(src, u)
		}
	}
	start := time.Now()
	r.Progress.Start.Store(start.UnixNano())
	var deadline time.Time
	if lv.Duration > 0 {
		deadline = start.Add(lv.Duration)
	}
	var issued atomic.Int64
	var wg sync.WaitGroup
	var lastEnd atomic.Int64
	// spent closes when the level's last request is issued, so users still
	// waiting for their place in the ramp need not wait any longer.
	spent := make(chan struct{})
	var spentOnce sync.Once
	var started atomic.Int64
	for u := 0; u < users; u++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if lv.RampUp > 0 {
				at := start.Add(lv.userStart(u))
				if !deadline.IsZero() && deadline.Before(at) {
					at = deadline
				}
				if !waitUntil(ctx, at, r.stop, spent) {
					return
				}
			}
			first := true
			for ctx.Err() == nil && !r.abort.Load() {
				if !deadline.IsZero() && !time.Now().Before(deadline) {
					return
				}
				i := int(issued.Add(1)) - 1
				if lv.Requests > 0 && i >= lv.Requests {
					return
				}
				var pre *prebuilt
				if i < len(firsts) {
					pre = &firsts[i]
				}
				if lv.Requests > 0 && i == lv.Requests-1 {
					spentOnce.Do(func() { close(spent) })
				}
				if first {
					first = false
					started.Add(1)
				}
				if lv.Requests <= 0 && deadline.IsZero() {
					return
				}
				if lv.Steps > 1 {
					r.chain(ctx, reqCtx, idx, start, lv, src, i, func(rec metrics.Record) { r.finish(rec, keep, &lastEnd) })
					continue
				}
				if pre == nil {
					b := r.prebuild(src, i)
					pre = &b
				}
				rec := r.one(reqCtx, idx, start, *pre)
				r.finish(rec, keep, &lastEnd)
			}
		}()
	}
	wg.Wait()
	if lv.RampUp > 0 && int(started.Load()) < users && ctx.Err() == nil && !r.abort.Load() {
		if refused := r.Progress.Errors()[string(api.ClassConnectionRefused)]; refused > 0 {
			// The requests were spent by a server that refused them
			// (killed, restarted): more requests would not have helped.
			r.addWarning(fmt.Sprintf("ramp-up: only %d of %d users sent a request: the server went away (%d requests found it refusing connections, connection_refused), and their quick failures spent the level's requests", started.Load(), users, refused))
		} else {
			r.addWarning(fmt.Sprintf("ramp-up: only %d of %d users sent a request before the level's requests or time ran out; the level did not reach its concurrency (give it more requests or --duration, or a shorter --ramp-up)", started.Load(), users))
		}
	}
	return time.Duration(lastEnd.Load())
}

// users is how many users the level's whole closed loop has (a shard's
// part of it counts the whole).
func (lv Level) users() int {
	if lv.ramp.total > 0 {
		return lv.ramp.total
	}
	return lv.Load.Concurrency
}

// warmUp runs a level's warm-up requests, unrecorded, at its
// concurrency, and learns their duration (LearnDuration).
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

// userStart is when closed-loop user u sends its first request, from the
// level's start: spread evenly over RampUp (0: all at once). A shard's
// users keep their places in the whole level's ramp.
func (lv Level) userStart(u int) time.Duration {
	first, stride, total := 0, 1, lv.Load.Concurrency
	if lv.ramp.total > 0 {
		first, stride, total = lv.ramp.first, lv.ramp.stride, lv.ramp.total
	}
	if lv.RampUp <= 0 || total <= 0 {
		return 0
	}
	return time.Duration(int64(lv.RampUp) * int64(first+u*stride) / int64(total))
}

// waitUntil sleeps until t; false when ctx ended or stop closed first, true
// at t or as soon as done closes.
func waitUntil(ctx context.Context, t time.Time, stop, done <-chan struct{}) bool {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err() == nil
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-stop:
		return false
	case <-done:
		return true
	case <-timer.C:
		return true
	}
}

// prebuilt is a request of the level, built for sending.
type prebuilt struct {
	req   *api.Request
	prep  *api.Prepared
	inTok int
}

func (r *Runner) prebuild(src Source, i int) prebuilt {
	req, inTok := src.Request(i)
	return prebuilt{req: req, prep: r.Client.Prepare(req), inTok: inTok}
}

// one sends a request and turns the response into a record.
func (r *Runner) one(ctx context.Context, level int, levelStart time.Time, b prebuilt) metrics.Record {
	rec, _ := r.send(ctx, level, levelStart, b)
	return rec
}

// answerOf is the text of a response's chunks: the answer an agent
// chain carries into its next call.
func answerOf(resp *api.Response) string {
	var b strings.Builder
	for _, c := range resp.Chunks {
		b.WriteString(c.Text)
	}
	return b.String()
}

// send runs a request (with its retries) and records it.
func (r *Runner) send(ctx context.Context, level int, levelStart time.Time, b prebuilt) (metrics.Record, *api.Response) {
	req, inTok := b.req, b.inTok
	if r.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, r.Timeout)
		defer cancel()
	}
	r.Progress.InFlight.Add(1)
	defer r.Progress.InFlight.Add(-1)
	resp := r.Client.DoPrepared(ctx, b.prep)
	first := resp.Start
	var retryErrors []string
	for attempt := 0; attempt < r.Retry && retryable(resp) && ctx.Err() == nil; attempt++ {
		retryErrors = append(retryErrors, string(resp.ErrorClass))
		select {
		case <-ctx.Done():
		case <-time.After(backoff(resp.RetryAfter, attempt)):
		}
		if ctx.Err() != nil {
			break
		}
		resp = r.Client.DoPrepared(ctx, b.prep)
	}
	r.stamps.add(resp)
	id := int(r.nextID.Add(1))
	r.countOnce.Do(func() { r.counter = tokenize.Cached(r.Tokenizer, 1<<16) })
	rec := Record(resp, r.counter, RecordInfo{
		ID: id, Level: level, LevelStart: levelStart,
		Prompt: req.Prompt(), InputTokensRequested: inTok, OutputTokensRequested: req.MaxTokens,
	})
	if len(retryErrors) > 0 {
		rec.Retries = len(retryErrors)
		rec.RetryErrors = retryErrors
		rec.RetryWaitMs = ms(resp.Start.Sub(first))
	}
	return rec, resp
}

// thinkLead is how long before a conversation turn's instant its send
// stops sleeping (a Go timer, which wakes up to a few ms late on a busy or
// virtual machine) and waits awake.
const thinkLead = 3 * time.Millisecond

// chain runs one agent chain: Steps dependent calls, each carrying the
// conversation so far (every earlier prompt and answer) plus a new user
// turn, with ThinkTime between them. A failed step ends the chain.
func (r *Runner) chain(ctx, reqCtx context.Context, level int, levelStart time.Time, lv Level, src Source, chainIdx int, finish func(metrics.Record)) {
	var history []api.Message
	for step := 0; step < lv.Steps; step++ {
		var due time.Time // the turn's instant, after the think time
		if step > 0 && lv.ThinkTime > 0 {
			due = time.Now().Add(lv.ThinkTime)
		}
		if ctx.Err() != nil {
			return
		}
		turn, inTok := src.Request(chainIdx*lv.Steps + step)
		req := *turn
		req.Messages = append(append([]api.Message(nil), history...), turn.Messages...)
		if step > 0 {
			inTok = 0 // the tokenizer or usage counts the whole conversation
		}
		// The turn is built (its whole conversation encoded) within the
		// think time; the send sleeps until shortly before its instant
		// and waits the rest awake (api.SendAt), as the open loop's do.
		prep := r.Client.Prepare(&req)
		sendCtx := reqCtx
		if !due.IsZero() {
			if !waitUntil(ctx, due.Add(-thinkLead), nil, nil) {
				return
			}
			sendCtx = api.SendAt(reqCtx, due, r.thinkSpin.Until)
		}
		rec, resp := r.send(sendCtx, level, levelStart, prebuilt{req: &req, prep: prep, inTok: inTok})
		answer := answerOf(resp)
		rec.Chain, rec.Step = chainIdx+1, step+1
		finish(rec)
		if !rec.OK {
			return
		}
		history = append(req.Messages, api.Message{Role: "assistant", Content: answer})
	}
}

// requestContext is the context requests run on: it outlives ctx by the
// grace period, so an interrupt lets streams in flight finish instead of
// cutting every one at once. Call done when the level is over.
func (r *Runner) requestContext(ctx context.Context) (reqCtx context.Context, done func()) {
	reqCtx, cancelReqs := context.WithCancel(context.WithoutCancel(ctx))
	stopWatch := context.AfterFunc(ctx, func() {
		if r.Grace <= 0 {
			cancelReqs()
			return
		}
		t := time.NewTimer(r.Grace)
		defer t.Stop()
		select {
		case <-t.C:
		case <-r.Hurry:
		case <-reqCtx.Done(): // the level ended within the grace
		}
		cancelReqs()
	})
	return reqCtx, func() { stopWatch(); cancelReqs() }
}

// finish counts a finished request, keeps it and hands it to the sink;
// keep nil means a warm-up request, which is dropped.
func (r *Runner) finish(rec metrics.Record, keep func(metrics.Record), lastEnd *atomic.Int64) {
	end := int64(rec.OffsetMs*1e6) + int64(rec.DoneMs*1e6)
	for {
		old := lastEnd.Load()
		if end <= old || lastEnd.CompareAndSwap(old, end) {
			break
		}
	}
	if keep == nil {
		if r.onWarmup != nil {
			r.onWarmup(rec)
		}
		return
	}
	rec.Load = r.level
	r.Progress.Retries.Add(int64(rec.Retries))
	if rec.Phases != nil {
		r.Progress.Reconnects.Add(int64(rec.Phases.Reconnects))
	}
	if rec.OK {
		r.Progress.Done.Add(1)
		r.Progress.Tokens.Add(int64(rec.OutputTokens))
		r.Progress.DoneChunks.Add(int64(len(rec.ChunkMs)))
		r.Progress.addTTFT(rec.TTFTMs)
	} else {
		r.Progress.Failed.Add(1)
		r.Progress.CountError(rec.ErrorClass)
	}
	if r.MaxErrorRate > 0 {
		failed, done := r.Progress.Failed.Load(), r.Progress.Done.Load()
		if n := failed + done; n >= 10 && float64(failed)/float64(n) > r.MaxErrorRate {
			r.abort.Store(true)
			r.stopOnce.Do(func() { close(r.stop) })
		}
	}
	keep(rec)
	if r.Sink != nil {
		r.sinkMu.Lock()
		r.Sink(rec)
		r.sinkMu.Unlock()
	}
}

// retryable reports whether a failed response may be sent again: the server
// shed load or broke before producing a token.
func retryable(resp *api.Response) bool {
	if !resp.Failed() || len(resp.Chunks) > 0 {
		return false
	}
	if code, ok := resp.ErrorClass.HTTPStatus(); ok {
		switch code {
		case http.StatusTooManyRequests, http.StatusInternalServerError, http.StatusBadGateway,
			http.StatusServiceUnavailable, http.StatusGatewayTimeout:
			return true
		}
		return false
	}
	switch resp.ErrorClass {
	case api.ClassConnectionRefused, api.ClassConnectionReset, api.ClassConnectionDropped:
		return true
	}
	return false
}

// backoff is the wait before retry attempt (0-based): Retry-After when the
// server gave one in seconds (at most 60 s), else 250 ms doubling, at most 8 s.
func backoff(retryAfter string, attempt int) time.Duration {
	if s, err := strconv.Atoi(strings.TrimSpace(retryAfter)); err == nil && s >= 0 {
		return min(time.Duration(s)*time.Second, time.Minute)
	}
	return min(250*time.Millisecond<<attempt, 8*time.Second)
}

// connections is how many connections a level needs open at its start:
// one per closed-loop user; for an open loop, the in-flight cap, or else
// one second of arrivals (at most 1,024) — more are opened as needed, and
// their set-up is the requests' own phase, outside TTFT.
func (lv Level) connections() int {
	n := lv.Requests
	if lv.Load.Mode != metrics.ModeRate {
		n = lv.Load.Concurrency
		if lv.Requests > 0 {
			n = min(n, lv.Requests)
		}
		return max(n, 0)
	}
	want := lv.MaxInFlight
	if want <= 0 {
		want = min(int(math.Ceil(lv.Load.RateRPS))+1, 1024)
	}
	if n > 0 {
		want = min(want, n)
	}
	return want
}

// preconnecter is a transport that can open connections ahead of requests
// (wire.Transport).
type preconnecter interface {
	Preconnect(ctx context.Context, u *url.URL, n int) (int, error)
}

// preconnect opens the level's connections before its clock starts, so
// that no measured request pays for connection set-up (DNS, TCP, TLS); a
// request that must open one mid-level records the set-up as its own
// phase. With Cold it closes the idle connections instead. It returns how
// many it opened.
func (r *Runner) preconnect(ctx context.Context, lv Level) (int, error) {
	rt := r.Client.HTTP.Transport
	if r.Cold {
		if ci, ok := rt.(interface{ CloseIdleConnections() }); ok {
			ci.CloseIdleConnections()
		}
		return 0, nil
	}
	pc, ok := rt.(preconnecter)
	if !ok || ctx.Err() != nil {
		return 0, nil
	}
	u, err := url.Parse(r.Client.BaseURL)
	if err != nil || u.Host == "" {
		return 0, nil // the requests will say what is wrong with it
	}
	ctx, cancel := context.WithTimeout(ctx, preconnectTimeout)
	defer cancel()
	return pc.Preconnect(ctx, u, lv.connections())
}

// preconnectTimeout bounds the set-up before a level.
const preconnectTimeout = 30 * time.Second

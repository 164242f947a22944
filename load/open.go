package load

import (
	"context"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tokbench/tokbench/api"
	"github.com/tokbench/tokbench/internal/pace"
	"github.com/tokbench/tokbench/metrics"
)

// openLoop sends requests at scheduled instants, whatever happens to the
// ones before them. A send that goes out late (the client was busy, or the
// in-flight cap was reached) records the delay as QueueMs, so latency
// measured from the scheduled instant exposes coordinated omission.
//
// Nothing slow stands between a send's instant and its write: a builder
// runs ahead of the schedule making the requests' bodies, a keeper opens
// spare connections ahead of the sends that will need them (keepSpare),
// each send's goroutine is started ahead and parked, and the pacer wakes
// early by the lateness it measured of its own wake-ups (pace.Pacer) and
// lets the send go then: the send prepares its request and waits the rest
// awake (api.SendAt), so neither the goroutine's start nor the
// preparation comes between the instant and the write.
func (r *Runner) openLoop(ctx context.Context, idx int, lv Level, src Source, keep func(metrics.Record)) (time.Duration, *metrics.Pacer, error) {
	rate := lv.Load.RateRPS
	offsets := lv.Offsets
	if offsets == nil {
		n := lv.Requests
		if lv.Duration > 0 {
			byTime := int(math.Ceil(rate * lv.Duration.Seconds()))
			if n <= 0 || byTime < n {
				n = byTime
			}
		}
		var err error
		if offsets, err = Schedule(lv.Load.Arrival, rate, lv.Burstiness, n, lv.Seed); err != nil {
			return 0, nil, err
		}
	}
	reqCtx, done := r.requestContext(ctx)
	defer done()
	var slots chan struct{}
	if lv.MaxInFlight > 0 {
		slots = make(chan struct{}, lv.MaxInFlight)
	}
	// The builder and the keeper end with the level (their context), not
	// only with the run: a dial to a server that stopped answering must not
	// hold the level's end.
	helperCtx, stopHelpers := context.WithCancel(ctx)
	var helpers sync.WaitGroup
	defer helpers.Wait()
	defer stopHelpers()
	quit := helperCtx.Done()
	ahead := r.buildAhead(src, len(offsets), quit, &helpers)
	pacer := pace.NewPacer()
	defer pacer.Close()
	pacer.Expect(len(offsets))
	spin := pacer.Spinner()
	// The level's first requests are built before its clock starts, as
	// far ahead as the builder goes.
	select {
	case <-ahead.primed:
	case <-ctx.Done():
	}
	// The pacer learns how late this machine wakes before the first
	// instant, from sleeps as long as the schedule's mean gap.
	if n := len(offsets); n > 1 {
		pacer.Calibrate(calibrationWakes, (offsets[n-1]-offsets[0])/time.Duration(n-1))
	}
	start := time.Now()
	r.Progress.Start.Store(start.UnixNano())
	spare := r.keepSpare(helperCtx, lv, start, offsets, &helpers)
	var wg sync.WaitGroup
	var lastEnd atomic.Int64
	var lateBy lateCounts
	// Each send's goroutine starts ahead of its instant and parks on its
	// gate; the pacer opens the gate as it wakes for the instant and
	// waits (asleep) for the send to reach it, so the send runs next on
	// this processor.
	// (Started at the instant instead, a send's goroutine waited behind
	// every stream's reader readied before it: milliseconds at 5,000
	// req/s on one processor.) abandon tells the sends still parked when
	// the level ends that they will not go out.
	abandon := make(chan struct{})
	var parked []*gatedSend
	launch := func(i int, b prebuilt) {
		g := &gatedSend{gate: make(chan struct{}), went: make(chan struct{})}
		g.steps.due = start.Add(offsets[i] + lv.Phase)
		parked = append(parked, g)
		wg.Add(1)
		go func() {
			defer wg.Done()
			// The send's instant frees the builder for the next body, so
			// that it builds in the gap after the write, not as the next
			// send prepares (on one processor a long prompt's body holds
			// it for milliseconds); a send that never reached its wait
			// frees it as it ends.
			freed := false
			defer func() {
				if !freed {
					ahead.sent()
					close(g.went)
				}
			}()
			if !g.released(abandon) {
				return
			}
			steps := &g.steps
			steps.began = time.Now()
			wait := func(at time.Time) {
				spin.Until(at)
				if freed {
					return // a retry's wait (--retry): the first one counted
				}
				steps.waited = time.Now()
				freed = true
				ahead.sent()
				close(g.went)
			}
			due := steps.due
			rec := r.one(api.SendAt(reqCtx, due, wait), idx, start, b)
			// actual t0 − scheduled instant, of the first attempt: a
			// retry's wait (--retry) is the server's doing, not the client
			// sending late, and is in the record as retry_wait_ms.
			rec.QueueMs = ms(rec.Start.Sub(due)) - rec.RetryWaitMs
			if late := rec.LateMs(); rec.OK && late > metrics.LateSendMs && !steps.waited.IsZero() {
				steps.wrote = rec.Start.Add(-time.Duration(rec.RetryWaitMs * float64(time.Millisecond)))
				lateBy.add(steps.cause(late))
			}
			if slots != nil {
				<-slots
			}
			r.finish(rec, keep, &lastEnd)
		}()
	}
	next := 0 // the next send to start
sending:
	for i := range offsets {
		if r.abort.Load() {
			break
		}
		// A send not started ahead (the first, or the pacer is catching up)
		// starts now. Catching up, it goes ahead of the send opened just
		// before, which has not run yet: both are late already, and late_by
		// counts the delay under start.
		if next == i {
			b, ok := ahead.next(ctx)
			if !ok {
				break sending
			}
			launch(i, b)
			next++
		}
		g := parked[0]
		parked = parked[1:]
		due := g.steps.due
		g.steps.reached = time.Now()
		if !pacer.Wake(ctx.Done(), due) {
			break sending
		}
		g.steps.woke = time.Now()
		if slots != nil {
			select {
			case <-ctx.Done():
				break sending
			case slots <- struct{}{}:
			}
		}
		if ctx.Err() != nil {
			break
		}
		// Start the next send, and those due within startAhead, parked on
		// their gates: they prepare while the pacer sleeps. They start
		// before this send's gate opens, so that this send runs first once
		// the pacer sleeps; and not while the pacer is catching up (it did
		// not sleep), when the send it opened last has not run yet.
		for pacer.Slept() && next < len(offsets) && next-i < aheadRequests &&
			(next == i+1 || time.Until(start.Add(offsets[next]+lv.Phase)) < startAhead) {
			b, ok := ahead.ready()
			if !ok {
				break
			}
			launch(next, b)
			next++
		}
		// The send runs on this processor next (or at once on an idle
		// one), ahead of its instant by the lead, and the pacer goes on
		// once it has reached its instant. On one processor that keeps
		// sends behind their instants (the machine held the process) going
		// out one after another, in order, each ahead of the streams'
		// readers: opened one after another instead, each opened gate put
		// the send opened before it behind every reader readied meanwhile.
		close(g.gate)
		select {
		case <-g.went:
		case <-ctx.Done():
			break sending
		}
	}
	close(abandon)
	wall := time.Since(start)
	wg.Wait()
	p := &metrics.Pacer{LearnedLeadMs: ms(pacer.Lead()), CPUSeconds: pacer.Busy().Seconds(), SpareOpened: spare.Load(), LateBy: lateBy.summary()}
	if l := pacer.Leads(); len(l) > 0 {
		p.LeadMs = metrics.Describe(l).P50
	}
	if wall > 0 {
		p.CPUShare = pacer.Busy().Seconds() / wall.Seconds()
	}
	if w := pacer.Wakes(); len(w) > 0 {
		st := metrics.Describe(w)
		p.WakeLateMs = &st
	}
	return time.Duration(lastEnd.Load()), p, nil
}

// startAhead is how far ahead of their instants sends are started, to
// park on their gates (at most aheadRequests of them).
const startAhead = 20 * time.Millisecond

// gatedSend is a send started ahead of its instant, parked until the
// pacer opens its gate; the pacer sets its steps up to woke before.
type gatedSend struct {
	gate  chan struct{}
	went  chan struct{} // closed as the send reaches its instant, or ends before
	steps sendSteps
}

// released waits for the send's gate: true once it opened, false if the
// level ended first (abandon), unless the gate opened before that.
func (g *gatedSend) released(abandon <-chan struct{}) bool {
	select {
	case <-g.gate:
		return true
	case <-abandon:
		select {
		case <-g.gate:
			return true
		default:
			return false
		}
	}
}

// calibrationWakes is how many of the machine's wake-ups the pacer
// measures before a level's first instant.
const calibrationWakes = 16

// Requests are built at most this far ahead of the pacer: by count, and
// by their bodies' bytes (a long prompt's body is megabytes).
const (
	aheadRequests = 64
	aheadBytes    = 64 << 20
)

// builder builds a level's requests in order on a goroutine of its own,
// ahead of their instants (buildAhead). Once as far ahead as it may go,
// it builds the next request only when a send has reached its instant
// (sent): in the gap after a write, not beside the sends that are
// preparing for theirs.
type builder struct {
	c      chan prebuilt
	bytes  atomic.Int64  // the bodies built and not yet taken
	primed chan struct{} // closed once the builder is as far ahead as it may go
	room   chan struct{} // a token for each send that reached its instant
}

// sent says a send reached its instant (or ended without): the builder
// may build one more.
func (b *builder) sent() {
	select {
	case b.room <- struct{}{}:
	default: // as many tokens wait as requests were taken: none is lost
	}
}

// buildAhead starts building the level's n requests; the builder stops
// when quit closes, and its channel closes after the last request.
func (r *Runner) buildAhead(src Source, n int, quit <-chan struct{}, wg *sync.WaitGroup) *builder {
	depth := max(min(n, aheadRequests), 1)
	b := &builder{c: make(chan prebuilt, depth), primed: make(chan struct{}), room: make(chan struct{}, depth)}
	primed := sync.OnceFunc(func() { close(b.primed) })
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(b.c)
		defer primed()
		for i := range n {
			if i >= depth {
				primed()
				select {
				case <-b.room:
				case <-quit:
					return
				}
			}
			for b.bytes.Load() > aheadBytes && len(b.c) > 0 {
				primed()
				select {
				case <-quit:
					return
				case <-time.After(time.Millisecond):
				}
			}
			p := r.prebuild(src, i)
			b.bytes.Add(p.prep.BodyBytes())
			select {
			case b.c <- p:
				continue
			default:
			}
			primed()
			select {
			case b.c <- p:
			case <-quit:
				return
			}
		}
	}()
	return b
}

// ready is the next request if it is built, false if not yet.
func (b *builder) ready() (prebuilt, bool) {
	select {
	case p, ok := <-b.c:
		if ok {
			b.bytes.Add(-p.prep.BodyBytes())
		}
		return p, ok
	default:
		return prebuilt{}, false
	}
}

// next is the next request built, false when ctx ended first.
func (b *builder) next(ctx context.Context) (prebuilt, bool) {
	select {
	case p, ok := <-b.c:
		if ok {
			b.bytes.Add(-p.prep.BodyBytes())
		}
		return p, ok
	case <-ctx.Done():
		return prebuilt{}, false
	}
}

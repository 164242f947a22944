// Package pace waits for instants as exactly as the machine allows.
//
// Timer sleeps until an instant on a timerfd(2) registered with Go's
// poller, with a runtime deadline at the same instant as its backstop: the
// kernel's high-resolution timer wakes an idle process on time (Go's own
// timers wake it up to a millisecond late, since the poller waits in whole
// milliseconds), while the deadline is a Go timer, which every busy
// processor checks each time it schedules. A poller event alone is noticed
// late when every processor has work: then only the runtime's monitor
// polls, every 10 ms.
//
// Pacer meets instants: it wakes early by the lateness it has measured of
// its own wake-ups (the latest of the last ones, so a machine whose
// wake-ups run milliseconds late is met too) and a Spinner waits the rest
// awake. Wake stops at the early instant, so that the rest can be waited
// by whoever acts at the instant (the goroutine that sends a request,
// after it prepared what it can) on the pacer's Spinner. The lead is
// at most a quarter of the time between instants: a processor that spins
// never polls the network (Go's scheduler polls it when a processor runs
// out of work, else every 10 ms), and at instants that close the
// processor is seldom idle long enough to wake late. (Waiting the whole
// time between close instants awake, on two processors, was measured no
// more exact at 500 and 5,000 req/s, for up to a core of CPU.)
//
// A Spinner is safe for concurrent use; Timer and Pacer are not, and
// Close releases their timerfd.
package pace

import (
	"runtime"
	"slices"
	"sync/atomic"
	"time"
)

// coarse is how much of a wait is left for the precise timer; the rest is
// a Go timer, which a stop channel can interrupt.
const coarse = 2 * time.Millisecond

// Timer waits for instants precisely (see the package doc).
type Timer struct {
	t  *time.Timer
	fd fdTimer
}

// NewTimer makes a Timer.
func NewTimer() *Timer {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return &Timer{t: t, fd: newFDTimer()}
}

// Close releases the timer.
func (t *Timer) Close() {
	t.t.Stop()
	t.fd.close()
}

// Until waits until due. It returns false if stop closed first, and
// whether it slept at all (due was still ahead).
func (t *Timer) Until(stop <-chan struct{}, due time.Time) (ok, slept bool) {
	for {
		d := time.Until(due)
		if d <= 0 {
			return true, slept
		}
		slept = true
		if d > coarse {
			t.t.Reset(d - coarse)
			select {
			case <-stop:
				t.t.Stop()
				return false, true
			case <-t.t.C:
			}
			continue
		}
		select {
		case <-stop:
			return false, true
		default:
		}
		t.fd.sleep(d, due)
	}
}

// Pacer meets instants (see the package doc).
type Pacer struct {
	t *Timer
	// late holds the last wake-ups' lateness, a ring; lead is how early
	// the next wait wakes, from it.
	late  [lateRing]time.Duration
	nLate int
	nReal int // wake-ups from sleeps as long as the instants' gaps
	lead  time.Duration
	spin  Spinner
	wakes []float64 // ms, every wake's lateness
	leads []float64 // ms, how early each wake aimed before its instant
	last  time.Time // the instant Wake last woke for
	slept bool      // the last Wake slept: it came before its early instant
}

const (
	lateRing = 128
	// minLead and maxLead bound how early the pacer wakes: a wake-up is
	// never exact (minLead covers the spin's start), and past maxLead the
	// spin costs more CPU than a late send is worth (a send still late is
	// counted by its level). A virtual machine's processor that idled for
	// long wakes milliseconds late (the host ran something else), so the
	// pacer starts at maxLead and comes down to what it measured: a late
	// first send costs more than a few milliseconds of spinning.
	minLead  = 300 * time.Microsecond
	maxLead  = 10 * time.Millisecond
	leadPad  = 150 * time.Microsecond
	settle   = 16 // wake-ups before the lead may come down
	maxWakes = 1 << 20
)

// NewPacer makes a Pacer.
func NewPacer() *Pacer {
	// The lead is at most a quarter of the time between instants, so the
	// waits of its sends never overlap: with a second processor they need
	// not yield.
	return &Pacer{t: NewTimer(), lead: maxLead, spin: Spinner{Own: runtime.GOMAXPROCS(0) > 1}}
}

// Expect makes room for n wake-ups' figures (Wakes, Leads) before the
// first: grown as they come instead, each growth copies every figure so
// far, on the pacer's goroutine right after a wake-up, and a copy of a
// long level's hundreds of thousands holds the processor for milliseconds.
func (p *Pacer) Expect(n int) {
	n = min(n, maxWakes)
	if n > cap(p.wakes) {
		p.wakes = slices.Grow(p.wakes, n-len(p.wakes))
		p.leads = slices.Grow(p.leads, n-len(p.leads))
	}
}

// Close releases the pacer's timer.
func (p *Pacer) Close() { p.t.Close() }

// Wake returns ahead of due by the pacer's lead (or, when the machine woke
// it late, as soon after as it could), for the rest to be waited on
// Spinner; false if stop closed first.
func (p *Pacer) Wake(stop <-chan struct{}, due time.Time) bool {
	lead := p.lead
	if !p.last.IsZero() {
		lead = min(lead, due.Sub(p.last)/4)
	}
	p.last = due
	target := due.Add(-lead)
	p.slept = time.Now().Before(target)
	if !p.slept {
		select {
		case <-stop:
			return false
		default:
			return true
		}
	}
	ok, slept := p.t.Until(stop, target)
	if !ok {
		return false
	}
	if slept {
		p.note(time.Since(target), true, true)
		if len(p.leads) < maxWakes {
			p.leads = append(p.leads, float64(lead)/float64(time.Millisecond))
		}
	}
	return true
}

// Slept says the last Wake came before its early instant and slept: the
// pacer was not behind.
func (p *Pacer) Slept() bool { return p.slept }

// Calibrate measures n of the machine's wake-ups from sleeps of gap, the
// time between instants, before the first instant, so that the lead is
// right from the first one; it takes about n × gap. A sleep is at most
// 20 ms: a longer gap's wake-ups (a processor idle for longer may wake
// later) raise the lead but do not bring it down.
func (p *Pacer) Calibrate(n int, gap time.Duration) {
	const longest = 20 * time.Millisecond
	d := min(max(gap, 50*time.Microsecond), longest)
	for range n {
		target := time.Now().Add(d)
		if _, slept := p.t.Until(nil, target); slept {
			p.note(time.Since(target), false, gap <= longest)
		}
	}
}

// Spinner is the pacer's, for the rest of each wait after Wake; safe for
// concurrent use.
func (p *Pacer) Spinner() *Spinner { return &p.spin }

// Spinner waits the last moments before instants awake. On a processor of
// its own (Own) it spins without yielding: a yield hands the goroutine to
// the scheduler, which may wake another thread to take it, and on a
// virtual machine a thread woken on an idle processor can start
// milliseconds late. Otherwise it yields to other goroutines until the
// instant is closer than a yield takes (at most maxTight), then spins.
// Any number of goroutines may wait on one Spinner at once.
type Spinner struct {
	// Own says the waits need not yield: there is a processor beside the
	// one that spins (GOMAXPROCS > 1) and the waits do not overlap, so
	// they never hold every processor.
	Own   bool
	yield atomic.Int64 // ns: the longest recent yield, decaying
	busy  atomic.Int64 // ns spent waiting awake
}

// maxTight bounds the wait a yielding Spinner spends without yielding.
const maxTight = 100 * time.Microsecond

// Until returns at due, or at once when due has passed.
func (s *Spinner) Until(due time.Time) {
	start := time.Now()
	now := start
	for {
		left := due.Sub(now)
		if left <= 0 {
			break
		}
		if y := time.Duration(s.yield.Load()); !s.Own && left > min(2*y+20*time.Microsecond, maxTight) {
			runtime.Gosched()
			took := time.Since(now)
			s.yield.Store(int64(max(took, y-y/64)))
		}
		now = time.Now()
	}
	if now != start {
		s.busy.Add(int64(now.Sub(start)))
	}
}

// Busy is the time spent waiting awake, over every goroutine: the
// Spinner's CPU.
func (s *Spinner) Busy() time.Duration { return time.Duration(s.busy.Load()) }

// note keeps one wake-up's lateness (in Wakes, with keep) and sets the
// lead from the ring: a later wake-up than the lead covers raises it at
// once; every few wake-ups, once settle of them were real (from sleeps as
// long as the instants' gaps), it comes down to the latest of the ring's.
func (p *Pacer) note(late time.Duration, keep, real bool) {
	p.late[p.nLate%lateRing] = late
	p.nLate++
	if real {
		p.nReal++
	}
	if keep && len(p.wakes) < maxWakes {
		p.wakes = append(p.wakes, float64(late)/float64(time.Millisecond))
	}
	if late+leadPad > p.lead {
		p.lead = min(late+leadPad, maxLead)
	}
	if p.nReal >= settle && p.nLate%8 == 0 {
		p.setLead()
	}
}

// setLead sets the lead to the ring's latest wake-up and a margin, within
// bounds.
func (p *Pacer) setLead() {
	q := slices.Max(p.late[:min(p.nLate, lateRing)])
	p.lead = min(max(q+leadPad, minLead), maxLead)
}

// Lead is how early the pacer now aims to wake before an instant, from
// the wake-ups it measured; a wait aims at most a quarter of the time
// since the instant before (Leads).
func (p *Pacer) Lead() time.Duration { return p.lead }

// Leads are how early (ms) each wake-up the pacer slept for aimed before
// its instant: the lead, or a quarter of the time since the instant
// before where that was less.
func (p *Pacer) Leads() []float64 { return p.leads }

// Busy is the time the pacer's Spinner has spent awake, waiting for
// instants: its CPU beyond the sleeps.
func (p *Pacer) Busy() time.Duration { return p.spin.Busy() }

// Wakes are the lateness (ms) of every wake-up the pacer slept for.
func (p *Pacer) Wakes() []float64 { return p.wakes }

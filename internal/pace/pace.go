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
// its own wake-ups (a high quantile of the last ones, so a machine whose
// wake-ups run milliseconds late is met too) and spins the rest, yielding
// to other goroutines until the instant is closer than a yield takes. It
// spins at most a quarter of the time between instants: a processor that
// spins never polls the network (Go's scheduler polls it when a processor
// runs out of work, else every 10 ms), and at instants that close the
// processor is seldom idle long enough to wake late.
//
// Neither is safe for concurrent use; Close releases the timerfd.
package pace

import (
	"runtime"
	"slices"
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
	lead  time.Duration
	yield time.Duration // the longest recent yield, decaying
	scr   []time.Duration
	busy  time.Duration
	wakes []float64 // ms, every wake's lateness
	last  time.Time // when Until last returned
}

const (
	lateRing = 128
	// minLead and maxLead bound how early the pacer wakes: a wake-up is
	// never exact (minLead covers the spin's start), and past maxLead the
	// spin costs more CPU than a late send is worth (a send still late is
	// counted by its level).
	minLead   = 300 * time.Microsecond
	maxLead   = 5 * time.Millisecond
	leadPad   = 150 * time.Microsecond
	firstLead = 1500 * time.Microsecond
	maxWakes  = 1 << 20
)

// NewPacer makes a Pacer.
func NewPacer() *Pacer {
	return &Pacer{t: NewTimer(), lead: firstLead, scr: make([]time.Duration, 0, lateRing)}
}

// Close releases the pacer's timer.
func (p *Pacer) Close() { p.t.Close() }

// Until returns at due, or as soon after as the machine let it; false if
// stop closed first.
func (p *Pacer) Until(stop <-chan struct{}, due time.Time) bool {
	lead := p.lead
	if !p.last.IsZero() {
		lead = min(lead, due.Sub(p.last)/4)
	}
	target := due.Add(-lead)
	ok, slept := p.t.Until(stop, target)
	if !ok {
		return false
	}
	woke := time.Now()
	if slept {
		p.note(woke.Sub(target))
	}
	for {
		now := time.Now()
		left := due.Sub(now)
		if left <= 0 {
			break
		}
		if left > 2*p.yield+20*time.Microsecond {
			runtime.Gosched()
			y := time.Since(now)
			p.yield = max(y, p.yield-p.yield/64)
		}
	}
	p.last = time.Now()
	p.busy += p.last.Sub(woke)
	return true
}

// note keeps one wake-up's lateness and, every few, sets the lead.
func (p *Pacer) note(late time.Duration) {
	p.late[p.nLate%lateRing] = late
	p.nLate++
	if len(p.wakes) < maxWakes {
		p.wakes = append(p.wakes, float64(late)/float64(time.Millisecond))
	}
	if p.nLate <= 8 || p.nLate%8 == 0 {
		p.setLead()
	}
}

// setLead sets the lead from the ring: its second-highest lateness (about
// the 99th percentile of the last 128) and a margin, within bounds.
func (p *Pacer) setLead() {
	p.scr = append(p.scr[:0], p.late[:min(p.nLate, lateRing)]...)
	slices.Sort(p.scr)
	q := p.scr[max(len(p.scr)-2, 0)]
	p.lead = min(max(q+leadPad, minLead), maxLead)
}

// Lead is how early the pacer now wakes before an instant.
func (p *Pacer) Lead() time.Duration { return p.lead }

// Busy is the time the pacer has spun, awake, waiting for instants: its
// CPU beyond the sleeps.
func (p *Pacer) Busy() time.Duration { return p.busy }

// Wakes are the lateness (ms) of every wake-up the pacer slept for.
func (p *Pacer) Wakes() []float64 { return p.wakes }

package pace

import (
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"
)

// TestPacerNeverEarly: whatever its lead, a wait woken by the pacer and
// finished on its Spinner returns at or after each instant, never before,
// over instants near and far apart.
func TestPacerNeverEarly(t *testing.T) {
	p := NewPacer()
	defer p.Close()
	due := time.Now()
	for i := range 300 {
		due = due.Add(time.Duration(50+(i*7919)%3000) * time.Microsecond)
		if !p.Wake(nil, due) {
			t.Fatal("Wake reported a stop with no stop channel")
		}
		p.Spinner().Until(due)
		if now := time.Now(); now.Before(due) {
			t.Fatalf("wait %d returned %v before its instant", i, due.Sub(now))
		}
	}
	if p.Busy() <= 0 {
		t.Errorf("Busy() = %v after 300 waits with spins, want > 0", p.Busy())
	}
}

// TestPacerLead: the lead is the latest of the recent wake-ups' lateness
// and a margin, within its bounds.
func TestPacerLead(t *testing.T) {
	for _, c := range []struct {
		name string
		late []time.Duration
		want time.Duration
	}{
		{"quiet", []time.Duration{10 * time.Microsecond, 20 * time.Microsecond, 30 * time.Microsecond}, minLead},
		{"an outlier kept while in the ring", append(slices.Repeat([]time.Duration{400 * time.Microsecond}, 200), 4*time.Millisecond), 4*time.Millisecond + leadPad},
		{"old wake-ups forgotten", append(slices.Repeat([]time.Duration{3 * time.Millisecond}, 50), slices.Repeat([]time.Duration{500 * time.Microsecond}, 128)...), 500*time.Microsecond + leadPad},
		{"late wake-ups", []time.Duration{time.Millisecond, 2 * time.Millisecond, 3 * time.Millisecond, 900 * time.Microsecond}, 3*time.Millisecond + leadPad},
		{"past the bound", []time.Duration{20 * time.Millisecond, 30 * time.Millisecond}, maxLead},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := &Pacer{lead: maxLead}
			for _, l := range c.late {
				p.note(l, true, true)
			}
			p.setLead()
			if got := p.Lead(); got != c.want {
				t.Errorf("Lead() after %d wake-ups = %v, want %v", p.nLate, got, c.want)
			}
			if len(p.Wakes()) != p.nLate {
				t.Errorf("Wakes() holds %d, want %d", len(p.Wakes()), p.nLate)
			}
		})
	}
}

// TestPacerLeads: each sleep aims the learned lead before its instant, or a
// quarter of the time since the instant before where that is less, and
// Leads keeps what each one aimed; the learned lead is unchanged by the cap.
func TestPacerLeads(t *testing.T) {
	p := NewPacer()
	defer p.Close()
	due := time.Now().Add(30 * time.Millisecond)
	kept := 0
	for i := range 5 {
		if i > 0 {
			due = due.Add(20 * time.Millisecond) // a quarter is 5 ms, under the 10 ms a new pacer learned
		}
		if !p.Wake(nil, due) {
			t.Fatal("Wake reported a stop with no stop channel")
		}
		// A wake-up late past the next aim (a busy machine) skips that
		// sleep, and keeps no lead: each kept lead is judged against its own.
		leads := p.Leads()
		if len(leads) == kept {
			continue
		}
		kept = len(leads)
		want := 5.0 // ms: a quarter of the 20 ms gap
		if i == 0 {
			want = float64(maxLead) / 1e6 // no instant before: the learned lead
		}
		if got := leads[kept-1]; got != want {
			t.Errorf("sleep %d aimed %.3f ms early, want %.3f", i, got, want)
		}
	}
	if kept == 0 {
		t.Logf("no sleep kept a lead: every wake-up came past the next one's aim (a busy machine); leads not judged")
	}
	if p.Lead() != maxLead {
		t.Errorf("Lead() = %v, want the learned %v, whatever the cap", p.Lead(), maxLead)
	}
}

// TestPacerLeadSettles: a new pacer wakes maxLead early until it has seen
// enough wake-ups to come down; a wake-up later than its lead raises the
// lead at once.
func TestPacerLeadSettles(t *testing.T) {
	p := &Pacer{lead: maxLead}
	for i := range settle - 1 {
		p.note(10*time.Microsecond, true, true)
		if p.Lead() != maxLead {
			t.Fatalf("after %d punctual wake-ups the lead is %v, want %v until %d", i+1, p.Lead(), maxLead, settle)
		}
	}
	p.note(10*time.Microsecond, true, true)
	if p.Lead() != minLead {
		t.Fatalf("after %d punctual wake-ups the lead is %v, want %v", settle, p.Lead(), minLead)
	}
	p.note(2*time.Millisecond, true, true)
	if want := 2*time.Millisecond + leadPad; p.Lead() != want {
		t.Errorf("a wake-up 2 ms late left the lead at %v, want %v at once", p.Lead(), want)
	}
}

// TestSpinnerNeverEarly: goroutines waiting on one Spinner at once each
// return at or after their instant, and the Spinner counts their time.
func TestSpinnerNeverEarly(t *testing.T) {
	var s Spinner
	var early atomic.Int64
	var wg sync.WaitGroup
	base := time.Now()
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				due := base.Add(time.Duration(g*37+i*211) * time.Microsecond)
				s.Until(due)
				if time.Now().Before(due) {
					early.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if n := early.Load(); n > 0 {
		t.Errorf("%d of 200 waits returned before their instant", n)
	}
	// A wait whose instant is still ahead counts its time (a process kept
	// off its core may find an instant passed: it tries again).
	before := s.Busy()
	for i := 0; i < 100 && s.Busy() == before; i++ {
		s.Until(time.Now().Add(time.Millisecond))
	}
	if s.Busy() <= before {
		t.Errorf("Busy() stayed %v over 100 waits of 1 ms, want it to grow", s.Busy())
	}
}

// TestTimerStops: a closed stop channel ends a wait at once, long or short.
func TestTimerStops(t *testing.T) {
	tm := NewTimer()
	defer tm.Close()
	stop := make(chan struct{})
	close(stop)
	for _, d := range []time.Duration{time.Hour, time.Millisecond} {
		t0 := time.Now()
		if ok, _ := tm.Until(stop, t0.Add(d)); ok {
			t.Errorf("Until(%v) with a closed stop = true, want false", d)
		}
		if e := time.Since(t0); e > 100*time.Millisecond {
			t.Errorf("Until(%v) with a closed stop took %v", d, e)
		}
	}
}

// TestTimerOnTimeWhileBusy: with every processor kept busy by a goroutine
// that yields in a loop, no processor polls the network, and a wait on a
// timerfd alone would be noticed only by the runtime's monitor, up to
// 10 ms late. The timer's deadline wakes it as a Go timer does. Each wait
// on the timer is paired with a time.Sleep of the same length under the
// same load, and the timer's median lateness is judged against the
// sleeps'; where the machine itself made time.Sleep late (its median over
// 1 ms) the test says so and does not judge.
//
// On a machine whose cores other processes contend for, the kernel takes
// this busy thread off its core for milliseconds at regular intervals,
// and a fixed schedule of waits falls into step with them, the first
// wait of each pair the one held off: so the pairs' order alternates and
// their lengths are random, and neither kind of wait is the one the
// machine's rhythm favours.
func TestTimerOnTimeWhileBusy(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	var stop atomic.Bool
	done := make(chan struct{})
	go func() {
		defer close(done)
		for !stop.Load() {
			runtime.Gosched()
		}
	}()
	defer func() { stop.Store(true); <-done }()
	tm := NewTimer()
	defer tm.Close()
	const n = 60
	var timer, sleep []float64
	onTimer := func(d time.Duration) {
		due := time.Now().Add(d)
		tm.Until(nil, due)
		timer = append(timer, ms(time.Since(due)))
	}
	onSleep := func(d time.Duration) {
		due := time.Now().Add(d)
		time.Sleep(time.Until(due))
		sleep = append(sleep, ms(time.Since(due)))
	}
	for i := range n {
		d := time.Millisecond + rand.N(2*time.Millisecond)
		if i%2 == 0 {
			onTimer(d)
			onSleep(d)
		} else {
			onSleep(d)
			onTimer(d)
		}
	}
	slices.Sort(timer)
	slices.Sort(sleep)
	if sleep[n/2] > 1 {
		t.Skipf("the machine kept this process waiting: time.Sleep woke p50 %.3f ms late, too late to judge the timer against", sleep[n/2])
	}
	if b := timer[n/2] - sleep[n/2]; b > 1 {
		t.Errorf("with the processor busy, the timer woke p50 %.3f ms late, %.3f ms later than time.Sleep beside it (p50 %.3f ms late): the timer waited for the network poll", timer[n/2], b, sleep[n/2])
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// TestCalibrate: wake-ups measured from sleeps as long as the instants'
// gaps settle the lead before the first instant; from sleeps shorter than
// the gaps (a gap of a second is slept 20 ms at a time) they do not bring
// it down, since a processor idle for longer may wake later. Neither is
// kept among the level's wake-ups.
func TestCalibrate(t *testing.T) {
	p := NewPacer()
	defer p.Close()
	p.Calibrate(settle, time.Second)
	if p.Lead() != maxLead || p.nLate > settle || len(p.Wakes()) != 0 {
		t.Errorf("after calibrating for 1 s gaps: lead %v (want %v), %d wake-ups measured (want at most %d), %d kept (want 0)", p.Lead(), maxLead, p.nLate, settle, len(p.Wakes()))
	}
	q := NewPacer()
	defer q.Close()
	q.Calibrate(settle, time.Millisecond)
	// A process kept off its core between setting a 1 ms sleep and
	// starting it finds it passed and measures nothing: then the lead has
	// not settled and stays where it started.
	want := maxLead
	if q.nReal >= settle {
		want = min(max(slices.Max(q.late[:min(q.nLate, lateRing)])+leadPad, minLead), maxLead)
	} else {
		t.Logf("%d of %d calibration sleeps started in time (a busy machine)", q.nReal, settle)
	}
	if q.Lead() != want || len(q.Wakes()) != 0 {
		t.Errorf("after calibrating for 1 ms gaps: lead %v, want %v (the latest of %d wake-ups and the margin); %d kept, want 0", q.Lead(), want, q.nLate, len(q.Wakes()))
	}
}

// TestPacerExpect: room made for a level's wake-ups holds all of them, so
// keeping one never copies the ones before; beyond maxWakes it is capped.
func TestPacerExpect(t *testing.T) {
	p := NewPacer()
	defer p.Close()
	const n = 5000
	p.Expect(n)
	if cap(p.wakes) < n || cap(p.leads) < n {
		t.Fatalf("Expect(%d) made room for %d wake-ups and %d leads", n, cap(p.wakes), cap(p.leads))
	}
	p.note(time.Microsecond, true, true)
	first := unsafe.SliceData(p.wakes)
	for range n - 1 {
		p.note(time.Microsecond, true, true)
	}
	if len(p.Wakes()) != n || unsafe.SliceData(p.wakes) != first {
		t.Errorf("%d wake-ups kept, moved %v: want %d kept where Expect made room", len(p.Wakes()), unsafe.SliceData(p.wakes) != first, n)
	}
	big := NewPacer()
	defer big.Close()
	if big.Expect(4 * maxWakes); cap(big.wakes) > maxWakes+maxWakes/8 {
		t.Errorf("Expect(%d) made room for %d wake-ups, want at most about %d", 4*maxWakes, cap(big.wakes), maxWakes)
	}
}

// BenchmarkPacerKeep keeps a long level's wake-ups (maxWakes of them) and
// reports the longest single keep: without room made ahead (grown), the
// growth copies; with Expect, none.
func BenchmarkPacerKeep(b *testing.B) {
	for _, c := range []struct {
		name   string
		expect bool
	}{{"grown", false}, {"expected", true}} {
		b.Run(c.name, func(b *testing.B) {
			var longest time.Duration
			for b.Loop() {
				p := &Pacer{lead: maxLead}
				if c.expect {
					p.Expect(maxWakes)
				}
				for range maxWakes {
					t0 := time.Now()
					p.note(time.Microsecond, true, true)
					longest = max(longest, time.Since(t0))
				}
			}
			b.ReportMetric(float64(longest.Microseconds()), "longest-µs")
		})
	}
}

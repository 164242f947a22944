package gcroom

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"
	"time"
)

// read returns one runtime metric's value.
func read(name string) uint64 {
	s := []metrics.Sample{{Name: name}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

func gogc() uint64 { return read("/gc/gogc:percent") }

// atPercent runs the test from GOGC=100 with none in the environment, and
// puts back what was there.
func atPercent(t *testing.T) {
	t.Helper()
	t.Setenv("GOGC", "")
	old := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(old) })
	runtime.GC()
}

func TestHoldRaisesAndRestores(t *testing.T) {
	atPercent(t)
	const want = 64 << 20
	got, release := Hold(want)
	if got < want {
		release()
		t.Skipf("the machine spares a room of %d bytes, not 64 MiB", got)
	}
	if got > want {
		t.Errorf("granted %d bytes, more than the %d asked for", got, want)
	}
	// The heap may now grow by the room above what the last cycle left.
	base := read("/gc/heap/live:bytes") + read("/gc/scan/stack:bytes") + read("/gc/scan/globals:bytes")
	goal := read("/gc/heap/goal:bytes")
	if lo := base + uint64(got)*9/10; goal < lo {
		t.Errorf("heap goal %d bytes with %d scanned and a room of %d; want at least %d (GOGC %d)", goal, base, got, lo, gogc())
	}
	// A second hold overlapping the first keeps the room after the first
	// ends; the last release brings GOGC=100 back.
	_, release2 := Hold(want)
	release()
	release() // twice is once
	if p := gogc(); p <= 100 {
		t.Errorf("GOGC %d after the first of two holds ended; want the room kept", p)
	}
	release2()
	if p := gogc(); p != 100 {
		t.Errorf("GOGC %d after the last hold ended; want 100 again", p)
	}
}

// The room follows the live heap: after a cycle that finds more live, the
// percent is set again so that the heap may still grow by the room.
func TestHoldFollowsLiveHeap(t *testing.T) {
	atPercent(t)
	got, release := Hold(64 << 20)
	defer release()
	if got < 64<<20 {
		t.Skipf("the machine spares a room of %d bytes, not 64 MiB", got)
	}
	p0 := gogc()
	live := make([][]byte, 0, 32)
	for range 32 {
		live = append(live, make([]byte, 1<<20))
	}
	// The cleanup that sets the percent again runs after a cycle; one
	// that ran during the next cycle's marking waits a cycle more, as
	// its new sentinel was born marked.
	var want uint64
	deadline := time.Now().Add(5 * time.Second)
	for {
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
		want = uint64(percentFor(got, 100))
		if gogc() == want || time.Now().After(deadline) {
			break
		}
	}
	p1 := gogc()
	runtime.KeepAlive(live)
	if p1 != want || p1 >= p0 {
		t.Fatalf("GOGC %d with 32 MiB more live, %d before; want %d, so that the room stays %d bytes", p1, p0, want, got)
	}
	base := read("/gc/heap/live:bytes") + read("/gc/scan/stack:bytes") + read("/gc/scan/globals:bytes")
	if grow := base * p1 / 100; grow < uint64(got)*9/10 || grow > uint64(got)*11/10 {
		t.Errorf("heap may grow by %d bytes above %d scanned (GOGC %d); want the room, %d", grow, base, p1, got)
	}
}

func TestHoldLeavesUsersGOGC(t *testing.T) {
	atPercent(t)
	t.Setenv("GOGC", "100")
	got, release := Hold(64 << 20)
	defer release()
	if got != 0 || gogc() != 100 {
		t.Errorf("granted %d bytes, GOGC %d with GOGC=100 in the environment; want 0 and 100", got, gogc())
	}
}

// A percent set higher than the room needs, or collection turned off, is
// the program's and stays.
func TestHoldKeepsHigherPercentAndOff(t *testing.T) {
	atPercent(t)
	debug.SetGCPercent(1_000_000)
	got, release := Hold(64 << 20)
	if p := gogc(); p != 1_000_000 {
		t.Errorf("GOGC %d under a hold of %d bytes, want 1000000 kept", p, got)
	}
	release()
	if p := gogc(); p != 1_000_000 {
		t.Errorf("GOGC %d after the hold, want 1000000", p)
	}
	debug.SetGCPercent(-1)
	got, release = Hold(64 << 20)
	if p := int64(gogc()); got != 0 || p != -1 {
		t.Errorf("granted %d bytes, GOGC %d with collection off; want 0 and off (-1)", got, p)
	}
	release()
	if p := int64(gogc()); p != -1 {
		t.Errorf("GOGC %d after the hold, want off (-1)", p)
	}
}

// churn allocates n bytes of short-lived garbage in 1 KiB objects and
// returns the garbage collection cycles that ran meanwhile.
func churn(n int) uint64 {
	c0 := read("/gc/cycles/total:gc-cycles")
	var keep []byte
	for range n >> 10 {
		keep = make([]byte, 1<<10)
	}
	runtime.KeepAlive(keep)
	return read("/gc/cycles/total:gc-cycles") - c0
}

// What the room is for: 256 MiB of garbage, which at GOGC=100 over a small
// live heap takes dozens of cycles, takes a few with a room of 64 MiB.
func TestHoldMakesCyclesRare(t *testing.T) {
	atPercent(t)
	const garbage = 256 << 20
	without := churn(garbage)
	got, release := Hold(64 << 20)
	if got < 64<<20 {
		release()
		t.Skipf("the machine spares a room of %d bytes, not 64 MiB", got)
	}
	with := churn(garbage)
	release()
	// Each cycle may start before the heap reaches its goal, and the
	// first one's goal was set before the hold: allow twice the quotient
	// and one more.
	if most := 2*uint64(garbage/got) + 1; with > most {
		t.Errorf("%d cycles for %d MiB of garbage with a room of %d MiB; want at most %d", with, garbage>>20, got>>20, most)
	}
	if without < 4*with {
		t.Errorf("%d cycles without the room and %d with it; want at least 4 times fewer with it", without, with)
	}
	t.Logf("%d MiB of garbage: %d cycles at GOGC=100, %d with a room of %d MiB", garbage>>20, without, with, got>>20)
}

package busy

import (
	"testing"
	"time"
)

// TestWatch: a watch's sleeps last at least their millisecond, so 50 ms
// hold at most 51 of them, never early; its figures are in order; Quiet
// follows QuietWait, and a watch that never woke is not quiet.
func TestWatch(t *testing.T) {
	w := Start()
	time.Sleep(50 * time.Millisecond)
	l := w.Stop()
	if l.Samples > 51 {
		t.Errorf("%d samples in 50 ms of 1 ms sleeps", l.Samples)
	}
	if l.Samples > 0 && (l.P50Ms < 0 || l.P50Ms > l.P99Ms || l.P99Ms > l.MaxMs) {
		t.Errorf("lag %v: out of order or negative", l)
	}
	t.Log(l)
	if (Lag{}).Quiet() {
		t.Error("a watch that never woke says the machine was quiet")
	}
	if !(Lag{Samples: 10, WaitMs: QuietWait * 50, WallMs: 100}).Quiet() || (Lag{Samples: 10, WaitMs: QuietWait * 200, WallMs: 100}).Quiet() ||
		(Lag{Samples: 10, StealMs: QuietWait * 200, WallMs: 100}).Quiet() {
		t.Error("Quiet does not follow QuietWait")
	}
}

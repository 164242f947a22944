package load

import (
	"testing"

	"github.com/tokbench/tokbench/metrics"
)

// fakeCurve is a server that saturates at 1600 tok/s: per-user speed 100
// until aggregate hits the cap.
func fakeCurve(c int) metrics.Level {
	per := 100.0
	if float64(c)*per > 1600 {
		per = 1600 / float64(c)
	}
	lv := metrics.Level{Load: metrics.Load{Mode: "concurrency", Concurrency: c}, OutputTPS: per * float64(c)}
	lv.Requests.Completed = 10
	lv.DecodeTPS = metrics.Stats{Count: 10, P5: per * 0.9, P50: per}
	lv.TTFT = metrics.Stats{Count: 10, P95: 50 * float64(c)}
	return lv
}

func sweep(t *testing.T, a *AutoSweep) []int {
	t.Helper()
	var done []metrics.Level
	var got []int
	for i := 0; i < 30; i++ {
		c, ok := a.Next(done)
		if !ok {
			return got
		}
		got = append(got, c)
		lv := fakeCurve(c)
		metrics.JudgeSLOs(&lv, a.SLOs)
		done = append(done, lv)
	}
	t.Fatal("sweep did not end")
	return nil
}

func TestAutoSweepFindsSaturationAndKnee(t *testing.T) {
	got := sweep(t, &AutoSweep{Max: 256, Refine: 2})
	// Doubling: 1..16 grow ×2, 32 adds nothing (1600 → 1600): stop.
	// Knee is 16 (product 1600·100); refine between 16 and 32: 24, then 16..24: 20.
	want := []int{1, 2, 4, 8, 16, 32, 24, 20}
	if len(got) != len(want) {
		t.Fatalf("sweep = %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("sweep = %v, want %v", got, want)
		}
	}
}

func TestAutoSweepStopsOnBrokenSLO(t *testing.T) {
	slos, _ := metrics.ParseSLOs("ttft_p95<=300ms")
	got := sweep(t, &AutoSweep{Max: 256, Refine: 2, SLOs: slos})
	// TTFT p95 = 50·c: 8 → 400 (broken by 33%), 16 → 800 (broken by 167%: stop).
	// Boundary 4 (passes, 200) .. 8 (fails): refine to 6 (300, passes), then 6..8: 7.
	want := []int{1, 2, 4, 8, 16, 6, 7}
	if len(got) != len(want) {
		t.Fatalf("sweep = %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("sweep = %v, want %v", got, want)
		}
	}
}

package metrics

import (
	"math"
	"strings"
	"testing"
)

func near(a, b, tol float64) bool { return math.Abs(a-b) <= tol }

func TestPercentileMatchesNumpyLinear(t *testing.T) {
	// Values from numpy.percentile(x, p) with the default method.
	x := []float64{1, 2, 3, 4}
	for _, c := range []struct{ p, want float64 }{
		{50, 2.5}, {5, 1.15}, {95, 3.85}, {99, 3.97}, {25, 1.75}, {0, 1}, {100, 4},
	} {
		if got := Percentile(x, c.p); !near(got, c.want, 1e-12) {
			t.Errorf("Percentile(%v, %g) = %g, want %g", x, c.p, got, c.want)
		}
	}
	y := []float64{10, 20, 30, 40, 50, 60, 70, 80, 90, 100, 1000}
	// numpy.percentile(y, 99) = 910.0 ; p90 = 100.0 ; p10 = 20.0
	for _, c := range []struct{ p, want float64 }{{99, 910}, {90, 100}, {10, 20}} {
		if got := Percentile(y, c.p); !near(got, c.want, 1e-9) {
			t.Errorf("Percentile(y, %g) = %g, want %g", c.p, got, c.want)
		}
	}
}

func TestDescribe(t *testing.T) {
	s := Describe([]float64{4, 1, 3, 2})
	if s.Count != 4 || s.Mean != 2.5 || s.Min != 1 || s.Max != 4 || s.P50 != 2.5 {
		t.Fatalf("Describe = %+v", s)
	}
	// population stddev of 1..4 = sqrt(1.25)
	if !near(s.Stddev, math.Sqrt(1.25), 1e-12) {
		t.Errorf("stddev = %g", s.Stddev)
	}
	if (Describe(nil) != Stats{}) {
		t.Errorf("Describe(nil) not zero")
	}
}

func TestAssignTokens(t *testing.T) {
	cases := []struct {
		est   []int
		total int
		want  []int
	}{
		{[]int{1, 1, 1}, 3, []int{1, 1, 1}},
		{[]int{1, 1, 1}, 6, []int{2, 2, 2}},
		{[]int{1, 3, 1}, 7, []int{1, 5, 1}},
		{[]int{2, 2}, 3, []int{2, 1}},
		{[]int{1, 1, 1, 1}, 2, []int{1, 1, 0, 0}},
		{nil, 5, []int{}},
	}
	for _, c := range cases {
		got := AssignTokens(c.est, c.total)
		sum := 0
		for _, v := range got {
			sum += v
		}
		if len(c.est) > 0 && sum != c.total {
			t.Errorf("AssignTokens(%v, %d) sums to %d", c.est, c.total, sum)
		}
		for i := range c.want {
			if got[i] != c.want[i] {
				t.Errorf("AssignTokens(%v, %d) = %v, want %v", c.est, c.total, got, c.want)
				break
			}
		}
	}
}

func TestRecordDerived(t *testing.T) {
	// Chunks at 100 ms (1 token), 110 ms (1), 130 ms (2 tokens): 4 tokens.
	r := Record{OK: true, TTFTMs: 100, E2EMs: 130, OutputTokens: 4,
		ChunkMs: []float64{100, 110, 130}, ChunkTokens: []int{1, 1, 2}}
	tps, ok := r.DecodeTPS()
	if !ok || !near(tps, 3/0.030, 1e-9) {
		t.Errorf("DecodeTPS = %g, %v; want 100", tps, ok)
	}
	itl := r.AppendITL(nil)
	want := []float64{10, 10, 10}
	if len(itl) != 3 || itl[0] != want[0] || itl[1] != want[1] || itl[2] != want[2] {
		t.Errorf("ITL = %v, want %v", itl, want)
	}
	if e, _ := r.E2ETPS(); !near(e, 4/0.130, 1e-9) {
		t.Errorf("E2ETPS = %g", e)
	}
	single := Record{OutputTokens: 1, ChunkMs: []float64{5}, ChunkTokens: []int{1}}
	if _, ok := single.DecodeTPS(); ok {
		t.Error("DecodeTPS defined for one token")
	}
}

func TestSummarize(t *testing.T) {
	mk := func(off, ttft float64, n int, gap float64) Record {
		r := Record{OK: true, OffsetMs: off, TTFTMs: ttft, TTFVTMs: ttft, OutputTokens: n,
			OutputTokensRequested: 10, TokenSource: SourceUsage, InputTokens: 100}
		for i := 0; i < n; i++ {
			r.ChunkMs = append(r.ChunkMs, ttft+float64(i)*gap)
			r.ChunkTokens = append(r.ChunkTokens, 1)
		}
		r.E2EMs = r.ChunkMs[n-1]
		r.DoneMs = r.E2EMs + 1
		return r
	}
	recs := []Record{
		mk(0, 50, 10, 10),  // ends at 141
		mk(0, 60, 10, 20),  // ends at 241
		mk(141, 40, 5, 10), // ends at 141+81 = 222: short
		{OK: false, ErrorClass: "http_500", OffsetMs: 241, DoneMs: 3},
	}
	lv := Summarize(Load{Mode: "concurrency", Concurrency: 2}, recs, 0)
	if lv.Requests.Sent != 4 || lv.Requests.Completed != 3 || lv.Requests.Failed != 1 || lv.Requests.Errors["http_500"] != 1 {
		t.Fatalf("requests = %+v", lv.Requests)
	}
	if !near(lv.DurationS, 0.244, 1e-9) {
		t.Errorf("duration = %g, want 0.244", lv.DurationS)
	}
	if lv.OutputTokens != 25 || lv.InputTokens != 300 {
		t.Errorf("tokens out/in = %d/%d", lv.OutputTokens, lv.InputTokens)
	}
	if !near(lv.OutputTPS, 25/0.244, 1e-6) {
		t.Errorf("output tps = %g", lv.OutputTPS)
	}
	if lv.TTFT.Count != 3 || lv.TTFT.P50 != 50 || lv.TTFT.Min != 40 {
		t.Errorf("ttft = %+v", lv.TTFT)
	}
	// decode TPS: 9/0.09=100, 9/0.18=50, 4/0.04=100
	if lv.DecodeTPS.P50 != 100 || lv.DecodeTPS.Min != 50 {
		t.Errorf("decode tps = %+v", lv.DecodeTPS)
	}
	if lv.ITL.Count != 9+9+4 {
		t.Errorf("itl count = %d", lv.ITL.Count)
	}
	if lv.Shortfall.ShortRequests != 1 || lv.Shortfall.ReceivedTokens != 25 || len(lv.Warnings) != 1 {
		t.Errorf("shortfall = %+v warnings %v", lv.Shortfall, lv.Warnings)
	}
	if lv.TokenSource != SourceUsage || !near(lv.ErrorRate, 0.25, 1e-12) {
		t.Errorf("source %q error rate %g", lv.TokenSource, lv.ErrorRate)
	}
}

func TestSteadyTPS(t *testing.T) {
	// Two users, 1 token every 10 ms each, forever: 200 tokens/s in steady state.
	var recs []Record
	for u := 0; u < 2; u++ {
		for k := 0; k < 10; k++ {
			off := float64(k) * 100
			r := Record{OK: true, OffsetMs: off, OutputTokens: 10}
			for i := 0; i < 10; i++ {
				r.ChunkMs = append(r.ChunkMs, 5+float64(i)*10)
				r.ChunkTokens = append(r.ChunkTokens, 1)
			}
			r.DoneMs = 100
			recs = append(recs, r)
		}
	}
	got := Summarize(Load{Mode: "concurrency", Concurrency: 2}, recs, 1.0).SteadyOutputTPS
	// window [5, 900]: tokens at 5..895 step 10 = 90 per user, plus none at 900
	if want := 180 / 0.895; !near(got, want, 1e-9) {
		t.Errorf("steadyTPS = %g, want %g", got, want)
	}
}

// TestSteadyTPSAfterRamp: four users started 1 s apart (--ramp-up), each
// streaming 10 tokens/s back to back. The steady state begins when the
// fourth user streams (3.1 s), not when four requests have streamed (the
// first user's second request at 2.1 s, while user 4 has not started).
func TestSteadyTPSAfterRamp(t *testing.T) {
	var recs []Record
	for u := 0; u < 4; u++ {
		for j := 0; j < 5; j++ {
			r := Record{OK: true, OffsetMs: float64(u*1000 + j*2000), DoneMs: 2000, OutputTokens: 20}
			for i := 1; i <= 20; i++ {
				r.ChunkMs = append(r.ChunkMs, float64(i*100))
				r.ChunkTokens = append(r.ChunkTokens, 1)
			}
			recs = append(recs, r)
		}
	}
	got := Summarize(Load{Mode: "concurrency", Concurrency: 4}, recs, 13).SteadyOutputTPS
	// Window [3100, 11000] (the last send): user u streams a token every
	// 100 ms from u×1000+100 to u×1000+10000, so 70, 80, 80 and 80 fall
	// inside. From 2.1 s it would be 80+90+90+80 over 8.9 s = 38.2.
	if want := 310 / 7.9; !near(got, want, 1e-9) {
		t.Errorf("steadyTPS = %g, want %g (from the fourth user's first token)", got, want)
	}
}

func TestSummarizeFlagsIgnoredMaxTokens(t *testing.T) {
	r := Record{OK: true, OutputTokens: 30, OutputTokensRequested: 10, ChunkMs: []float64{1, 2}, ChunkTokens: []int{15, 15}}
	lv := Summarize(Load{Mode: "concurrency", Concurrency: 1}, []Record{r, r}, 1)
	if lv.Shortfall.LongRequests != 2 || len(lv.Warnings) != 1 || !strings.Contains(lv.Warnings[0], "ignores it") {
		t.Errorf("shortfall %+v warnings %v", lv.Shortfall, lv.Warnings)
	}
}

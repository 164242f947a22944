package metrics

import (
	"cmp"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"
	"time"
)

func TestCountsDescribeExactly(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var c Counts
	var vals []float64
	for range 10_001 {
		k := 1 + rng.IntN(6)
		if rng.IntN(50) == 0 {
			k = 40 // a burst of a multi-token chunk
		}
		c.Add(k)
		vals = append(vals, float64(k))
	}
	if got, want := c.Stats(), Describe(vals); got != want {
		t.Fatalf("counts %+v\nwant     %+v", got, want)
	}
	if (&Counts{}).Stats() != (Stats{}) {
		t.Fatal("empty counts are not empty stats")
	}
}

func TestSampleMovesToASketch(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	s := Sample{Limit: 1000}
	var vals []float64
	for range 50_000 {
		v := 20 + rng.ExpFloat64()*30 // a latency-like tail
		s.Add(v)
		vals = append(vals, v)
	}
	if !s.Sketched() || s.Values() != nil || s.Len() != 50_000 {
		t.Fatalf("sketched %v, %d values held, len %d", s.Sketched(), len(s.Values()), s.Len())
	}
	got, want := s.Stats(), Describe(vals)
	if got.Count != want.Count || got.Min != want.Min || got.Max != want.Max {
		t.Fatalf("count/min/max %d %g %g, want %d %g %g", got.Count, got.Min, got.Max, want.Count, want.Min, want.Max)
	}
	if math.Abs(got.Mean-want.Mean) > 1e-9*want.Mean || math.Abs(got.Stddev-want.Stddev) > 1e-9*want.Stddev {
		t.Fatalf("mean %g stddev %g, want %g %g", got.Mean, got.Stddev, want.Mean, want.Stddev)
	}
	for _, p := range []string{"p5", "p10", "p25", "p50", "p75", "p90", "p95", "p99"} {
		g, _ := got.Get(p)
		w, _ := want.Get(p)
		// The sketch's accuracy, plus what linear interpolation between
		// neighbouring ranks can add on 50,000 close values.
		if math.Abs(g-w) > (SketchAccuracy+0.002)*w {
			t.Errorf("%s %g, want %g within %.1f%%", p, g, w, 100*SketchAccuracy)
		}
	}
	small := Sample{Limit: 1000}
	for _, v := range vals[:1000] {
		small.Add(v)
	}
	if small.Sketched() || small.Stats() != Describe(vals[:1000]) {
		t.Fatal("a sample at its limit is not exact")
	}
}

// longLevel makes n records of a closed loop of c users: each request's
// first token after 100–200 ms, then tokens tokens 10 ms apart, one per
// chunk.
func longLevel(n, c, tokens int) []Record {
	rng := rand.New(rand.NewPCG(5, 6))
	recs := make([]Record, n)
	userFree := make([]float64, c)
	for i := range recs {
		u := i % c
		ttft := 100 + 100*rng.Float64()
		r := Record{ID: i, OK: true, OffsetMs: userFree[u], TTFTMs: ttft, OutputTokens: tokens, TokenSource: SourceUsage,
			Start: time.Unix(0, 0)}
		for k := range tokens {
			r.ChunkMs = append(r.ChunkMs, ttft+float64(k)*10)
			r.ChunkTokens = append(r.ChunkTokens, 1)
		}
		r.E2EMs = r.ChunkMs[tokens-1]
		r.DoneMs = r.E2EMs + 1
		userFree[u] += r.DoneMs
		recs[i] = r
	}
	return recs
}

func TestAccumulatorPastItsLimits(t *testing.T) {
	load := Load{Mode: ModeConcurrency, Concurrency: 8}
	recs := longLevel(4000, 8, 16)
	exact := Summarize(load, recs, 0)
	if exact.Precision != nil {
		t.Fatalf("a short level is approximate: %+v", exact.Precision)
	}
	defer func(r, k int) { requestLimit, tokenLimit = r, k }(requestLimit, tokenLimit)
	requestLimit, tokenLimit = 500, 5000
	long := Summarize(load, recs, 0)
	if long.Precision == nil || len(long.Precision.Sketched) == 0 {
		t.Fatal("no precision note past the limits")
	}
	if long.Requests.Completed != exact.Requests.Completed || long.Requests.Sent != exact.Requests.Sent || long.OutputTokens != exact.OutputTokens || long.OutputTPS != exact.OutputTPS || long.DurationS != exact.DurationS {
		t.Fatalf("counts differ: %+v %d %g, want %+v %d %g", long.Requests, long.OutputTokens, long.OutputTPS,
			exact.Requests, exact.OutputTokens, exact.OutputTPS)
	}
	near := func(name string, g, w, tol float64) {
		if math.Abs(g-w) > tol*math.Abs(w) {
			t.Errorf("%s %g, exact %g (tolerance %.2f%%)", name, g, w, 100*tol)
		}
	}
	for _, p := range []string{"p50", "p90", "p99", "mean", "max"} {
		g, _ := long.TTFT.Get(p)
		w, _ := exact.TTFT.Get(p)
		near("ttft "+p, g, w, SketchAccuracy+0.002)
		g, _ = long.ITL.Get(p)
		w, _ = exact.ITL.Get(p)
		near("itl "+p, g, w, SketchAccuracy+0.002)
	}
	if long.TokensPerChunk != exact.TokensPerChunk {
		t.Errorf("tokens per chunk %+v, want exactly %+v", long.TokensPerChunk, exact.TokensPerChunk)
	}
	// The steady window's end is cut at 100 ms bins: within one bin's
	// tokens (8 streams at 100 tok/s) of a level of ~40 s.
	near("steady tok/s", long.SteadyOutputTPS, exact.SteadyOutputTPS, 0.001)
}

func TestAccumulatorCountsGoodput(t *testing.T) {
	recs := longLevel(200, 4, 8)
	slos, err := ParseSLOs("ttft_p95<=150ms")
	if err != nil {
		t.Fatal(err)
	}
	load := Load{Mode: ModeConcurrency, Concurrency: 4}
	a := NewAccumulator(load, slos)
	for i := range recs {
		a.Add(&recs[i])
	}
	got := a.Level(0)
	want := Summarize(load, recs, 0)
	ApplySLOs(&want, recs, slos)
	if got.GoodputRPS != want.GoodputRPS || got.SLO == nil || got.SLO.Met != want.SLO.Met {
		t.Fatalf("goodput %g slo %+v, want %g %+v", got.GoodputRPS, got.SLO, want.GoodputRPS, want.SLO)
	}
	if want.GoodputRPS <= 0 || want.GoodputRPS >= want.RequestRPS {
		t.Fatalf("goodput %g of %g req/s: the test's SLO should pass some requests and fail others", want.GoodputRPS, want.RequestRPS)
	}
}

// BenchmarkAccumulatorLongLevel folds a long level's records (16 tokens
// each) and reports the memory the accumulator holds afterwards: bounded
// past the exact limits, whatever the level's length.
func BenchmarkAccumulatorLongLevel(b *testing.B) {
	recs := longLevel(4096, 64, 16)
	load := Load{Mode: ModeConcurrency, Concurrency: 64}
	var held float64
	for b.Loop() {
		a := NewAccumulator(load, nil)
		end := 0.0
		for round := range 400 { // 1.6M requests, 26M tokens
			for i := range recs {
				r := recs[i]
				r.OffsetMs += end * float64(round)
				a.Add(&r)
			}
			if round == 0 {
				end = a.end
			}
		}
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		held = float64(ms.HeapAlloc) / (1 << 20)
		lv := a.Level(0)
		if lv.Requests.Completed != 400*len(recs) || lv.Precision == nil {
			b.Fatalf("%d requests, precision %v", lv.Requests.Completed, lv.Precision)
		}
	}
	b.ReportMetric(held, "MB-held")
}

func TestAccumulatorWindows(t *testing.T) {
	load := Load{Mode: ModeConcurrency, Concurrency: 8}
	recs := longLevel(2000, 8, 16)
	// In the order the requests ended, as a runner adds them.
	slices.SortFunc(recs, func(x, y Record) int { return cmp.Compare(x.OffsetMs+x.DoneMs, y.OffsetMs+y.DoneMs) })
	a := NewAccumulator(load, nil)
	var emitted []Window
	a.Every(5*time.Second, func(w Window) { emitted = append(emitted, w) })
	for i := range recs {
		a.Add(&recs[i])
	}
	lv := a.Level(0)
	whole := Summarize(load, recs, 0)
	if len(lv.Windows) < 10 || len(emitted) != len(lv.Windows) {
		t.Fatalf("%d windows, %d emitted, for a level of %.1f s", len(lv.Windows), len(emitted), lv.DurationS)
	}
	sent, tokens := 0, 0
	for i, w := range lv.Windows {
		if w.EndS-w.StartS > 5+1e-9 || i > 0 && w.StartS != lv.Windows[i-1].EndS {
			t.Fatalf("window %d spans %g–%g s", i, w.StartS, w.EndS)
		}
		// Exactly the requests that ended inside it.
		n, tok := 0, 0
		for _, r := range recs {
			if end := (r.OffsetMs + r.DoneMs) / 1000; (end > w.StartS || i == 0) && (end <= w.EndS || i == len(lv.Windows)-1) {
				n++
				tok += r.OutputTokens
			}
		}
		if w.Requests.Sent != n || w.OutputTokens != tok {
			t.Fatalf("window %d: %d requests, %d tokens; %d and %d ended in it", i, w.Requests.Sent, w.OutputTokens, n, tok)
		}
		sent += w.Requests.Sent
		tokens += w.OutputTokens
	}
	if sent != whole.Requests.Sent || tokens != whole.OutputTokens || lv.TTFT != whole.TTFT {
		t.Fatalf("windows add to %d requests, %d tokens; the level has %d, %d", sent, tokens, whole.Requests.Sent, whole.OutputTokens)
	}
	if last := lv.Windows[len(lv.Windows)-1]; last.EndS != lv.DurationS {
		t.Fatalf("the last window ends at %g s, the level at %g", last.EndS, lv.DurationS)
	}
}

// TestWindowEdges: a request ending on a window's boundary is the earlier
// window's, so the last window never has no length; a request ending far
// past the open window skips to its own rather than closing one empty
// window per period.
func TestWindowEdges(t *testing.T) {
	load := Load{Mode: ModeConcurrency, Concurrency: 1}
	rec := func(end float64) Record {
		return Record{OK: true, TTFTMs: 1, E2EMs: end - 1, DoneMs: end, OutputTokens: 2, ChunkMs: []float64{1, end - 1}, ChunkTokens: []int{1, 1}}
	}
	a := NewAccumulator(load, nil)
	a.Every(time.Second, nil)
	for _, end := range []float64{500, 1000} {
		r := rec(end)
		a.Add(&r)
	}
	lv := a.Level(1)
	if len(lv.Windows) != 1 || lv.Windows[0].Requests.Sent != 2 || lv.Windows[0].EndS != 1 {
		t.Fatalf("windows %+v", lv.Windows)
	}
	a = NewAccumulator(load, nil)
	a.Every(time.Millisecond, nil)
	for _, end := range []float64{0.5, 1e7} { // the second ends 10^10 windows later
		r := rec(end)
		a.Add(&r)
	}
	lv = a.Level(0)
	if n := len(lv.Windows); n > maxEmptyWindows+2 || lv.Windows[n-1].Requests.Sent != 1 || lv.Windows[n-1].EndS-lv.Windows[n-1].StartS <= 0 {
		t.Fatalf("%d windows, last %+v", n, lv.Windows[n-1])
	}
}

// TestTurns: a conversation level's figures by turn, from the records'
// steps; failed requests and single ones stay out.
func TestTurns(t *testing.T) {
	a := NewAccumulator(Load{Mode: ModeConcurrency, Concurrency: 2}, nil)
	for chain := 1; chain <= 2; chain++ {
		for step := 1; step <= 3; step++ {
			a.Add(&Record{OK: true, Chain: chain, Step: step, InputTokens: 100 * step, TTFTMs: float64(10 * step),
				OutputTokens: 11, ChunkMs: []float64{float64(10 * step), float64(10*step) + 100}, ChunkTokens: []int{1, 10}})
		}
	}
	a.Add(&Record{Chain: 1, Step: 3, ErrorClass: "timeout"})
	lv := a.Level(0)
	if len(lv.Turns) != 3 {
		t.Fatalf("%d turns", len(lv.Turns))
	}
	for i, tu := range lv.Turns {
		k := float64(i + 1)
		if tu.Turn != i+1 || tu.Completed != 2 || tu.InputTokens.P50 != 100*k || tu.TTFT.P50 != 10*k || tu.DecodeTPS.P50 != 100 {
			t.Errorf("turn %d: %+v", i+1, tu)
		}
	}
	b := NewAccumulator(Load{Mode: ModeConcurrency, Concurrency: 1}, nil)
	b.Add(&Record{OK: true, TTFTMs: 5})
	if b.Level(0).Turns != nil {
		t.Error("single requests reported by turn")
	}
}

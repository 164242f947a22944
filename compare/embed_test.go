package compare

import (
	"math/rand/v2"
	"testing"

	"github.com/tokbench/tokbench/metrics"
)

// embedRun is an embeddings run of n requests at concurrency 2 whose
// latencies are about ms each.
func embedRun(ms float64, seed uint64) *Run {
	rng := rand.New(rand.NewPCG(seed, 1))
	load := metrics.Load{Mode: metrics.ModeConcurrency, Concurrency: 2}
	var recs []metrics.Record
	for range 40 {
		recs = append(recs, metrics.Record{OK: true, Load: load, EmbedInputs: 8, EmbedDims: 384, InputTokens: 2048,
			TokenSource: metrics.SourceUsage, DoneMs: ms * (0.9 + 0.2*rng.Float64())})
	}
	lv := metrics.Summarize(load, recs, 40*ms/2/1000)
	return &Run{Summary: metrics.Summary{Schema: metrics.Schema, Levels: []metrics.Level{lv}}, Records: recs}
}

// TestCompareEmbeddings: two embeddings runs compare on their latency and
// rates, tested per request; no token-stream row is shown.
func TestCompareEmbeddings(t *testing.T) {
	d := Compare(embedRun(100, 1), embedRun(150, 2), Options{})
	if len(d.Levels) != 1 {
		t.Fatalf("%d levels", len(d.Levels))
	}
	if r := findRow(t, d, 0, "embed_latency_p50"); r.Verdict != Worse || !r.Tested || r.Rel < 0.4 || r.Rel > 0.6 {
		t.Errorf("embed_latency_p50 = %+v, want worse by about 50%%", r)
	}
	if r := findRow(t, d, 0, "embed_inputs_per_s"); r.Verdict != "worse?" {
		t.Errorf("embed_inputs_per_s = %+v, want worse?", r)
	}
	for _, r := range d.Levels[0].Rows {
		if r.Metric.Stream || r.Metric.Name == "tool_call" {
			t.Errorf("row %s in an embeddings comparison", r.Name())
		}
	}
}

// TestCompareMixed: two live levels of completions and embeddings (the
// proxy's) compare on both: TTFT as much as the embeddings' latency.
func TestCompareMixed(t *testing.T) {
	mixed := func(ttft float64) *Run {
		r := embedRun(100, 3)
		load := r.Summary.Levels[0].Load
		for i := range 40 {
			at := ttft * (0.9 + 0.005*float64(i))
			r.Records = append(r.Records, metrics.Record{OK: true, Load: load, TTFTMs: at, E2EMs: at + 100,
				ChunkMs: []float64{at, at + 100}, ChunkTokens: []int{1, 9}, OutputTokens: 10, TokenSource: metrics.SourceUsage})
		}
		r.Summary.Levels[0] = metrics.Summarize(load, r.Records, 4)
		return r
	}
	d := Compare(mixed(40), mixed(80), Options{})
	if r := findRow(t, d, 0, "ttft_p50"); r.Verdict != Worse || r.Rel < 0.9 || r.Rel > 1.1 {
		t.Errorf("ttft_p50 = %+v, want worse by about 100%%", r)
	}
	if r := findRow(t, d, 0, "embed_latency_p50"); r.Verdict == Worse {
		t.Errorf("embed_latency_p50 = %+v: the same in both", r)
	}
}

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

package metrics_test

import (
	"bytes"
	"encoding/csv"
	"slices"
	"testing"

	"github.com/tokbench/tokbench/compare"
	"github.com/tokbench/tokbench/metrics"
	"github.com/tokbench/tokbench/report"
)

// meanChunkGap is a request's mean gap between its chunks, in ms.
func meanChunkGap(r *metrics.Record) (float64, bool) {
	n := len(r.ChunkMs)
	if n < 2 {
		return 0, false
	}
	return (r.ChunkMs[n-1] - r.ChunkMs[0]) / float64(n-1), true
}

// level is a completed level of 10 requests whose chunk gaps have the
// given p50.
func level(gapP50 float64) metrics.Level {
	return metrics.Level{
		Load:      metrics.Load{Mode: metrics.ModeConcurrency, Concurrency: 1},
		Requests:  metrics.Requests{Sent: 10, Completed: 10},
		DurationS: 1, OutputTPS: 100, RequestRPS: 10,
		ChunkGap: metrics.Stats{Count: 10, P50: gapP50, Mean: gapP50},
	}
}

// TestRegistryIsTheOnePlace adds a metric to metrics.Registry, and only
// there, and finds it in SLOs (a level's verdict and a request's
// goodput), repeated runs (per-run values and spread), compare (its row,
// tested per run, and a gate on it) and CSV (its column and value). It
// swaps the package's Registry while it runs, so no test of metrics may
// run in parallel with it (none calls t.Parallel).
func TestRegistryIsTheOnePlace(t *testing.T) {
	saved := metrics.Registry
	t.Cleanup(func() { metrics.Registry = saved })
	metrics.Registry = append(slices.Clip(saved), metrics.Metric{
		Name: "chunk_gap", Label: "chunk gap", Unit: "ms", LowerBetter: true,
		Dist:   func(l *metrics.Level) *metrics.Stats { return &l.ChunkGap },
		Sample: meanChunkGap,
		Key:    []string{"p50"}, Spread: []string{"p50"}, CSV: []string{"p50"},
	})

	// SLOs: a threshold in a time unit, judged on the level and on each
	// request (a request with gaps of 4 ms meets 5 ms; one of 8 ms not).
	slos, err := metrics.ParseSLOs("chunk_gap_p50<=5ms")
	if err != nil {
		t.Fatalf("ParseSLOs: %v", err)
	}
	for _, c := range []struct {
		p50 float64
		met bool
	}{{4, true}, {6, false}} {
		lv := level(c.p50)
		metrics.JudgeSLOs(&lv, slos)
		if lv.SLO == nil || len(lv.SLO.Checks) != 1 || lv.SLO.Met != c.met || lv.SLO.Checks[0].Value != c.p50 {
			t.Errorf("chunk_gap p50 %g against chunk_gap_p50<=5ms: %+v, want met %v with value %g", c.p50, lv.SLO, c.met, c.p50)
		}
	}
	fast := metrics.Record{OK: true, OutputTokens: 3, ChunkMs: []float64{10, 14, 18}, ChunkTokens: []int{1, 1, 1}, TTFTMs: 10, E2EMs: 18}
	slow := metrics.Record{OK: true, OutputTokens: 3, ChunkMs: []float64{10, 18, 26}, ChunkTokens: []int{1, 1, 1}, TTFTMs: 10, E2EMs: 26}
	if !metrics.MeetsAll(&fast, slos) || metrics.MeetsAll(&slow, slos) {
		t.Errorf("MeetsAll: gaps of 4 ms %v, of 8 ms %v; want true, false", metrics.MeetsAll(&fast, slos), metrics.MeetsAll(&slow, slos))
	}

	// Repeats: each run's value, and their range.
	fold := func(p50s ...float64) metrics.Level {
		var runs []metrics.Level
		for _, v := range p50s {
			runs = append(runs, level(v))
		}
		return metrics.MedianOfRuns(runs, nil)
	}
	a, b := fold(1, 1.1, 0.9), fold(2, 2.2, 1.8)
	if a.Repeats == nil || !slices.Equal(a.Repeats.PerRun["chunk_gap_p50"], []float64{1, 1.1, 0.9}) ||
		a.Repeats.Spread["chunk_gap_p50"] != [2]float64{0.9, 1.1} || a.ChunkGap.P50 != 1 {
		t.Errorf("MedianOfRuns: p50 %g, repeats %+v; want p50 1, per run [1 1.1 0.9], spread [0.9 1.1]", a.ChunkGap.P50, a.Repeats)
	}

	// compare: a row of its own, judged per run, and a gate.
	runA := &compare.Run{Dir: "a", Summary: metrics.Summary{Levels: []metrics.Level{a}}}
	runB := &compare.Run{Dir: "b", Summary: metrics.Summary{Levels: []metrics.Level{b}}}
	d := compare.Compare(runA, runB, compare.Options{})
	var row *compare.Row
	if len(d.Levels) == 1 {
		for i, r := range d.Levels[0].Rows {
			if r.Name() == "chunk_gap_p50" {
				row = &d.Levels[0].Rows[i]
			}
		}
	}
	if row == nil {
		t.Fatalf("compare: no chunk_gap_p50 row in %+v", d.Levels)
	}
	if row.A != 1 || row.B != 2 || row.Test != "per-run Welch t" || row.Verdict != compare.Worse {
		t.Errorf("compare row: A %g B %g test %q verdict %q; want 1, 2, per-run Welch t, worse", row.A, row.B, row.Test, row.Verdict)
	}
	conds, err := compare.ParseConditions("chunk_gap_p50>+50%")
	if err != nil {
		t.Fatalf("ParseConditions: %v", err)
	}
	if trips := d.Check(conds); len(trips) != 1 || !trips[0].Fails {
		t.Errorf("gate chunk_gap_p50>+50%% on 1 → 2 ms: %+v, want one that fails", trips)
	}

	// CSV: a column named with its unit, holding the level's value.
	var buf bytes.Buffer
	if err := report.CSV(&buf, metrics.Summary{Levels: []metrics.Level{level(3.5)}}); err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(&buf).ReadAll()
	if err != nil || len(rows) != 2 {
		t.Fatalf("CSV: %d rows, %v", len(rows), err)
	}
	i := slices.Index(rows[0], "chunk_gap_p50_ms")
	if i < 0 || i >= len(rows[1]) || rows[1][i] != "3.5" {
		t.Errorf("CSV header %q, row %q: want a chunk_gap_p50_ms column holding 3.5", rows[0], rows[1])
	}
}

// everyMetricLevel is a completed level in which every metric of the
// registry has the value v: every statistic of each distribution, and
// each aggregate.
func everyMetricLevel(v float64) metrics.Level {
	lv := metrics.Level{
		Load:      metrics.Load{Mode: metrics.ModeConcurrency, Concurrency: 1},
		Requests:  metrics.Requests{Sent: 10, Completed: 10},
		DurationS: 1, OutputTPS: v, SteadyOutputTPS: v, RequestRPS: v, GoodputRPS: v, ErrorRate: v,
	}
	for _, m := range metrics.Registry {
		if !m.Aggregate() {
			*m.Dist(&lv) = metrics.Stats{Count: 10, Mean: v, Min: v, P5: v, P10: v, P25: v, P50: v, P75: v, P90: v, P95: v, P99: v, Max: v}
		}
	}
	return lv
}

// TestEveryMetricIsTestedPerRun ranges over the registry: with three
// repeated runs a side, every statistic of every metric — the ones a gate
// may name, not only those compare shows — keeps each run's value, and a
// gate on it is judged by the per-run test, not by per-request samples
// (which ITL, pooling every request's gaps, does not even have).
func TestEveryMetricIsTestedPerRun(t *testing.T) {
	fold := func(vs ...float64) metrics.Level {
		var runs []metrics.Level
		for _, v := range vs {
			runs = append(runs, everyMetricLevel(v))
		}
		return metrics.MedianOfRuns(runs, nil)
	}
	a, b := fold(10, 11, 9), fold(20, 22, 18)
	d := compare.Compare(&compare.Run{Dir: "a", Summary: metrics.Summary{Levels: []metrics.Level{a}}},
		&compare.Run{Dir: "b", Summary: metrics.Summary{Levels: []metrics.Level{b}}}, compare.Options{})
	for _, m := range metrics.Registry {
		if len(m.RunStats()) == 0 {
			t.Errorf("%s: no statistic kept per run", m.Name)
		}
		for _, stat := range m.RunStats() {
			name := m.StatName(stat)
			if got := a.Repeats.PerRun[name]; !slices.Equal(got, []float64{10, 11, 9}) {
				t.Errorf("%s: per run %v, want [10 11 9]", name, got)
			}
			gate := name + ">+10%"
			conds, err := compare.ParseConditions(gate)
			if err != nil {
				t.Errorf("%s: %v", gate, err)
				continue
			}
			trips := d.Check(conds)
			if len(trips) != 1 || trips[0].Row.Test != "per-run Welch t" {
				t.Errorf("gate %s on repeated runs: %+v, want one judged by the per-run Welch t", gate, trips)
			}
		}
	}
}

package compare

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tokbench/tokbench/metrics"
	"github.com/tokbench/tokbench/results"
)

func TestMannWhitney(t *testing.T) {
	cases := []struct {
		x, y  []float64
		u, p  float64
		about string
	}{
		// scipy.stats.mannwhitneyu(males, females, method="asymptotic") from
		// scipy's documentation: statistic 17, p 0.11134688653314041.
		{[]float64{19, 22, 16, 29, 24}, []float64{20, 11, 17, 12}, 17, 0.11134688653314041, "scipy doc example"},
		// Complete separation of 5 and 5: U 0, z = (12.5−0.5)/sqrt(25·11/12).
		{[]float64{1, 2, 3, 4, 5}, []float64{6, 7, 8, 9, 10}, 0, math.Erfc(12 / math.Sqrt(25.0*11/12) / math.Sqrt2), "separated"},
		// Everything equal: no evidence at all.
		{[]float64{3, 3, 3}, []float64{3, 3, 3}, 4.5, 1, "all ties"},
		// Ties across samples: x ranks 1, 3, 3, 5.5 (sum 12.5, U 2.5); the
		// variance shrinks by Σ(t³−t)/(n(n−1)) = (24+6+6)/56.
		{[]float64{1, 2, 2, 3}, []float64{2, 3, 4, 4}, 2.5, math.Erfc((8 - 2.5 - 0.5) / math.Sqrt(16.0/12*(9-36.0/56)) / math.Sqrt2), "ties"},
	}
	for _, c := range cases {
		u, p := MannWhitney(c.x, c.y)
		if u != c.u || math.Abs(p-c.p) > 1e-9 {
			t.Errorf("%s: MannWhitney(%v, %v) = %v, %v, want %v, %v", c.about, c.x, c.y, u, p, c.u, c.p)
		}
	}
}

// level describes a synthetic load level: TTFT is uniform in
// ttft·[0.9, 1.1] ms and decode gaps uniform in gap·[0.95, 1.05] ms, so
// decode TPS is about 1000/gap.
type level struct {
	conc     int
	n        int
	ttft     float64
	gap      float64
	tokens   int
	seed     uint64
	failures int
}

// writeRun writes a run directory with results.Writer and returns it.
func writeRun(t *testing.T, meta map[string]string, levels ...level) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "run")
	w, err := results.Create(dir)
	if err != nil {
		t.Fatal(err)
	}
	target := metrics.Target{URL: "http://127.0.0.1:1/v1", API: "openai-chat", Model: "llama-3.1-8b", Simulated: true}
	if err := w.WriteRun(results.Run{Tool: "tokbench", Target: target, Meta: meta}); err != nil {
		t.Fatal(err)
	}
	s := metrics.Summary{Schema: metrics.Schema, Target: target}
	id := 0
	for li, lv := range levels {
		rng := rand.New(rand.NewPCG(lv.seed, uint64(li)))
		var recs []metrics.Record
		for range lv.n {
			r := metrics.Record{ID: id, Level: li, OK: true, Start: time.Unix(0, 0).UTC(), TokenSource: metrics.SourceUsage, OutputTokens: lv.tokens}
			r.TTFTMs = lv.ttft * (0.9 + 0.2*rng.Float64())
			r.TTFVTMs = r.TTFTMs
			at := r.TTFTMs
			for k := range lv.tokens {
				if k > 0 {
					at += lv.gap * (0.95 + 0.1*rng.Float64())
				}
				r.ChunkMs = append(r.ChunkMs, at)
				r.ChunkTokens = append(r.ChunkTokens, 1)
			}
			r.E2EMs, r.DoneMs = at, at+1
			recs = append(recs, r)
			id++
		}
		for range lv.failures {
			recs = append(recs, metrics.Record{ID: id, Level: li, ErrorClass: "http_500", HTTPStatus: 500})
			id++
		}
		for _, r := range recs {
			if err := w.Append(r); err != nil {
				t.Fatal(err)
			}
		}
		s.Levels = append(s.Levels, metrics.Summarize(metrics.Load{Mode: "concurrency", Concurrency: lv.conc}, recs, 0))
	}
	if err := w.WriteSummary(s); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

func load(t *testing.T, dir string) *Run {
	t.Helper()
	r, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func findRow(t *testing.T, d *Diff, lvl int, name string) Row {
	t.Helper()
	for _, r := range d.Levels[lvl].Rows {
		if r.Name() == name {
			return r
		}
	}
	t.Fatalf("no row %s", name)
	return Row{}
}

var meta = map[string]string{"hardware": "h100-sxm", "quant": "bf16", "input_tokens": "64", "output_tokens": "32"}

func TestCompareFindsRealChangeAndIgnoresNoise(t *testing.T) {
	a := load(t, writeRun(t, meta, level{conc: 1, n: 20, ttft: 50, gap: 10, tokens: 32, seed: 1}, level{conc: 4, n: 20, ttft: 80, gap: 12, tokens: 32, seed: 2}))
	// Same distributions, other seeds: only noise.
	same := load(t, writeRun(t, meta, level{conc: 1, n: 20, ttft: 50, gap: 10, tokens: 32, seed: 11}, level{conc: 4, n: 20, ttft: 80, gap: 12, tokens: 32, seed: 12}))
	// Decode 20% slower (gap 12 vs 10 ms: TPS 83 vs 100), TTFT 30% better at c=4.
	slow := load(t, writeRun(t, meta, level{conc: 1, n: 20, ttft: 50, gap: 12, tokens: 32, seed: 21}, level{conc: 4, n: 20, ttft: 56, gap: 12, tokens: 32, seed: 22}))

	d := Compare(a, same, Options{})
	if len(d.Mismatches) != 0 || len(d.Levels) != 2 {
		t.Fatalf("same: mismatches %v, %d levels", d.Mismatches, len(d.Levels))
	}
	if ch := d.Changes(); len(ch) != 0 {
		t.Errorf("noise called a change: %+v", ch)
	}
	var out bytes.Buffer
	if err := d.WriteText(&out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "no significant change") {
		t.Errorf("text lacks the verdict:\n%s", out.String())
	}

	d = Compare(a, slow, Options{})
	r := findRow(t, d, 0, "decode_tps_p50")
	if r.Verdict != Worse || !r.Tested || r.P > 1e-6 || math.Abs(r.Rel-(-1.0/6)) > 0.03 {
		t.Errorf("c=1 decode_tps_p50 = %+v, want worse by about 16.7%% with tiny p", r)
	}
	if r := findRow(t, d, 0, "tpot_p50"); r.Verdict != Worse || math.Abs(r.Rel-0.2) > 0.03 {
		t.Errorf("c=1 tpot_p50 = %+v, want worse by about 20%%", r)
	}
	if r := findRow(t, d, 0, "ttft_p50"); r.Verdict != NoChange {
		t.Errorf("c=1 ttft_p50 = %+v, want no change", r)
	}
	if r := findRow(t, d, 1, "ttft_p50"); r.Verdict != Better || math.Abs(r.Rel-(-0.3)) > 0.05 {
		t.Errorf("c=4 ttft_p50 = %+v, want better by about 30%%", r)
	}
	if r := findRow(t, d, 1, "decode_tps_p50"); r.Verdict != NoChange {
		t.Errorf("c=4 decode_tps_p50 = %+v, want no change", r)
	}
	// Aggregate output TPS falls with decode speed (E2E +17%), but one value
	// per level admits no test: flagged with a question mark, not counted.
	if r := findRow(t, d, 0, "output_tps"); r.Verdict != "worse?" || r.Significant || r.Rel > -0.1 {
		t.Errorf("c=1 output_tps = %+v, want worse? and not significant", r)
	}
	out.Reset()
	if err := d.WriteText(&out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "better? and worse? (c=1 output_tps") || !strings.Contains(out.String(), "no test can tell that from noise") {
		t.Errorf("text does not explain worse?:\n%s", out.String())
	}
	if !strings.Contains(out.String(), "significant changes:") || !strings.Contains(out.String(), "c=1 decode_tps_p50 -16") {
		t.Errorf("text lacks the change:\n%s", out.String())
	}
}

func TestLikeForLike(t *testing.T) {
	a := load(t, writeRun(t, meta, level{conc: 1, n: 4, ttft: 50, gap: 10, tokens: 8, seed: 1}))
	m2 := map[string]string{"hardware": "a100-80gb", "quant": "bf16", "input_tokens": "64", "output_tokens": "32", "label": "other"}
	b := load(t, writeRun(t, m2, level{conc: 1, n: 4, ttft: 50, gap: 10, tokens: 8, seed: 2}, level{conc: 8, n: 4, ttft: 50, gap: 10, tokens: 8, seed: 3}))
	b.Summary.Target.Model = "llama-3.1-70b"
	got := LikeForLike(a, b)
	want := []string{
		"model differs: A llama-3.1-8b, B llama-3.1-70b",
		"hardware differs: A h100-sxm, B a100-80gb",
		"load levels differs: A [c=1], B [c=1 c=8]",
	}
	if len(got) != len(want) {
		t.Fatalf("LikeForLike = %v, want %v", got, want)
	}
	for i := range want {
		if got[i].String() != want[i] {
			t.Errorf("mismatch %d = %q, want %q", i, got[i], want[i])
		}
	}
	var out bytes.Buffer
	if err := Compare(a, b, Options{}).WriteText(&out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "WARNING: not like for like: hardware differs") {
		t.Errorf("no loud warning:\n%s", out.String())
	}
}

func TestParseConditions(t *testing.T) {
	cs, err := ParseConditions("ttft_p95>+10%, decode_tps_p50<-5%,output_tps<=-20,error_rate>0.01")
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		metric, stat, op string
		v                float64
		pct              bool
	}{
		{"ttft", "p95", ">", 10, true}, {"decode_tps", "p50", "<", -5, true},
		{"output_tps", "", "<=", -20, false}, {"error_rate", "", ">", 0.01, false},
	}
	for i, w := range want {
		c := cs[i]
		if c.Metric.Name != w.metric || c.Stat != w.stat || c.Op != w.op || c.Value != w.v || c.Percent != w.pct {
			t.Errorf("condition %d = %+v, want %+v", i, c, w)
		}
	}
	for _, bad := range []string{"ttft_p95", "ttft_p95>>10%", "latency_p95>10%", "ttft_p42x>1%", "ttft_count>1", "", "decode_tps>5%"} {
		if _, err := ParseConditions(bad); err == nil {
			t.Errorf("ParseConditions(%q) = nil error", bad)
		}
	}
}

func TestCheckFailsOnlyOnSignificantChange(t *testing.T) {
	a := load(t, writeRun(t, meta, level{conc: 1, n: 20, ttft: 50, gap: 10, tokens: 32, seed: 1}))
	slow := load(t, writeRun(t, meta, level{conc: 1, n: 20, ttft: 50, gap: 12, tokens: 32, seed: 21}))
	conds, err := ParseConditions("ttft_p95>+10%,decode_tps_p50<-5%")
	if err != nil {
		t.Fatal(err)
	}
	trips := Compare(a, slow, Options{}).Check(conds)
	if len(trips) != 2 || trips[0].Holds || trips[0].Fails || !trips[1].Fails {
		t.Fatalf("trips = %+v", trips)
	}
	if !strings.Contains(trips[1].Reason, "c=1: decode_tps_p50") || !strings.Contains(trips[1].Reason, "is significant") {
		t.Errorf("reason = %q", trips[1].Reason)
	}

	conds, _ = ParseConditions("output_tps<-10%")
	trips = Compare(a, slow, Options{}).Check(conds)
	if len(trips) != 1 || !trips[0].Fails || !strings.Contains(trips[0].Reason, "no per-request test") {
		t.Errorf("aggregate gate: trips = %+v", trips)
	}

	// Three samples each, B 20% slower to first token but overlapping: the
	// condition holds on the numbers, and no test can call it: the gate
	// trips on its threshold and says what would let it judge.
	few := load(t, writeRun(t, meta, level{conc: 1, n: 3, ttft: 100, gap: 10, tokens: 8, seed: 5}))
	few2 := load(t, writeRun(t, meta, level{conc: 1, n: 3, ttft: 100, gap: 10, tokens: 8, seed: 5}))
	for i := range few2.Records {
		few2.Records[i].TTFTMs *= 1.2
		if i == 0 {
			few2.Records[i].TTFTMs = 50 // overlap
		}
	}
	few2.Summary.Levels[0].TTFT.P95 *= 1.2
	conds, _ = ParseConditions("ttft_p95>+10%")
	trips = Compare(few, few2, Options{}).Check(conds)
	if len(trips) != 1 || !trips[0].Holds || !trips[0].Fails ||
		!strings.Contains(trips[0].Reason, "could not be tested") || !strings.Contains(trips[0].Reason, "40 requests a level, or --repeat 3") {
		t.Errorf("trips = %+v, want a failure on the threshold that names 40 requests", trips)
	}
	// The same change under --min-change is not a failure, tested or not.
	if trips = Compare(few, few2, Options{MinChange: 0.25}).Check(conds); len(trips) != 1 || !trips[0].Holds || trips[0].Fails {
		t.Errorf("under min-change: trips = %+v, want holds and not failing", trips)
	}
}

// TestGateTripsOnSeparatedRuns is issue 34's case: 16 requests a side and
// every TTFT of B above every TTFT of A, +151% at p95. Too few requests
// lie beyond p95 for its own interval, but the rank test of all of them is
// decisive (U = 0: p = erfc(z/√2), z = (128 − 0.5)/√(256·33/12)), so the
// gate trips as significant and the row reads "worse", not "~".
func TestGateTripsOnSeparatedRuns(t *testing.T) {
	a := load(t, writeRun(t, meta, level{conc: 1, n: 16, ttft: 22.5, gap: 10, tokens: 8, seed: 1}))
	b := load(t, writeRun(t, meta, level{conc: 1, n: 16, ttft: 52.75, gap: 10, tokens: 8, seed: 2}))
	d := Compare(a, b, Options{})
	r := findRow(t, d, 0, "ttft_p95")
	wantP := math.Erfc((128 - 0.5) / math.Sqrt(256.0*33/12) / math.Sqrt2)
	if r.Verdict != Worse || !r.Significant || r.Test != "Mann-Whitney U" || math.Abs(r.P-wantP) > 1e-12 || r.NA != 16 || r.NB != 16 {
		t.Errorf("ttft_p95 = %+v, want worse by Mann-Whitney p=%.3g over 16/16", r, wantP)
	}
	if r.Rel < 1.1 {
		t.Fatalf("ttft_p95 changed %+.1f%%, the case wants more than +110%%", 100*r.Rel)
	}
	conds, _ := ParseConditions("ttft_p95>+10%")
	trips := d.Check(conds)
	if len(trips) != 1 || !trips[0].Fails || !strings.Contains(trips[0].Reason, "is significant (Mann-Whitney p <0.001") {
		t.Errorf("trips = %+v, want a significant failure", trips)
	}
	// A statistic one run lacks (an import of aggregates leaves it 0)
	// cannot be judged: the gate fails, and says so.
	b.Summary.Levels[0].TTFT.P95 = 0
	if trips := Compare(a, b, Options{}).Check(conds); len(trips) != 1 || !trips[0].Fails || !strings.Contains(trips[0].Reason, "could not be judged") {
		t.Errorf("no value: trips = %+v, want a failure", trips)
	}
	b.Summary.Levels[0].TTFT.P95 = r.B
	// The other way round it is an improvement, and a gate on a rise holds
	// nowhere.
	if trips := Compare(b, a, Options{}).Check(conds); len(trips) != 1 || trips[0].Holds || trips[0].Fails {
		t.Errorf("B against A: trips = %+v, want not holding", trips)
	}
}

// TestCompareCacheAndMetadata: two runs of which one was served from the
// prompt cache are not like for like, and say so; metadata only one run
// has (a probe the other did not make) is no mismatch; a warning both runs
// carry is printed once.
func TestCompareCacheAndMetadata(t *testing.T) {
	a := load(t, writeRun(t, map[string]string{"quant": "bf16"}, level{conc: 4, n: 10, ttft: 800, gap: 10, tokens: 8, seed: 1}))
	b := load(t, writeRun(t, map[string]string{"quant": "bf16", "server_engine": "llamacpp"}, level{conc: 4, n: 10, ttft: 20, gap: 10, tokens: 8, seed: 2}))
	b.Summary.Levels[0].PromptCache = &metrics.PromptCache{Reported: 10, HitRequests: 9}
	a.Warnings = append(a.Warnings, "same warning")
	b.Warnings = append(b.Warnings, "same warning")
	d := Compare(a, b, Options{})
	var got []string
	for _, m := range d.Mismatches {
		got = append(got, m.String())
	}
	want := "prompt cache hits at c=4 differs: A 0% of requests, B 90% of requests"
	if len(got) != 1 || got[0] != want {
		t.Errorf("mismatches %q, want [%q]", got, want)
	}
	var out bytes.Buffer
	if err := d.WriteText(&out); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(out.String(), "same warning"); n != 1 {
		t.Errorf("a warning both runs carry printed %d times:\n%s", n, out.String())
	}
}

// TestCompareLevelMismatches: runs of a level that differ in token source,
// error rate, lockstep or the client's self-check are named, once each.
func TestCompareLevelMismatches(t *testing.T) {
	a := load(t, writeRun(t, nil, level{conc: 4, n: 10, ttft: 20, gap: 10, tokens: 8, seed: 1}))
	b := load(t, writeRun(t, nil, level{conc: 4, n: 10, ttft: 20, gap: 10, tokens: 8, seed: 2}))
	if d := Compare(a, b, Options{}); len(d.Mismatches) != 0 {
		t.Fatalf("like runs: mismatches %v", d.Mismatches)
	}
	la, lb := &a.Summary.Levels[0], &b.Summary.Levels[0]
	la.TokenSource, lb.TokenSource = metrics.SourceUsage, metrics.SourceTokenizer
	lb.ErrorRate = 0.2
	lb.Lockstep = true
	lb.Warnings = append(lb.Warnings, "client self-check: the client ran late (scheduling lag p99 9.0 ms, max 12.0 ms); its timestamps may be late by as much")
	var fields []string
	for _, m := range Compare(a, b, Options{}).Mismatches {
		fields = append(fields, m.Field)
	}
	want := []string{"token source at c=4", "error rate at c=4", "start at c=4", "client self-check at c=4"}
	if !slices.Equal(fields, want) {
		t.Errorf("mismatches %q, want %q", fields, want)
	}
}

// TestSaysWhatWasTested: the text and the JSON report count the tested
// rows, say what tested them and how many chance alone would flag, and a
// percentile row carries its block-bootstrap interval.
func TestSaysWhatWasTested(t *testing.T) {
	a := load(t, writeRun(t, nil, level{conc: 4, n: 20, ttft: 20, gap: 10, tokens: 8, seed: 1}))
	b := load(t, writeRun(t, nil, level{conc: 4, n: 20, ttft: 20, gap: 10, tokens: 8, seed: 2}))
	d := Compare(a, b, Options{})
	n := d.Tested()
	if n == 0 {
		t.Fatal("no row was tested")
	}
	var out bytes.Buffer
	if err := d.WriteText(&out); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("%d comparisons tested. A row is a change when the 95%% interval of B − A excludes 0", n)
	if !strings.Contains(out.String(), want) || !strings.Contains(out.String(), fmt.Sprintf("About %.1f would be called a change by chance alone", 0.05*float64(n))) {
		t.Errorf("text lacks %q and the count by chance:\n%s", want, out.String())
	}
	r := findRow(t, d, 0, "ttft_p50")
	if r.Test != "block bootstrap" || !(r.CILo <= r.Delta && r.Delta <= r.CIHi) {
		t.Errorf("ttft_p50: test %q, interval [%g, %g] around a change of %g", r.Test, r.CILo, r.CIHi, r.Delta)
	}
	// 20 requests a side: one beyond p95, too few for its own interval; the
	// rank test of all of them finds no shift (the runs are alike), so the
	// row is untested, and its +2.7% reads "worse?", not "~".
	if r := findRow(t, d, 0, "ttft_p95"); r.Test != "Mann-Whitney U" || r.Significant || r.Verdict != Worse+"?" ||
		!strings.Contains(r.Untested, "40 requests a level") {
		t.Errorf("ttft_p95 of 20 requests: %+v, want untested, worse?, naming 40 requests", r)
	}
	// TTFT p95 and p99, decode TPS p5 and E2E p95 are rank-tested (alpha
	// each), the other rows by a 95% interval (5% each).
	mw := 0
	for _, r := range d.Levels[0].Rows {
		if r.Test == "Mann-Whitney U" {
			mw++
		}
	}
	if mw != 4 {
		t.Errorf("%d rows rank-tested, want 4", mw)
	}
	if got := d.ByChance(); math.Abs(got-0.05*float64(n)) > 1e-9 {
		t.Errorf("ByChance = %g, want %g", got, 0.05*float64(n))
	}
	// --alpha sets Mann-Whitney's level, not the intervals'.
	if _, rep, _ := All(a, []*Run{b}, Options{Alpha: 0.01}, nil, ""); math.Abs(rep.ByChance-(0.05*float64(n-mw)+0.01*float64(mw))) > 1e-9 {
		t.Errorf("alpha 0.01: by chance %g, want %g", rep.ByChance, 0.05*float64(n-mw)+0.01*float64(mw))
	}
	_, rep, _ := All(a, []*Run{b, b}, Options{Alpha: 0.05}, nil, "")
	if rep.Tested != 2*n || math.Abs(rep.ByChance-0.05*float64(2*n)) > 1e-9 {
		t.Errorf("report tested %d, by chance %g; want %d, %g", rep.Tested, rep.ByChance, 2*n, 0.05*float64(2*n))
	}
}

// TestPerRunComparison: with three runs a side, a row is judged by Welch's
// t over one value per run.
func TestPerRunComparison(t *testing.T) {
	if d, lo, hi, ok := welch([]float64{10, 10.1, 9.9}, []float64{11, 11.1, 10.9}); !ok || math.Abs(d-1) > 1e-9 || lo <= 0.5 || hi >= 1.5 {
		t.Errorf("welch: diff %g, interval [%g, %g], ok %v; want 1 within about ±0.23", d, lo, hi, ok)
	}
	if _, _, _, ok := welch([]float64{1, 2}, []float64{1, 2, 3}); ok {
		t.Error("welch with two runs on a side: ok")
	}
	a := load(t, writeRun(t, nil, level{conc: 4, n: 20, ttft: 20, gap: 10, tokens: 8, seed: 1}))
	b := load(t, writeRun(t, nil, level{conc: 4, n: 20, ttft: 20, gap: 10, tokens: 8, seed: 2}))
	la, lb := &a.Summary.Levels[0], &b.Summary.Levels[0]
	la.Repeats = &metrics.Repeats{Runs: 3, PerRun: map[string][]float64{"tpot_p50": {10, 10.1, 9.9}, "ttft_p50": {20, 22, 18}}}
	lb.Repeats = &metrics.Repeats{Runs: 3, PerRun: map[string][]float64{"tpot_p50": {11, 11.1, 10.9}, "ttft_p50": {21, 19, 23}}}
	la.TPOT.P50, lb.TPOT.P50 = 10, 11
	la.TTFT.P50, lb.TTFT.P50 = 20, 21
	d := Compare(a, b, Options{})
	if r := findRow(t, d, 0, "tpot_p50"); r.Test != "per-run Welch t" || r.Verdict != Worse || r.NA != 3 {
		t.Errorf("tpot_p50: %+v, want worse by per-run Welch t over 3 runs", r)
	}
	if r := findRow(t, d, 0, "ttft_p50"); r.Test != "per-run Welch t" || r.Verdict != NoChange {
		t.Errorf("ttft_p50: %+v, want no change (the runs overlap)", r)
	}
	if r := findRow(t, d, 0, "e2e_p50"); r.Test == "per-run Welch t" {
		t.Errorf("e2e_p50 has no per-run values but was tested per run: %+v", r)
	}
}

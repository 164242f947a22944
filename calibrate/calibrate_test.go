package calibrate

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tokbench/tokbench/metrics"
	"github.com/tokbench/tokbench/results"
	"github.com/tokbench/tokbench/sim"
)

// truth is a CPU-like deployment: a 150 MB model read at 70% of 20 GB/s,
// prompts prefilled at 2,000 tokens/s, 0.4 ms a step and 0.3 ms a
// sequence of overhead, four slots.
var truth = sim.Calibrated{
	WeightBytes: 150e6, KVBytesPerToken: 8192, KVCapacity: 1 << 20, BandwidthBytesPerSec: 20e9,
	MBU: 0.7, PrefillTPS: 2000, StepOverheadMs: 0.4, SeqOverheadMs: 0.3,
}

func measured(t *testing.T, users []int, slots int) metrics.Summary {
	t.Helper()
	eng := sim.DefaultConfig().Engine
	eng.MaxNumSeqs = slots
	levels, err := sim.Curve(context.Background(), eng, truth, sim.CurveConfig{Users: users, Requests: 16, PromptTokens: 256, MaxTokens: 64})
	if err != nil {
		t.Fatal(err)
	}
	for i := range levels {
		levels[i].Physics = &metrics.Physics{Deployment: "truth", WeightBytes: truth.WeightBytes, KVBytesPerToken: truth.KVBytesPerToken,
			BandwidthBytesPerSec: truth.BandwidthBytesPerSec, KVCapacityTokens: truth.KVCapacity}
	}
	return metrics.Summary{Schema: metrics.Schema, Levels: levels}
}

// TestFitPredictsOtherLoads: fitted to c=1 and c=2 of a known
// deployment, the calibrated simulator predicts c=4 and c=8 (past the
// slots, so requests queue) within 5%.
func TestFitPredictsOtherLoads(t *testing.T) {
	f, err := FromRun(context.Background(), "run", measured(t, []int{1, 2}, 4), map[string]string{"server_slots": "4"}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if f.MaxBatch != 4 || len(f.Fit.Levels) != 2 || f.Fit.RMSError > 0.02 {
		t.Fatalf("max batch %d, %d levels, rms error %.3f", f.MaxBatch, len(f.Fit.Levels), f.Fit.RMSError)
	}
	t.Logf("fitted %+v", f.Cost)
	want := measured(t, []int{4, 8}, 4)
	got, err := sim.Curve(context.Background(), f.Engine(), f.Cost, sim.CurveConfig{Users: []int{4, 8}, Requests: 16, PromptTokens: 256, MaxTokens: 64})
	if err != nil {
		t.Fatal(err)
	}
	for i, lv := range got {
		w := want.Levels[i]
		for _, c := range []struct {
			name      string
			got, want float64
		}{{"decode TPS p50", lv.DecodeTPS.P50, w.DecodeTPS.P50}, {"TTFT p50", lv.TTFT.P50, w.TTFT.P50}} {
			if e := math.Abs(c.got/c.want - 1); e > 0.05 {
				t.Errorf("c=%d %s: predicted %.2f, true %.2f (%.1f%% off)", lv.Load.Concurrency, c.name, c.got, c.want, 100*e)
			}
		}
	}
	// The file round-trips.
	path := filepath.Join(t.TempDir(), "cal.json")
	if err := f.Write(path); err != nil {
		t.Fatal(err)
	}
	back, err := Read(path)
	if err != nil || back.Cost != f.Cost || back.MaxBatch != 4 {
		t.Fatalf("read back %+v, %v", back, err)
	}
}

func TestFromRunNeedsPhysics(t *testing.T) {
	s := measured(t, []int{1}, 4)
	s.Levels[0].Physics = nil
	if _, err := FromRun(context.Background(), "run", s, nil, Options{}); err == nil {
		t.Fatal("a run without physics was fitted")
	}
}

// TestPredictsLlamaServer is the real-server check: calibrate from a
// tokbench bench of llama.cpp's llama-server (b4748, a 150 MB F16 model,
// 4 slots, 2 CPU threads, --concurrency 1,2, 258 tokens in and 64 out,
// --hardware local on a 2-core machine measuring 22.4 GB/s), then predict
// c=4 and c=8 with the phase replicas simulate --calibration runs. The
// measured figures are a second run of the same server at c=4 and c=8 (32
// requests each). At c=4 users fall into step in pairs (two prompts in
// one step, their answers ending in one step), which the evenly spread
// simulation never does: its TTFT p50 there is 45% short.
func TestPredictsLlamaServer(t *testing.T) {
	s, err := results.ReadSummary("testdata/llamacpp-c1-c2")
	if err != nil {
		t.Fatal(err)
	}
	f, err := FromRun(context.Background(), "run12", s, map[string]string{"server_slots": "4"}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []struct {
		users           int
		ttft, decodeTPS float64
	}{{4, 565.3, 35.70}, {8, 3126, 38.67}} {
		lv, err := sim.Curve(context.Background(), f.Engine(), f.Cost, sim.CurveConfig{
			Users: []int{m.users}, Requests: 32, PromptTokens: 258, MaxTokens: 64, Phases: 16,
		})
		if err != nil {
			t.Fatal(err)
		}
		got := lv[0]
		for _, c := range []struct {
			name      string
			got, want float64
		}{{"TTFT p50", got.TTFT.P50, m.ttft}, {"decode TPS p50", got.DecodeTPS.P50, m.decodeTPS}} {
			e := c.got/c.want - 1
			t.Logf("c=%d %s: predicted %.2f, measured %.2f (%+.1f%%)", m.users, c.name, c.got, c.want, 100*e)
			if math.Abs(e) > 0.15 {
				t.Errorf("c=%d %s: predicted %.2f, measured %.2f: %.1f%% off, want within 15%%", m.users, c.name, c.got, c.want, 100*e)
			}
		}
	}
}

// TestImpossibleDeclaredModelIsRefused is the case: the
// recorded llama-server run (a 150 MB model) declared as llama-3.2-1b
// bf16 (2.47 GB of weights) on a machine measured at 8.0 GB/s. Decoding
// 89 tok/s would read 220 GB/s: the fit cannot match, and the error says
// the declared deployment cannot have served the run.
func TestImpossibleDeclaredModelIsRefused(t *testing.T) {
	s, err := results.ReadSummary("testdata/llamacpp-c1-c2")
	if err != nil {
		t.Fatal(err)
	}
	for i := range s.Levels {
		ph := *s.Levels[i].Physics
		ph.Deployment, ph.WeightBytes, ph.BandwidthBytesPerSec = "llama-3.2-1b bf16 on 1× local", 2.47e9, 8.0e9
		s.Levels[i].Physics = &ph
	}
	f, err := FromRun(context.Background(), "run", s, map[string]string{"server_slots": "4"}, Options{})
	fe, ok := errors.AsType[*FitError](err)
	if !ok {
		t.Fatalf("FromRun = %v, want a *FitError", err)
	}
	if f == nil || fe.File != f || f.Fit.RMSError <= DefaultMaxRMSError || f.Fit.MaxRMSError != DefaultMaxRMSError || f.Fit.Error != err.Error() {
		t.Fatalf("refused fit: rms %.3f (bound %.2f), error %q", f.Fit.RMSError, f.Fit.MaxRMSError, f.Fit.Error)
	}
	if !strings.HasPrefix(fe.Causes[0], "the declared model or hardware cannot have served this run: 89.38 tok/s at c=1 reads 221.0 GB/s (2.47 GB a step), 2762% of the 8.0 GB/s that llama-3.2-1b bf16 on 1× local can read") {
		t.Errorf("first cause %q", fe.Causes[0])
	}
	t.Logf("%s", err)
}

// TestCausesNamed: a refused fit names the run's shape as the cause:
// one level, levels at one load, lockstep levels; the cost model itself
// when the run shows none of those; a fit pinned at its bandwidth bound.
func TestCausesNamed(t *testing.T) {
	pt := func(c int) Point {
		return Point{Concurrency: c, InputTokens: 256, OutputTokens: 64, DecodeTPS: Compare{Measured: 90}, TTFTMs: Compare{Measured: 130}}
	}
	file := func(mbu float64, pts ...Point) *File {
		return &File{Deployment: "tiny", Cost: sim.Calibrated{WeightBytes: truth.WeightBytes, KVBytesPerToken: truth.KVBytesPerToken,
			BandwidthBytesPerSec: truth.BandwidthBytesPerSec, MBU: mbu}, Fit: Fit{Levels: pts}}
	}
	for _, c := range []struct {
		name string
		f    *File
		o    Options
		want string
	}{
		{"one level", file(0.7, pt(1)), Options{}, "too few levels: 1"},
		{"one load", file(0.7, pt(2), pt(2)), Options{}, "every level is at c=2"},
		{"lockstep", file(0.7, pt(1), pt(2)), Options{Lockstep: true}, "the levels ran in lockstep"},
		{"none of those", file(0.7, pt(1), pt(2)), Options{}, "the simulator's cost model does not describe this server"},
		{"at the bound", file(1, pt(1), pt(2)), Options{}, "the fit's memory efficiency sits at its bound (100.0%)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			causes := strings.Join(c.f.causes(c.o), "; ")
			if !strings.Contains(causes, c.want) {
				t.Errorf("causes %q lack %q", causes, c.want)
			}
			if strings.Contains(causes, "cannot have served") {
				t.Errorf("a possible deployment named impossible: %q", causes)
			}
		})
	}
}

// truthCtx is a llama.cpp-like CPU deployment whose tokens cost more the
// longer their context: truth's costs plus 400 ns per (query, key) pair of
// attention (a 1,024-token prompt spends 0.21 s attending, 0.51 s in its
// matmuls), a 5 ms front end per request, four slots and llama.cpp's
// 2,048-token batch (n_batch), which takes every waiting prompt at once.
var truthCtx = func() sim.Calibrated {
	c := truth
	c.AttentionNsPerPair = 400
	return c
}()

var truthFrontEnd = sim.FrontEnd{RequestMs: 5}

// measuredCtx runs truthCtx at each (users, prompt length) level, as a
// bench of that server would record it.
func measuredCtx(t *testing.T, levels [][2]int) metrics.Summary {
	t.Helper()
	eng := sim.DefaultConfig().Engine
	eng.MaxNumSeqs, eng.MaxBatchedTokens, eng.FrontEnd = 4, 2048, truthFrontEnd
	var s metrics.Summary
	s.Schema = metrics.Schema
	for _, l := range levels {
		lv, err := sim.Curve(context.Background(), eng, truthCtx, sim.CurveConfig{Users: []int{l[0]}, Requests: 16, PromptTokens: l[1], MaxTokens: 64})
		if err != nil {
			t.Fatal(err)
		}
		lv[0].Physics = &metrics.Physics{Deployment: "truth", WeightBytes: truth.WeightBytes, KVBytesPerToken: truth.KVBytesPerToken,
			BandwidthBytesPerSec: truth.BandwidthBytesPerSec, KVCapacityTokens: truth.KVCapacity}
		s.Levels = append(s.Levels, lv[0])
	}
	return s
}

// predictCtx is f's prediction of users × prompt against the truth.
func predictCtx(t *testing.T, f *File, users, prompt int) (got, want metrics.Level) {
	t.Helper()
	lv, err := sim.Curve(context.Background(), f.Engine(), f.Cost, sim.CurveConfig{Users: []int{users}, Requests: 16, PromptTokens: prompt, MaxTokens: 64})
	if err != nil {
		t.Fatal(err)
	}
	return lv[0], measuredCtx(t, [][2]int{{users, prompt}}).Levels[0]
}

func within(t *testing.T, what string, got, want, bound float64) {
	t.Helper()
	e := got/want - 1
	t.Logf("%s: predicted %.2f, true %.2f (%+.1f%%)", what, got, want, 100*e)
	if math.Abs(e) > bound {
		t.Errorf("%s: predicted %.2f, true %.2f: %.1f%% off, want within %.0f%%", what, got, want, 100*e, 100*bound)
	}
}

// TestFitPredictsQueueingPastSlots: fitted on c=1 and c=2 of the
// four-slot server with llama.cpp's prompt batching, the calibration
// predicts c=8, where half the users wait for a slot and the waiting
// prompts are prefilled together, within 15% (TTFT and decode). One
// prompt length: the fit says it could not fit the cost of context.
func TestFitPredictsQueueingPastSlots(t *testing.T) {
	s := measuredCtx(t, [][2]int{{1, 256}, {2, 256}})
	f, err := FromRun(context.Background(), "run", s, map[string]string{"server_slots": "4"}, Options{MaxBatchedTokens: 2048})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("fitted %+v; %s", f.Cost, f.Fit.Note)
	if f.Cost.AttentionNsPerPair != 0 || f.FrontEnd != (sim.FrontEnd{}) || !slices.Equal(f.Fit.PromptLengths, []int{256}) ||
		!strings.Contains(f.Fit.Note, "all with 256-token prompts: the cost of context (attention) and the front end's time per request are not told apart") {
		t.Errorf("one prompt length: attention %v, front end %+v, lengths %v, note %q", f.Cost.AttentionNsPerPair, f.FrontEnd, f.Fit.PromptLengths, f.Fit.Note)
	}
	got, want := predictCtx(t, f, 8, 256)
	within(t, "c=8 TTFT p50", got.TTFT.P50, want.TTFT.P50, 0.15)
	within(t, "c=8 decode TPS p50", got.DecodeTPS.P50, want.DecodeTPS.P50, 0.15)
}

// TestPromptLengthsWithinTenPercentAreOne: levels whose mean prompts
// differ by noise (a dataset, --input-tokens 512:64) are one length; 128
// and 512 are two.
func TestPromptLengthsWithinTenPercentAreOne(t *testing.T) {
	for _, c := range []struct {
		in, want []int
	}{
		{[]int{509, 517, 498, 530}, []int{514}},
		{[]int{512, 512}, []int{512}},
		{[]int{128, 131, 512, 500}, []int{130, 506}},
		{[]int{100, 111}, []int{100, 111}},
	} {
		var pts []Point
		for _, n := range c.in {
			pts = append(pts, Point{InputTokens: n})
		}
		if got := promptLengths(pts); !slices.Equal(got, c.want) {
			t.Errorf("levels with %v-token prompts: lengths %v, want %v", c.in, got, c.want)
		}
	}
}

// TestFitNoisyLengthsAreOne: levels with 250- and 262-token prompts are
// fitted as one length: attention and the front end are not fitted from
// the difference, and the note says so.
func TestFitNoisyLengthsAreOne(t *testing.T) {
	s := measuredCtx(t, [][2]int{{1, 250}, {2, 262}})
	f, err := FromRun(context.Background(), "run", s, map[string]string{"server_slots": "4"}, Options{MaxBatchedTokens: 2048})
	if err != nil {
		t.Fatal(err)
	}
	if f.Cost.AttentionNsPerPair != 0 || f.FrontEnd != (sim.FrontEnd{}) || !slices.Equal(f.Fit.PromptLengths, []int{256}) ||
		!strings.Contains(f.Fit.Note, "all with 256-token prompts") {
		t.Errorf("250 and 262: attention %v, front end %+v, lengths %v, note %q", f.Cost.AttentionNsPerPair, f.FrontEnd, f.Fit.PromptLengths, f.Fit.Note)
	}
}

// TestFitPredictsOtherLengths: fitted on 128- and 512-token prompts (c=1
// and c=2 each), the calibration predicts 1,024-token prompts, where
// attention is a third of the prefill, within 15% at c=1, 2 and 4. Fitted
// on 512 alone, without the cost of context, it misses them by more:
// the second length is what carries the prediction.
func TestFitPredictsOtherLengths(t *testing.T) {
	s := measuredCtx(t, [][2]int{{1, 128}, {2, 128}, {1, 512}, {2, 512}})
	f, err := FromRun(context.Background(), "run", s, map[string]string{"server_slots": "4"}, Options{MaxBatchedTokens: 2048})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("fitted %+v, front end %+v, rms %.4f; %s", f.Cost, f.FrontEnd, f.Fit.RMSError, f.Fit.Note)
	if !slices.Equal(f.Fit.PromptLengths, []int{128, 512}) || !(f.Cost.AttentionNsPerPair > 0) || !strings.Contains(f.Fit.Note, "prompts of 128, 512 tokens: attention and the front end's time per request fitted") {
		t.Errorf("two lengths: attention %v, lengths %v, note %q", f.Cost.AttentionNsPerPair, f.Fit.PromptLengths, f.Fit.Note)
	}
	worst := 0.0
	for _, users := range []int{1, 2, 4} {
		got, want := predictCtx(t, f, users, 1024)
		within(t, fmt.Sprintf("1024 in, c=%d TTFT p50", users), got.TTFT.P50, want.TTFT.P50, 0.15)
		within(t, fmt.Sprintf("1024 in, c=%d decode TPS p50", users), got.DecodeTPS.P50, want.DecodeTPS.P50, 0.15)
		worst = max(worst, math.Abs(got.TTFT.P50/want.TTFT.P50-1))
	}

	one, err := FromRun(context.Background(), "run", measuredCtx(t, [][2]int{{1, 512}, {2, 512}}), map[string]string{"server_slots": "4"}, Options{MaxBatchedTokens: 2048})
	if err != nil {
		t.Fatal(err)
	}
	got, want := predictCtx(t, one, 1, 1024)
	if e := math.Abs(got.TTFT.P50/want.TTFT.P50 - 1); e <= worst {
		t.Errorf("fitted on one length, 1024-token TTFT p50 is %.1f%% off, no worse than two lengths' %.1f%%", 100*e, 100*worst)
	}
}

// TestFitSaysAtBound: a parameter that ends at the end of its range is
// named in the fit and its note.
func TestFitSaysAtBound(t *testing.T) {
	f := &File{Cost: sim.Calibrated{MBU: 1, PrefillTPS: 100, StepOverheadMs: params[pStep].floor, SeqOverheadMs: 0.2}}
	got := f.atBound([]int{pMBU, pPrefill, pStep, pSeq})
	want := []string{"memory efficiency 100.0% (at most 100%)", "per-step overhead 0 (none)"}
	if !slices.Equal(got, want) {
		t.Errorf("atBound = %q, want %q", got, want)
	}
	if n := fitNote(2, []int{256}, got); !strings.Contains(n, "at a bound: memory efficiency 100.0% (at most 100%), per-step overhead 0 (none)") {
		t.Errorf("note %q", n)
	}
}

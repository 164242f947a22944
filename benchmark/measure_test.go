package benchmark

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tokbench/tokbench/internal/busy"
	"github.com/tokbench/tokbench/internal/fakellm"
	"github.com/tokbench/tokbench/load"
	"github.com/tokbench/tokbench/metrics"
	"github.com/tokbench/tokbench/results"
	"github.com/tokbench/tokbench/workload"
)

// fakePlan is DefaultPlan against a scripted server: model m, no warm-up,
// prompts of in tokens asking for out.
func fakePlan(url string, in, out int) *Plan {
	p := DefaultPlan()
	p.URL, p.Model = url, "m"
	p.Load.Warmup = 0
	p.Workload.Inputs, p.Workload.Output = []workload.Dist{workload.Fixed(in)}, workload.Fixed(out)
	return p
}

// mustSLOs parses SLOs the test knows are good.
func mustSLOs(t *testing.T, s string) []metrics.SLO {
	t.Helper()
	slos, err := metrics.ParseSLOs(s)
	if err != nil {
		t.Fatal(err)
	}
	return slos
}

// runPlan runs p and returns its summary; out, when not "", is the run
// directory.
func runPlan(t *testing.T, p *Plan, out string) metrics.Summary {
	t.Helper()
	var hooks Hooks
	if out != "" {
		w, err := results.Create(out)
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		hooks.Out = w
	}
	res, err := Run(context.Background(), p, hooks)
	if err != nil {
		t.Fatal(err)
	}
	if res.WriteErr != nil {
		t.Fatal(res.WriteErr)
	}
	return res.Summary
}

// TestRunPhysicsMBU: a server streaming a token every 20 ms, judged as
// Llama 3.1 8B BF16 on one A100 80GB: the level's MBU is its bytes per
// token times its decode rate over the A100's 2.039 TB/s, exactly.
func TestRunPhysicsMBU(t *testing.T) {
	srv := fakellm.New(fakellm.Script{TTFT: 5 * time.Millisecond, Gap: 20 * time.Millisecond, Tokens: 12, Usage: true})
	defer srv.Close()
	p := fakePlan(srv.URL, 100, 12)
	p.Model = "meta-llama/Llama-3.1-8B-Instruct"
	p.Load.Concurrency, p.Load.Requests = []int{1}, 3
	ph, _, err := ResolvePhysics(PhysicsInput{Model: p.Model, Quant: "bf16", Hardware: "a100-80gb"})
	if err != nil || ph == nil {
		t.Fatalf("ResolvePhysics: %v, %v", ph, err)
	}
	p.Physics = ph
	s := runPlan(t, p, "")
	lph := s.Levels[0].Physics
	if lph == nil {
		t.Fatal("no physics in the level")
	}
	// The truth is what the server did, not its script: a server held off
	// its core a moment flushes a token late and the next ones on time.
	// Each stream's decode TPS, (tokens − 1) over its first token chunk to
	// its last, lies between the figures from their flushes' earliest and
	// latest instants (a kernel stamp lies between a chunk's flush and its
	// return, Stream.Off), so the level's median lies between the medians
	// of those bounds.
	var lo, hi []float64
	for _, st := range srv.Streams() {
		if n := len(st.Flushes); n > 1 {
			lo = append(lo, float64(n-1)/st.Sent[n-1].Sub(st.Flushes[0]).Seconds())
			hi = append(hi, float64(n-1)/st.Flushes[n-1].Sub(st.Sent[0]).Seconds())
		}
	}
	if len(lo) != 3 {
		t.Fatalf("the server streamed %d answers, want 3", len(lo))
	}
	slices.Sort(lo)
	slices.Sort(hi)
	tps := s.Levels[0].DecodeTPS.P50
	if tps < lo[1]*0.999 || tps > hi[1]*1.001 {
		t.Fatalf("decode TPS p50 = %g, want within the server's own %g–%g (about 50)", tps, lo[1], hi[1])
	}
	// Llama 3.1 8B BF16 at 106 tokens of context on one A100 80GB (2.039 TB/s):
	// bytes per token from the physics package, MBU = bytes × TPS / peak.
	ctxTokens := 100 + 12/2
	if lph.ContextTokens != ctxTokens || lph.Deployment != "llama-3.1-8b bf16 on 1× a100-80gb" {
		t.Errorf("physics = %+v", lph)
	}
	if want := lph.BytesPerToken * tps / 2.039e12; math.Abs(lph.MBU-want) > 1e-9 {
		t.Errorf("MBU = %g, want %g", lph.MBU, want)
	}
	if want := 2.039e12 / lph.BytesPerToken; math.Abs(lph.DecodeTPSCeiling-want) > 1e-6*want {
		t.Errorf("ceiling = %g, want %g", lph.DecodeTPSCeiling, want)
	}
	// About 15 GB per token (8.03B params less the input embeddings, 2 bytes each).
	if lph.BytesPerToken < 14e9 || lph.BytesPerToken > 16.2e9 {
		t.Errorf("bytes per token = %g, want about 15 GB", lph.BytesPerToken)
	}
}

// TestRunRateLevels: two open-loop levels of 10 constant-rate sends each
// last at least their schedule, report the client's queue and TTFT from
// the schedule, and the run directory gets its report.
func TestRunRateLevels(t *testing.T) {
	srv := fakellm.New(fakellm.Script{TTFT: 5 * time.Millisecond, Gap: time.Millisecond, Tokens: 4, Usage: true})
	defer srv.Close()
	dir := t.TempDir()
	p := fakePlan(srv.URL, 16, 4)
	p.Load = LevelSpec{Rates: []float64{50, 100}, Arrival: load.ArrivalConstant, Requests: 10}
	s := runPlan(t, p, dir)
	for i, want := range []float64{50, 100} {
		lv := s.Levels[i]
		if lv.Load.Mode != "rate" || lv.Load.RateRPS != want || lv.Load.Arrival != "constant" || lv.Requests.Completed != 10 {
			t.Errorf("level %d = %+v %+v", i, lv.Load, lv.Requests)
		}
		if lv.QueueMs == nil || lv.TTFTSched == nil || lv.TTFTSched.P50 < lv.TTFT.P50 {
			t.Errorf("level %d: no client queue or TTFT from the schedule", i)
		}
		// 10 sends 1/rate apart: the level lasts at least 9/rate seconds.
		if lv.DurationS < 9/want {
			t.Errorf("level %d lasted %.3f s, shorter than its schedule", i, lv.DurationS)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "report.html")); err != nil {
		t.Errorf("the run directory has no report.html: %v", err)
	}
}

// degrading is a server whose per-user decode speed is 1000/(10+2(c−1))
// tok/s with c requests in flight: 100, 83, 62.5, 41.7, 25 at 1, 2, 4, 8, 16.
func degrading(t *testing.T) *fakellm.Server {
	srv := fakellm.New(fakellm.Script{TTFT: 5 * time.Millisecond, Gap: 10 * time.Millisecond,
		GapPerInflight: 2 * time.Millisecond, Tokens: 10, Usage: true})
	t.Cleanup(srv.Close)
	return srv
}

// TestRunSLOCapacity: against a server that slows with load, the SLO
// verdicts of each level, the capacity interpolated between the last
// level that passed and the first that failed, and goodput.
func TestRunSLOCapacity(t *testing.T) {
	srv := degrading(t)
	p := fakePlan(srv.URL, 16, 10)
	p.Load.Concurrency, p.Load.Requests, p.Load.Lockstep = []int{1, 2, 4, 8}, 8, true
	p.SLOs = mustSLOs(t, "tps_p5>=50,ttft_p95<=1s")
	watch := busy.Start()
	s := runPlan(t, p, "")
	lag := watch.Stop()
	if len(s.Levels) != 4 {
		t.Fatalf("%d levels, want 4", len(s.Levels))
	}
	// The server slows each stream by the others in flight as it arrives:
	// a client kept off the cores sends its lockstep users apart, and the
	// server sees less load than was asked for.
	if !lag.Judge(t, "the SLO verdicts and the capacity") {
		t.SkipNow()
	}
	for i, want := range []bool{true, true, true, false} {
		if s.Levels[i].SLO == nil || s.Levels[i].SLO.Met != want {
			t.Errorf("level %s: SLO %+v, want met=%v", s.Levels[i].Load, s.Levels[i].SLO, want)
		}
	}
	// tps_p5 margins: at 4, (62.5−50)/50 = 0.25; at 8, (41.7−50)/50 = −0.167:
	// 4 + 4·0.25/0.417 = 6.4 → holds 6 users.
	// (The interpolation's arithmetic is tested exactly in metrics; here the
	// measured speeds may wobble on a busy machine, so allow 5 or 6.)
	c := s.Capacity
	if c == nil || c.MeasuredPassing != 4 || c.FirstFailing != 8 || c.Value < 5 || c.Value > 6 || c.LimitedBy != "tps_p5>=50" {
		t.Fatalf("capacity = %+v", c)
	}
	if want := fmt.Sprintf("holds %d users at tps_p5>=50 and ttft_p95<=1s", int(c.Value)); !strings.Contains(c.Statement, want) {
		t.Errorf("statement %q, want it to contain %q", c.Statement, want)
	}
	// Goodput: at c=1 every request met both objectives.
	if lv := s.Levels[0]; math.Abs(lv.GoodputRPS-lv.RequestRPS) > 1e-9 {
		t.Errorf("goodput %g != request rate %g at c=1", lv.GoodputRPS, lv.RequestRPS)
	}
	// At c=8 the streams that arrived with several others in flight fall
	// below 50 tok/s and do not count.
	if lv := s.Levels[3]; lv.GoodputRPS >= lv.RequestRPS {
		t.Errorf("goodput at c=8 = %g, not below the request rate %g", lv.GoodputRPS, lv.RequestRPS)
	}
}

// TestRunSweepAuto: an automatic sweep doubles the users until the SLO
// fails by far, then refines between the last level that passed and the
// first that failed; the summary keeps the levels in load order.
func TestRunSweepAuto(t *testing.T) {
	srv := degrading(t)
	p := fakePlan(srv.URL, 16, 10)
	p.SLOs = mustSLOs(t, "tps_p5>=57")
	p.Load = LevelSpec{Requests: 16}
	p.Sweep = &load.AutoSweep{Max: 512, Refine: 2, SLOs: p.SLOs}
	watch := busy.Start()
	s := runPlan(t, p, "")
	lag := watch.Stop()
	// Doubling until tps_p5 is more than 50% below 57 (25 at 16), then
	// refining twice between the last passing and first failing level: from
	// 4 (62.5, passes) and 8 (41.7, fails) to 6, then 5 — or, when a busy
	// machine slows the streams, to neighbours of those. The capacity ends
	// between two adjacent user counts around the truth (4.27 users).
	var got []int
	seen := map[int]bool{}
	for _, lv := range s.Levels {
		c := lv.Load.Concurrency
		if seen[c] {
			t.Fatalf("level %d measured twice: %v", c, got)
		}
		seen[c] = true
		got = append(got, c)
	}
	// The summary stores the levels in load order, whatever order they
	// ran in, and the sweep ends between two adjacent user counts: always.
	if len(got) < 3 || !slices.IsSorted(got) || got[0] != 1 {
		t.Fatalf("sweep levels = %v, want doubling from 1 then refinements, in load order", got)
	}
	c := s.Capacity
	if c == nil || c.FirstFailing-c.MeasuredPassing != 1 {
		t.Fatalf("capacity = %+v, want adjacent pass/fail levels", c)
	}
	// Where the sweep went is the streams' speed: judged when the machine
	// let the process run (a busy one slows the streams, and the capacity
	// falls with them).
	if !lag.Judge(t, "the sweep's levels and capacity") {
		return
	}
	if len(got) < 6 || len(got) > 9 || !seen[2] || !seen[4] || !seen[8] {
		t.Errorf("sweep levels = %v, want doubling from 1 to 8 then two refinements", got)
	}
	if c.Value < 3 || c.Value > 5 {
		t.Errorf("capacity = %+v, want around 4 users", c)
	}
}

// TestRunRepeatSLOsAndCost: a level run 3 times is their median with
// every request counted, judged against the SLOs, and priced: 9 requests
// of 7 prompt tokens (the server's usage) and 20 output tokens at 1 and 4
// a million.
func TestRunRepeatSLOsAndCost(t *testing.T) {
	srv := fakellm.New(fakellm.Script{TTFT: 5 * time.Millisecond, Gap: 5 * time.Millisecond, Tokens: 20, Usage: true})
	defer srv.Close()
	p := fakePlan(srv.URL, 512, 20)
	p.Load.Concurrency, p.Load.Requests, p.Repeat = []int{1}, 3, 3
	p.SLOs = mustSLOs(t, "ttft_p95<=150ms,tps_p5>=60")
	p.Prices.InputPerMillion, p.Prices.OutputPerMillion = 1, 4
	lv := runPlan(t, p, "").Levels[0]
	if lv.Repeats == nil || lv.Repeats.Runs != 3 || lv.Requests.Completed != 9 {
		t.Fatalf("repeats = %+v, completed %d", lv.Repeats, lv.Requests.Completed)
	}
	// 200 tok/s and 5 ms TTFT: TTFT < 150 ms and ≥ 60 tok/s hold.
	if lv.SLO == nil || !lv.SLO.Met {
		t.Errorf("SLO = %+v", lv.SLO)
	}
	if lv.Cost == nil || math.Abs(lv.Cost.Total-9*(7+80)/1e6) > 1e-12 {
		t.Errorf("cost = %+v", lv.Cost)
	}
}

// TestRunAgentChains reproduces the shape of the seeds' example (5 calls
// of 600 tokens: 75 s at 40 tok/s, 25 s at 120 tok/s) at a scale a test can
// afford: 5 calls of 60 tokens at 160 and 480 tok/s.
func TestRunAgentChains(t *testing.T) {
	wall := func(gap time.Duration) (metrics.Summary, []map[string]any) {
		srv := fakellm.New(fakellm.Script{TTFT: 5 * time.Millisecond, Gap: gap, Tokens: 60, Usage: true})
		defer srv.Close()
		p := fakePlan(srv.URL, 16, 60)
		p.Load.Concurrency, p.Load.Requests, p.Load.Steps = []int{1}, 1, 5
		return runPlan(t, p, ""), srv.Bodies()
	}
	watch := busy.Start()
	slow, bodies := wall(6250 * time.Microsecond)
	fast, _ := wall(2083 * time.Microsecond)
	// No chain is faster than its server; how much slower is the
	// machine's as much as tokbench's.
	timed := watch.Stop().Judge(t, "chain wall-clock upper bounds and the slow/fast ratio")
	for _, c := range []struct {
		s   metrics.Summary
		gap float64
	}{{slow, 6.25}, {fast, 2.083}} {
		lv := c.s.Levels[0]
		if lv.Requests.Completed != 5 || lv.ChainMs == nil || lv.ChainMs.Count != 1 {
			t.Fatalf("chains: %+v %+v", lv.Requests, lv.ChainMs)
		}
		want := 5 * (5 + 59*c.gap) // five calls, each TTFT + 59 gaps
		if got := lv.ChainMs.P50; got < want || (timed && got > want*1.1) {
			t.Errorf("chain wall-clock %.1f ms, want about %.1f", got, want)
		}
	}
	if r := slow.Levels[0].ChainMs.P50 / fast.Levels[0].ChainMs.P50; timed && (r < 2.6 || r > 3.1) {
		t.Errorf("slow/fast chain ratio %.2f, want about 3 (the seeds' 75 s vs 25 s)", r)
	}
	// Each call carries the conversation so far: call k has 2k−1 messages.
	for k, b := range bodies {
		if msgs := b["messages"].([]any); len(msgs) != 2*k+1 {
			t.Errorf("call %d sent %d messages, want %d", k+1, len(msgs), 2*k+1)
		}
	}
}

// TestRunTokenizerServer: with the server's tokenizer, prompts are exactly
// their length by the server's own count, however it differs from the
// local tokenizer.
func TestRunTokenizerServer(t *testing.T) {
	srv := fakellm.New(fakellm.Script{TTFT: time.Millisecond, Gap: time.Millisecond, Tokens: 3, Usage: true})
	defer srv.Close()
	p := fakePlan(srv.URL+"/v1", 40, 3)
	p.Load.Concurrency, p.Load.Requests = []int{1}, 4
	p.Workload.ServerTokenizer = true
	runPlan(t, p, "")
	bodies := srv.Bodies()
	if len(bodies) != 4 {
		t.Fatalf("%d requests", len(bodies))
	}
	for i, b := range bodies {
		msgs := b["messages"].([]any)
		text := msgs[len(msgs)-1].(map[string]any)["content"].(string)
		if n := fakellm.CountTokens(text); n != 40 {
			t.Errorf("prompt %d is %d tokens by the server's count, want 40", i, n)
		}
	}
}

// TestRunRampUp: a ramp-up of 600 ms with 3 users whose single requests
// each outlast the ramp starts them 0, 200 and 400 ms into the level, and
// run.json records the ramp.
func TestRunRampUp(t *testing.T) {
	srv := fakellm.New(fakellm.Script{TTFT: 500 * time.Millisecond, Gap: time.Millisecond, Tokens: 2, Usage: true})
	defer srv.Close()
	dir := filepath.Join(t.TempDir(), "run")
	p := fakePlan(srv.URL+"/v1", 16, 2)
	p.Load.Concurrency, p.Load.Requests, p.Load.RampUp = []int{3}, 3, 600*time.Millisecond
	runPlan(t, p, dir)
	recs, _, err := results.ReadRecords(dir)
	if err != nil || len(recs) != 3 {
		t.Fatalf("requests.jsonl: %d records, %v", len(recs), err)
	}
	var offs []float64
	for _, r := range recs {
		offs = append(offs, r.OffsetMs)
	}
	slices.Sort(offs)
	for i, o := range offs {
		if want := float64(i) * 200; math.Abs(o-want) > 40 {
			t.Errorf("user %d started at %.1f ms, want %.0f (all %v)", i, o, want, offs)
		}
	}
	rj, err := os.ReadFile(filepath.Join(dir, results.RunFile))
	if err != nil || !strings.Contains(string(rj), `"ramp_up": "600ms"`) {
		t.Errorf("run.json does not record the ramp: %v", err)
	}
}

// TestRunStoresLevelsInLoadOrder: levels run as 4, 1, 2 are stored as 1,
// 2, 4 in summary.json, and every record on disk still points at its own
// level.
func TestRunStoresLevelsInLoadOrder(t *testing.T) {
	srv := fakellm.New(fakellm.Script{TTFT: time.Millisecond, Gap: time.Millisecond, Tokens: 2, Usage: true})
	defer srv.Close()
	dir := filepath.Join(t.TempDir(), "run")
	p := fakePlan(srv.URL+"/v1", 16, 2)
	p.Load.Concurrency, p.Load.Requests = []int{4, 1, 2}, 4
	runPlan(t, p, dir)
	s, err := results.ReadSummary(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []int
	for _, lv := range s.Levels {
		got = append(got, lv.Load.Concurrency)
	}
	if fmt.Sprint(got) != "[1 2 4]" {
		t.Fatalf("levels stored as %v, want [1 2 4]", got)
	}
	recs, _, err := results.ReadRecords(dir)
	if err != nil || len(recs) != 12 {
		t.Fatalf("%d records, %v", len(recs), err)
	}
	for _, r := range recs {
		if r.Level < 0 || r.Level >= len(s.Levels) || s.Levels[r.Level].Load != r.Load {
			t.Fatalf("record %d (load %s) points at level %d", r.ID, r.Load, r.Level)
		}
	}
}

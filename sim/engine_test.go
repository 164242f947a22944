package sim

import (
	"context"
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/tokbench/tokbench/metrics"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeCost has step times chosen by the test.
type fakeCost struct {
	fn func(Step) time.Duration
	kv int
}

func (f fakeCost) StepTime(s Step) time.Duration { return f.fn(s) }
func (f fakeCost) KVCapacityTokens() int         { return f.kv }

func fixedCost(d time.Duration, kv int) fakeCost {
	return fakeCost{fn: func(Step) time.Duration { return d }, kv: kv}
}

const ms = time.Millisecond

// runAll steps the engine until idle and returns, per request ID, the
// instants of its chunks and their token counts.
func runAll(t *testing.T, e *Engine) (map[uint64][]time.Duration, map[uint64][]int, []StepResult) {
	t.Helper()
	at := map[uint64][]time.Duration{}
	toks := map[uint64][]int{}
	var steps []StepResult
	for i := 0; ; i++ {
		if i > 1_000_000 {
			t.Fatal("engine did not finish")
		}
		res, ok := e.Step()
		if !ok {
			break
		}
		for _, em := range res.Emits {
			at[em.ID] = append(at[em.ID], res.End)
			toks[em.ID] = append(toks[em.ID], em.Tokens)
		}
		res.Emits = append([]Emit(nil), res.Emits...)
		steps = append(steps, res)
	}
	return at, toks, steps
}

func mustEngine(t *testing.T, cfg EngineConfig, c Cost) *Engine {
	t.Helper()
	e, err := NewEngine(cfg, c)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func mustSubmit(t *testing.T, e *Engine, r Request) {
	t.Helper()
	if err := e.Submit(r); err != nil {
		t.Fatal(err)
	}
}

func TestSingleRequestInstants(t *testing.T) {
	e := mustEngine(t, EngineConfig{}, fixedCost(10*ms, 1<<20))
	mustSubmit(t, e, Request{ID: 7, PromptTokens: 100, MaxTokens: 5})
	at, toks, steps := runAll(t, e)
	// The prefill step (0–10 ms) samples token 0; each decode step adds one.
	want := []time.Duration{10 * ms, 20 * ms, 30 * ms, 40 * ms, 50 * ms}
	if !reflect.DeepEqual(at[7], want) {
		t.Errorf("token instants = %v, want %v", at[7], want)
	}
	if !reflect.DeepEqual(toks[7], []int{1, 1, 1, 1, 1}) {
		t.Errorf("tokens per chunk = %v, want all 1", toks[7])
	}
	last := steps[len(steps)-1].Emits[0]
	if last.Finish != FinishLength {
		t.Errorf("finish = %v, want length", last.Finish)
	}
	if steps[0].Step != (Step{PrefillTokens: 100, PrefillContextTokens: 100, PrefillAttentionPairs: 5000}) {
		t.Errorf("first step = %+v, want a 100-token prefill", steps[0].Step)
	}
	if s := steps[2].Step; s != (Step{DecodeSeqs: 1, KVTokens: 101}) {
		t.Errorf("third step = %+v, want 1 decode over 101 KV tokens", s)
	}
	if e.KVUsedTokens() != 0 {
		t.Errorf("KV used after finishing = %d, want 0", e.KVUsedTokens())
	}
}

func TestArrivalWhileIdleJumpsClock(t *testing.T) {
	e := mustEngine(t, EngineConfig{}, fixedCost(10*ms, 1<<20))
	mustSubmit(t, e, Request{ID: 1, Arrival: 5 * ms, PromptTokens: 10, MaxTokens: 2})
	at, _, _ := runAll(t, e)
	want := []time.Duration{15 * ms, 25 * ms}
	if !reflect.DeepEqual(at[1], want) {
		t.Errorf("instants = %v, want %v", at[1], want)
	}
}

func TestBatchingSharesSteps(t *testing.T) {
	// Step time grows with the batch: 10 ms + 1 ms per decoding sequence.
	c := fakeCost{kv: 1 << 20, fn: func(s Step) time.Duration {
		return 10*ms + time.Duration(s.DecodeSeqs)*ms
	}}
	e := mustEngine(t, EngineConfig{}, c)
	mustSubmit(t, e, Request{ID: 1, PromptTokens: 50, MaxTokens: 3})
	mustSubmit(t, e, Request{ID: 2, PromptTokens: 60, MaxTokens: 3})
	at, _, steps := runAll(t, e)
	want := []time.Duration{10 * ms, 22 * ms, 34 * ms}
	for _, id := range []uint64{1, 2} {
		if !reflect.DeepEqual(at[id], want) {
			t.Errorf("request %d instants = %v, want %v", id, at[id], want)
		}
	}
	if len(steps) != 3 {
		t.Fatalf("steps = %d, want 3 (both requests in every step)", len(steps))
	}
	if s := steps[0].Step; s.PrefillTokens != 110 {
		t.Errorf("first step prefill = %d, want 110", s.PrefillTokens)
	}
}

func TestChunkedPrefillSlowsDecode(t *testing.T) {
	// 10 ms per step plus 10 µs per prefill token.
	c := fakeCost{kv: 1 << 20, fn: func(s Step) time.Duration {
		return 10*ms + time.Duration(s.PrefillTokens)*10*time.Microsecond
	}}
	e := mustEngine(t, EngineConfig{MaxBatchedTokens: 1000}, c)
	mustSubmit(t, e, Request{ID: 1, PromptTokens: 10, MaxTokens: 6})
	mustSubmit(t, e, Request{ID: 2, Arrival: 5 * ms, PromptTokens: 2500, MaxTokens: 1})
	at, _, steps := runAll(t, e)
	// Step 1: A's prefill, 10.1 ms. Steps 2–4: A decodes (1 budget token)
	// while B prefills in chunks of 999, 999, 502 tokens. Then A decodes alone.
	s1 := 10*ms + 100*time.Microsecond
	full := 10*ms + 999*10*time.Microsecond
	last := 10*ms + 502*10*time.Microsecond
	wantA := []time.Duration{
		s1, s1 + full, s1 + 2*full, s1 + 2*full + last,
		s1 + 2*full + last + 10*ms, s1 + 2*full + last + 20*ms,
	}
	if !reflect.DeepEqual(at[1], wantA) {
		t.Errorf("decode instants = %v, want %v", at[1], wantA)
	}
	if want := []time.Duration{s1 + 2*full + last}; !reflect.DeepEqual(at[2], want) {
		t.Errorf("long prompt's first token at %v, want %v", at[2], want)
	}
	if got := steps[1].Step; got != (Step{DecodeSeqs: 1, KVTokens: 10, PrefillTokens: 999, PrefillContextTokens: 999, PrefillAttentionPairs: 999 * 999 / 2}) {
		t.Errorf("mixed step = %+v", got)
	}
	if got := steps[2].Step.PrefillContextTokens; got != 1998 {
		t.Errorf("second chunk's context = %d, want 1998", got)
	}
}

func TestKVCapacityQueues(t *testing.T) {
	e := mustEngine(t, EngineConfig{}, fixedCost(10*ms, 100))
	for id := uint64(1); id <= 3; id++ {
		mustSubmit(t, e, Request{ID: id, PromptTokens: 40, MaxTokens: 10})
	}
	at, _, steps := runAll(t, e)
	// A and B fit (80 of 100 tokens); C waits until they finish at 100 ms,
	// then prefills in the step 100–110 ms.
	if got, want := at[3][0], 110*ms; got != want {
		t.Errorf("queued request's first token at %v, want %v", got, want)
	}
	if got, want := at[1][9], 100*ms; got != want {
		t.Errorf("first request's last token at %v, want %v", got, want)
	}
	for i, s := range steps {
		if s.KVUsedTokens > 100 {
			t.Errorf("step %d: KV used %d > capacity 100", i, s.KVUsedTokens)
		}
	}
	if steps[0].Waiting != 1 || steps[0].Running != 2 {
		t.Errorf("after step 1: running %d waiting %d, want 2 and 1", steps[0].Running, steps[0].Waiting)
	}
}

func TestPreemptionRecomputes(t *testing.T) {
	e := mustEngine(t, EngineConfig{}, fixedCost(10*ms, 100))
	mustSubmit(t, e, Request{ID: 1, PromptTokens: 40, MaxTokens: 40})
	mustSubmit(t, e, Request{ID: 2, PromptTokens: 40, MaxTokens: 40})
	_, toks, steps := runAll(t, e)
	preempted := 0
	for i, s := range steps {
		preempted += s.Preempted
		if s.KVUsedTokens > 100 {
			t.Errorf("step %d: KV used %d > capacity 100", i, s.KVUsedTokens)
		}
	}
	if preempted == 0 {
		t.Error("no preemption, want the newest request evicted when the cache fills")
	}
	for _, id := range []uint64{1, 2} {
		sum := 0
		for _, n := range toks[id] {
			sum += n
		}
		if sum != 40 {
			t.Errorf("request %d produced %d tokens, want 40", id, sum)
		}
	}
}

func TestSubmitTooLong(t *testing.T) {
	e := mustEngine(t, EngineConfig{}, fixedCost(ms, 100))
	if err := e.Submit(Request{ID: 1, PromptTokens: 90, MaxTokens: 20}); err == nil {
		t.Error("Submit of 110 tokens into a 100-token cache succeeded, want ErrTooLong")
	}
}

func TestCancel(t *testing.T) {
	e := mustEngine(t, EngineConfig{}, fixedCost(10*ms, 1000))
	mustSubmit(t, e, Request{ID: 1, PromptTokens: 10, MaxTokens: 100})
	e.Step()
	if !e.Cancel(1) {
		t.Fatal("Cancel(1) = false")
	}
	if !e.Idle() || e.KVUsedTokens() != 0 {
		t.Errorf("after cancel: idle %v, KV %d; want idle and 0", e.Idle(), e.KVUsedTokens())
	}
}

func TestDeterministicWithSeed(t *testing.T) {
	run := func(seed uint64) []Trace {
		cfg := EngineConfig{Seed: seed, MeanOutputTokens: 30, Spec: Spec{DraftTokens: 3, Acceptance: 0.7, DraftCostRatio: 0.1}}
		c := fakeCost{kv: 5000, fn: func(s Step) time.Duration {
			return time.Duration(5000+100*s.DecodeSeqs+s.PrefillTokens) * time.Microsecond
		}}
		tr, err := RunClosedLoop(context.Background(), cfg, c, ClosedLoop{Users: 8, Requests: 60, PromptTokens: 200, MaxTokens: 100})
		if err != nil {
			t.Fatal(err)
		}
		return tr
	}
	a, b := run(1), run(1)
	if !reflect.DeepEqual(a, b) {
		t.Error("two runs with seed 1 differ")
	}
	if reflect.DeepEqual(a, run(2)) {
		t.Error("seeds 1 and 2 give identical runs")
	}
}

func TestEOSDraw(t *testing.T) {
	e := mustEngine(t, EngineConfig{MeanOutputTokens: 50, Seed: 3}, fixedCost(ms, 1<<30))
	const n = 4000
	for id := uint64(0); id < n; id++ {
		mustSubmit(t, e, Request{ID: id, PromptTokens: 1, MaxTokens: 100000, MinTokens: 5})
	}
	_, toks, _ := runAll(t, e)
	total, short := 0, 0
	for _, ts := range toks {
		sum := 0
		for _, k := range ts {
			sum += k
		}
		if sum < 5 {
			short++
		}
		total += sum
	}
	// Geometric with mean 50, floored at 5: mean ≈ 50 + E[max(0, 5−X)] ≈ 50.4.
	mean := float64(total) / n
	if math.Abs(mean-50.4) > 2.5 {
		t.Errorf("mean output = %.2f tokens, want 50.4 ± 2.5", mean)
	}
	if short > 0 {
		t.Errorf("%d requests stopped before min_tokens", short)
	}
}

func TestSpecDecoding(t *testing.T) {
	spec := Spec{DraftTokens: 4, Acceptance: 0.8, DraftCostRatio: 0.1}
	if got, want := spec.ExpectedTokens(), 3.3616; math.Abs(got-want) > 1e-3 {
		t.Errorf("ExpectedTokens = %v, want %v", got, want)
	}
	var calls []Step
	c := fakeCost{kv: 1 << 30, fn: func(s Step) time.Duration {
		calls = append(calls, s)
		return 10 * ms
	}}
	e := mustEngine(t, EngineConfig{Spec: spec, Seed: 9}, c)
	const max = 200_000
	mustSubmit(t, e, Request{ID: 1, PromptTokens: 10, MaxTokens: max})
	_, toks, steps := runAll(t, e)
	decodeSteps := len(toks[1]) - 1
	mean := float64(max-1) / float64(decodeSteps)
	if math.Abs(mean-spec.ExpectedTokens()) > 0.03 {
		t.Errorf("mean tokens per decode step = %.4f, want %.4f ± 0.03", mean, spec.ExpectedTokens())
	}
	// A decode step: the target pass verifying 4 drafts (10 ms) plus 4 draft
	// steps at 0.1 of a decode step (4 ms).
	if d := steps[1].End - steps[1].Start; d != 14*ms {
		t.Errorf("speculative step = %v, want 14ms", d)
	}
	if got := calls[1]; got.DecodeSeqs != 1 || got.PrefillTokens != 4 {
		t.Errorf("target pass = %+v, want 1 decode + 4 verification tokens", got)
	}
}

func TestClosedLoopKeepsUsersBusy(t *testing.T) {
	tr, err := RunClosedLoop(context.Background(), EngineConfig{}, fixedCost(10*ms, 1<<20),
		ClosedLoop{Users: 2, Requests: 4, PromptTokens: 10, MaxTokens: 3})
	if err != nil {
		t.Fatal(err)
	}
	// Each request takes 3 steps; the second wave arrives at 30 ms.
	wantArrival := []time.Duration{0, 0, 30 * ms, 30 * ms}
	for i, x := range tr {
		if x.Arrival != wantArrival[i] {
			t.Errorf("request %d arrival = %v, want %v", i, x.Arrival, wantArrival[i])
		}
		if x.TTFT() != 10*ms || x.OutputTokens != 3 {
			t.Errorf("request %d: TTFT %v, %d tokens; want 10ms, 3", i, x.TTFT(), x.OutputTokens)
		}
	}
}

// TestCurvePhases: with Phases, a level is the mean of that many runs
// whose users start at random instants (the same for the same seed), a
// grouping of users into one step shows in some of them, and a single
// user's level is one run.
func TestCurvePhases(t *testing.T) {
	// A prompt of 100 tokens costs 100 ms, a decode step 10 ms.
	cost := fakeCost{fn: func(s Step) time.Duration { return 10*ms + time.Duration(s.PrefillTokens)*ms }, kv: 1 << 20}
	cc := CurveConfig{Users: []int{1, 3}, Requests: 24, PromptTokens: 100, MaxTokens: 20, Phases: 8}
	run := func() []metrics.Level {
		lv, err := Curve(context.Background(), EngineConfig{Seed: 3}, cost, cc)
		if err != nil {
			t.Fatal(err)
		}
		return lv
	}
	a, b := run(), run()
	if a[1].TTFT != b[1].TTFT || a[0].Repeats != nil {
		t.Fatalf("not reproducible, or one user's level repeated: %+v / %+v", a[1].TTFT, b[1].TTFT)
	}
	r := a[1].Repeats
	if r == nil || r.Runs != 8 || r.Fold != "mean" || len(r.PerRun["ttft_p50"]) != 8 {
		t.Fatalf("repeats %+v", r)
	}
	sum := 0.0
	for _, v := range r.PerRun["ttft_p50"] {
		sum += v
	}
	// The phases are replicas of one level: it counts the requests asked
	// for, not 8 times them.
	if rq := a[1].Requests; rq.Sent != 24 || rq.Completed != 24 || a[1].OutputTokens != 24*20 || a[1].TTFT.Count != 24 {
		t.Errorf("phased level: %d sent, %d completed, %d output tokens, %d TTFTs; want 24, 24, 480, 24", rq.Sent, rq.Completed, a[1].OutputTokens, a[1].TTFT.Count)
	}
	if math.Abs(a[1].TTFT.P50-sum/8) > 1e-9 {
		t.Errorf("TTFT p50 %.3f, the runs' mean %.3f", a[1].TTFT.P50, sum/8)
	}
	// A prompt's first token comes 110 ms after it reaches an idle engine
	// at best (its prefill step alone).
	if sp := r.Spread["ttft_p50"]; sp[0] == sp[1] || sp[0] < 110 {
		t.Errorf("TTFT p50 over the phases %.1f–%.1f ms: want them to vary, from 110 ms up", sp[0], sp[1])
	}
	cc.Phases = 1
	one := run()
	if one[1].Repeats != nil || one[1].TTFT.Count != 24 {
		t.Errorf("Phases 1 is one run: %+v", one[1].Repeats)
	}
}

// TestPrefillAttentionPerSequence: attention is costed per sequence. Two
// prompts of 100 tokens with a 150-token budget: step 1 prefills A (100
// fresh: 5000 pairs) and B's first 50 (1250); step 2 decodes A (100 of
// context) and prefills B's last 50 after 50 cached (50·(50+25) = 3750).
// With 1 µs a pair and nothing else costing, the steps take 6.25 and
// 3.85 ms; the sums taken as one prompt would give 150·75 = 11.25 ms.
func TestPrefillAttentionPerSequence(t *testing.T) {
	c := Calibrated{WeightBytes: 1, KVCapacity: 1 << 20, BandwidthBytesPerSec: 1e18, MBU: 1, PrefillTPS: 1e18, AttentionNsPerPair: 1000}
	e := mustEngine(t, EngineConfig{MaxBatchedTokens: 150}, c)
	for id := range uint64(2) {
		if err := e.Submit(Request{ID: id, PromptTokens: 100, MaxTokens: 2}); err != nil {
			t.Fatal(err)
		}
	}
	_, _, steps := runAll(t, e)
	if len(steps) < 2 {
		t.Fatalf("%d steps, want at least 2", len(steps))
	}
	for i, want := range []struct {
		pairs int
		dur   time.Duration
	}{{6250, 6250 * time.Microsecond}, {3750, 3850 * time.Microsecond}} {
		st := steps[i]
		if st.Step.PrefillAttentionPairs != want.pairs {
			t.Errorf("step %d: %d prefill attention pairs, want %d", i, st.Step.PrefillAttentionPairs, want.pairs)
		}
		if d := st.End - st.Start; d < want.dur || d > want.dur+time.Microsecond {
			t.Errorf("step %d took %v, want %v", i, d, want.dur)
		}
	}
}

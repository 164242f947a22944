package benchmark

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
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
	"github.com/tokbench/tokbench/tokenize"
	"github.com/tokbench/tokbench/workload"
)

// mooncakeTrace writes n requests in Mooncake's format: gaps drawn at
// rate req/s, lengths known, every request's first hash id one of 8 (a
// shared system prompt), then ids of its own.
func mooncakeTrace(t *testing.T, n int, rate float64) string {
	t.Helper()
	rng := rand.New(rand.NewPCG(7, 7))
	var b strings.Builder
	at := 1_700_000.0 // a trace's timestamps need not start at 0
	next := int64(100)
	for i := range n {
		in := 1 + rng.IntN(1200)
		blocks := (in + 511) / 512
		ids := []int64{int64(i % 8)}
		for range blocks - 1 {
			ids = append(ids, next)
			next++
		}
		fmt.Fprintf(&b, `{"timestamp": %.3f, "input_length": %d, "output_length": %d, "hash_ids": %s}`+"\n",
			at, in, 1+rng.IntN(24), strings.ReplaceAll(fmt.Sprint(ids), " ", ", "))
		at += rng.ExpFloat64() / rate * 1000
	}
	path := filepath.Join(t.TempDir(), "mooncake.jsonl")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestTraceReplay: a 1,000-request Mooncake trace replayed twice as fast
// reaches the server at the trace's instants (within traceTolMs p99,
// against the server's own arrival clock) with every prompt and answer of
// the trace's lengths, and the prompts that share a hash id share its
// block.
func TestTraceReplay(t *testing.T) {
	const n = 1000
	path := mooncakeTrace(t, n, 100) // 10 s of trace, 5 s replayed
	srv := fakellm.New(fakellm.Script{TTFT: 2 * time.Millisecond, Gap: 200 * time.Microsecond, Usage: true})
	defer srv.Close()
	tr, err := workload.ReadTrace(path, "")
	if err != nil {
		t.Fatal(err)
	}
	p := DefaultPlan()
	p.URL, p.Model, p.IgnoreEOS = srv.URL+"/v1", "m", true
	p.Load = LevelSpec{Trace: tr, TraceSpeeds: []float64{2}}
	p.Workload.Trace = tr
	p.Levels = p.Load.Levels()
	if len(p.Levels) != 1 || p.Levels[0].Load.Arrival != metrics.ArrivalTrace || len(p.Levels[0].Offsets) != n {
		t.Fatalf("levels %+v", p.Levels)
	}
	var recs []metrics.Record
	watch := busy.Start()
	res, err := Run(context.Background(), p, Hooks{Runner: func(r *load.Runner, _ metrics.Target) error {
		r.Sink = func(rec metrics.Record) { recs = append(recs, rec) } // serialized by the runner
		return nil
	}})
	machine := watch.Stop()
	if err != nil {
		t.Fatal(err)
	}
	lv := res.Summary.Levels[0]
	if lv.Requests.Completed != n {
		t.Fatalf("%d of %d completed: %v", lv.Requests.Completed, n, lv.Requests.Errors)
	}
	// Send instants: each request's arrival at the server (the kernel's
	// stamp) against its instant in the trace, up to the one shift the
	// level's start puts between the two (the median difference).
	arrival := map[string]time.Time{}
	for _, st := range srv.Streams() {
		arrival[st.ID] = st.Arrived
	}
	start := recs[0].Start.Add(-time.Duration(recs[0].OffsetMs * 1e6)) // the level's start
	late := make([]float64, 0, n)                                      // arrival − the trace's instant, ms
	queue := make([]float64, 0, n)                                     // that less the lateness tokbench recorded
	for _, r := range recs {
		at, ok := arrival[r.ResponseID]
		if !ok {
			t.Fatalf("no stream %q", r.ResponseID)
		}
		sched := start.Add(time.Duration((r.OffsetMs - r.QueueMs) * 1e6))
		late = append(late, float64(at.Sub(sched))/1e6)
		queue = append(queue, float64(at.Sub(sched))/1e6-r.QueueMs)
	}
	spread := func(v []float64) (p50, p99, maxErr float64) {
		shift := metrics.Percentile(slices.Sorted(slices.Values(v)), 50)
		errs := make([]float64, len(v))
		for i, x := range v {
			errs[i] = math.Abs(x - shift)
		}
		slices.Sort(errs)
		return metrics.Percentile(errs, 50), metrics.Percentile(errs, 99), errs[len(errs)-1]
	}
	p50, p99, mx := spread(late)
	lag := 0.0 // the client's own scheduling lag, p99
	if lv.Client != nil {
		lag = lv.Client.TickLagP99Ms
	}
	t.Logf("send instant error p50 %.3f ms, p99 %.3f ms, max %.3f ms; client tick lag p99 %.3f ms", p50, p99, mx, lag)
	// Late or not, each request's lateness is what its record says
	// (queue_ms): the latency from the schedule is exact. The record's
	// send instant is taken just before the write, so a machine that keeps
	// the client off its cores moves the kernel's arrival from it by as
	// long as it wakes the client late: the bound grows by that lag.
	qTol := 1.0
	if !machine.Quiet() {
		qTol += machine.P99Ms
		t.Logf("queue_ms judged within %.3f ms of the server's arrival, not 1: the machine kept this process from its cores (%v)", qTol, machine)
	}
	if _, q99, _ := spread(queue); q99 > qTol {
		t.Errorf("the recorded lateness is off the server's by %.3f ms p99, want ≤ %.3f", q99, qTol)
	}
	// On time, when the machine let the client run (its own self-check
	// says so): a busy machine's late sends are recorded, as checked above.
	if lag >= 1 {
		t.Logf("send instants not judged against the trace: the client's ticker lagged p99 %.3f ms", lag)
	} else if p99 > traceTolMs {
		t.Errorf("send instants off the trace by %.3f ms p99, want ≤ %g", p99, float64(traceTolMs))
	}
	// Lengths: every prompt of its input length, every answer of its output.
	tok, _ := tokenize.Open(tokenize.Default)
	trace := p.Workload.Trace
	var wantIn, gotIn, wantOut, gotOut []int
	for _, r := range trace.Requests {
		wantIn, wantOut = append(wantIn, r.InputTokens), append(wantOut, r.OutputTokens)
	}
	firstBlocks := map[string]bool{}
	for _, body := range srv.Bodies() {
		msgs := body["messages"].([]any)
		text := msgs[len(msgs)-1].(map[string]any)["content"].(string)
		gotIn = append(gotIn, tok.Count(text))
		if words := strings.Fields(text); len(words) >= 512 {
			firstBlocks[strings.Join(words[:512], " ")] = true
		}
		if body["ignore_eos"] != true {
			t.Fatalf("a trace request without ignore_eos: %v", body)
		}
	}
	for _, r := range recs {
		gotOut = append(gotOut, r.OutputTokens)
	}
	for _, l := range [][]int{wantIn, gotIn, wantOut, gotOut} {
		slices.Sort(l)
	}
	if !slices.Equal(gotIn, wantIn) || !slices.Equal(gotOut, wantOut) {
		t.Errorf("lengths differ from the trace's")
	}
	if len(firstBlocks) != 8 {
		t.Errorf("%d distinct first blocks among the long prompts, want the trace's 8 shared ids", len(firstBlocks))
	}
}

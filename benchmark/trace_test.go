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

	"github.com/tokbench/tokbench/internal/fakellm"
	"github.com/tokbench/tokbench/load"
	"github.com/tokbench/tokbench/metrics"
	"github.com/tokbench/tokbench/tokenize"
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
	path := mooncakeTrace(t, n, 200) // 5 s of trace, 2.5 s replayed
	srv := fakellm.New(fakellm.Script{TTFT: 2 * time.Millisecond, Gap: 200 * time.Microsecond, Usage: true})
	defer srv.Close()
	o := DefaultOptions()
	o.URL, o.Model, o.Trace, o.TraceSpeed, o.Warmup = srv.URL+"/v1", "m", path, "2", 0
	o.Getenv = func(string) string { return "" }
	o.Given = func(f string) bool { return f == "trace" || f == "trace-speed" || f == "warmup" }
	p, err := o.Plan()
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Levels) != 1 || p.Levels[0].Load.Arrival != metrics.ArrivalTrace || len(p.Levels[0].Offsets) != n {
		t.Fatalf("levels %+v", p.Levels)
	}
	var recs []metrics.Record
	res, err := Run(context.Background(), p, Hooks{Runner: func(r *load.Runner, _ metrics.Target) error {
		r.Sink = func(rec metrics.Record) { recs = append(recs, rec) } // serialized by the runner
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	lv := res.Summary.Levels[0]
	if lv.Requests.Completed != n {
		t.Fatalf("%d of %d completed: %v", lv.Requests.Completed, n, lv.Requests.Errors)
	}
	// Send instants: the server's arrivals, from the first, against the
	// trace's offsets, both in order.
	streams := srv.Streams()
	arrived := make([]time.Duration, len(streams))
	for i, s := range streams {
		arrived[i] = s.Arrived.Sub(streams[0].Arrived)
	}
	slices.Sort(arrived)
	want := p.Levels[0].Offsets
	errs := make([]float64, n)
	for i := range want {
		errs[i] = math.Abs(float64(arrived[i]-arrived[0]-(want[i]-want[0]))) / 1e6
	}
	slices.Sort(errs)
	p99 := metrics.Percentile(errs, 99)
	t.Logf("send instant error p50 %.3f ms, p99 %.3f ms, max %.3f ms", metrics.Percentile(errs, 50), p99, errs[n-1])
	if p99 > traceTolMs {
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

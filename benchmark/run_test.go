package benchmark

import (
	"context"
	"crypto/tls"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/tokbench/tokbench/internal/fakellm"
	"github.com/tokbench/tokbench/load"
	"github.com/tokbench/tokbench/metrics"
	"github.com/tokbench/tokbench/tokenize"
	"github.com/tokbench/tokbench/workload"
)

func testPlan(t *testing.T, url string, spec LevelSpec) *Plan {
	t.Helper()
	tok, err := tokenize.Open(tokenize.Default)
	if err != nil {
		t.Fatal(err)
	}
	p := &Plan{
		URL: url, API: "openai-chat", Model: "m", Repeat: 1, ContinuousUsage: Off,
		Client:   ClientOptions{Timeout: 10 * time.Second},
		Load:     spec,
		Workload: Workload{Inputs: []workload.Dist{workload.Fixed(16)}, Output: workload.Fixed(8), Tokenizer: tok, PromptSeed: 1},
	}
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestRunMeasuresEveryLevel: a library user's plan runs like bench: every
// level, every request, exact tokens from the server's usage, and the plan
// itself is left as it was.
func TestRunMeasuresEveryLevel(t *testing.T) {
	srv := fakellm.New(fakellm.Script{TTFT: 5 * time.Millisecond, Gap: time.Millisecond, Tokens: 8, Usage: true})
	defer srv.Close()
	p := testPlan(t, srv.URL+"/v1", LevelSpec{Concurrency: []int{1, 3}, Requests: 6})
	before := len(p.levels())
	started := 0
	res, err := Run(context.Background(), p, Hooks{Level: func(*load.Runner, load.Level) func() { started++; return func() {} }})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Summary.Levels) != 2 || res.Completed() != 12 || started != 2 {
		t.Fatalf("levels %d, completed %d, level hooks %d; want 2, 12, 2", len(res.Summary.Levels), res.Completed(), started)
	}
	for _, lv := range res.Summary.Levels {
		if lv.OutputTokens != 6*8 || lv.TokenSource != metrics.SourceUsage {
			t.Errorf("%s: %d output tokens from %q, want 48 from usage", lv.Load, lv.OutputTokens, lv.TokenSource)
		}
	}
	if len(p.levels()) != before || p.Levels != nil || p.Model != "m" || p.Header != nil {
		t.Errorf("Run changed the plan: %d levels, model %q, header %v", len(p.levels()), p.Model, p.Header)
	}
}

// TestRunWaitsForStartAt: no request is sent before StartAt.
func TestRunWaitsForStartAt(t *testing.T) {
	srv := fakellm.New(fakellm.Script{TTFT: time.Millisecond, Gap: time.Millisecond, Tokens: 2, Usage: true})
	defer srv.Close()
	p := testPlan(t, srv.URL+"/v1", LevelSpec{Concurrency: []int{2}, Requests: 2})
	p.StartAt = time.Now().Add(300 * time.Millisecond)
	if _, err := Run(context.Background(), p, Hooks{}); err != nil {
		t.Fatal(err)
	}
	for _, st := range srv.Streams() {
		if st.Arrived.Before(p.StartAt) {
			t.Errorf("a request arrived %v before StartAt", p.StartAt.Sub(st.Arrived))
		}
	}
}

// TestValidate: a plan that cannot run is an InputError naming the Plan
// field at fault.
func TestValidate(t *testing.T) {
	good := func() *Plan {
		tok, _ := tokenize.Open(tokenize.Default)
		return &Plan{Repeat: 1, Levels: LevelSpec{Concurrency: []int{4}}.Levels(),
			Workload: Workload{Inputs: []workload.Dist{workload.Fixed(16)}, Tokenizer: tok}}
	}
	for _, c := range []struct {
		field string
		mod   func(*Plan)
	}{
		{"Repeat", func(p *Plan) { p.Repeat = 0 }},
		{"Client.Retry", func(p *Plan) { p.Client.Retry = -1 }},
		{"Client.Grace", func(p *Plan) { p.Client.Grace = -time.Second }},
		{"Client.MaxErrorRate", func(p *Plan) { p.Client.MaxErrorRate = 2 }},
		{"Shard", func(p *Plan) {
			p.Shard = load.Shard{Index: 3, Count: 4}
			p.Levels = LevelSpec{Concurrency: []int{1}, Shard: p.Shard}.Levels()
		}},
		{"Load.Lockstep", func(p *Plan) { p.Levels[0].Lockstep, p.Levels[0].RampUp = true, time.Second }},
		{"Load.RampUp", func(p *Plan) {
			p.Levels = LevelSpec{Rates: []float64{2}}.Levels()
			p.Load.RampUp = time.Second
		}},
		{"Load", func(p *Plan) { p.Levels = nil }},
		{"Workload.Tokenizer", func(p *Plan) { p.Workload.Tokenizer = nil }},
	} {
		p := good()
		c.mod(p)
		err := p.Validate()
		ie, ok := errors.AsType[*InputError](err)
		if !ok || ie.Field != c.field || !strings.HasPrefix(err.Error(), c.field+": ") {
			t.Errorf("%s: %v, want an InputError of that field", c.field, err)
		}
	}
	if err := good().Validate(); err != nil {
		t.Errorf("a good plan: %v", err)
	}
	p := good()
	p.Levels, p.Load = nil, LevelSpec{Concurrency: []int{2}}
	if err := p.Validate(); err != nil || len(p.levels()) != 1 || p.levels()[0].Requests != 16 {
		t.Errorf("a plan of Load alone: %v, levels %+v; want one level of 16 requests", err, p.levels())
	}
	if err := DefaultPlan().Validate(); err != nil {
		t.Errorf("DefaultPlan: %v", err)
	}
}

// TestLevelSpec: default request counts, the input-length sweep and the
// shard's part.
func TestLevelSpec(t *testing.T) {
	lv := LevelSpec{Concurrency: []int{1, 8}, Rates: nil, InputTokens: []int{1000, 8000}, Steps: 1}.Levels()
	if len(lv) != 4 || lv[0].Requests != 16 || lv[1].Requests != 32 || lv[2].Load.InputTokens != 8000 {
		t.Fatalf("levels %+v", lv)
	}
	r := LevelSpec{Rates: []float64{2.5}, Shard: load.Shard{Index: 1, Count: 2}}.Levels()
	if len(r) != 1 || r[0].Load.RateRPS != 1.25 || r[0].Requests != 12 {
		t.Errorf("rate levels %+v, want one of 1.25 req/s and 12 of 25 requests (10 s of the whole rate)", r)
	}
}

// TestRunLeavesTheSweep: an automatic sweep keeps its state in Run's own
// copy, so the plan's is as given and a second run sweeps whole.
func TestRunLeavesTheSweep(t *testing.T) {
	srv := fakellm.New(fakellm.Script{TTFT: time.Millisecond, Gap: time.Millisecond, Tokens: 2, Usage: true})
	defer srv.Close()
	p := testPlan(t, srv.URL+"/v1", LevelSpec{Concurrency: []int{1}, Requests: 4})
	p.Load = LevelSpec{Requests: 4}
	p.Sweep = &load.AutoSweep{Max: 4, Refine: 1}
	before := *p.Sweep
	var runs [2][]int
	for i := range runs {
		res, err := Run(context.Background(), p, Hooks{})
		if err != nil {
			t.Fatal(err)
		}
		for _, lv := range res.Summary.Levels {
			runs[i] = append(runs[i], lv.Load.Concurrency)
		}
	}
	// Which levels a sweep measures depends on what it measured (it may
	// stop at 2 users); that the second sweep started afresh, from the
	// plan's untouched state, does not: a sweep that kept its state would
	// measure one level, or none.
	if !reflect.DeepEqual(*p.Sweep, before) || len(runs[1]) < 2 || runs[1][0] != 1 {
		t.Errorf("the same plan swept %v, then %v; the plan's sweep is %+v, was %+v", runs[0], runs[1], *p.Sweep, before)
	}
}

// TestNewTransportCopiesTLS: the caller's TLS configuration is not the
// transport's (HTTP/2 set-up rewrites it).
func TestNewTransportCopiesTLS(t *testing.T) {
	cfg := &tls.Config{ServerName: "x"}
	tr, _ := NewTransport(ClientOptions{TLS: cfg, HTTP2: true})
	if tr.Fallback.TLSClientConfig == cfg || tr.Fallback.TLSClientConfig.ServerName != "x" {
		t.Error("the transport holds the caller's TLS configuration itself")
	}
}

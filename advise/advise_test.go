package advise_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/tokbench/tokbench/advise"
	"github.com/tokbench/tokbench/benchmark"
	"github.com/tokbench/tokbench/internal/fakellm"
	"github.com/tokbench/tokbench/metrics"
	"github.com/tokbench/tokbench/workload"
)

// run benches a fake server at c=1,2 with prices.
func run(t *testing.T, s fakellm.Script, in, out float64) []metrics.Level {
	t.Helper()
	srv := fakellm.New(s)
	defer srv.Close()
	p := benchmark.DefaultPlan()
	p.URL, p.Model = srv.URL+"/v1", "m"
	p.Load.Concurrency, p.Load.Requests, p.Load.Warmup = []int{1, 2}, 4, 0
	p.Workload.Inputs, p.Workload.Output = []workload.Dist{workload.Fixed(64)}, workload.Fixed(16)
	p.Prices.InputPerMillion, p.Prices.OutputPerMillion = in, out
	res, err := benchmark.Run(context.Background(), p, benchmark.Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	return res.Summary.Levels
}

// TestAdviseFastAgainstCheap: a fast, expensive endpoint (20 ms to the
// first token, 200 tokens/s, 10 a million out) against a slow, cheap one
// (200 ms, 40 tokens/s, 0.4 a million): voice goes to the fast one, which
// alone meets its objectives; batch to the cheap one, which costs less per
// token; the figures that decide are in the answer.
func TestAdviseFastAgainstCheap(t *testing.T) {
	fast := run(t, fakellm.Script{TTFT: 20 * time.Millisecond, Gap: 5 * time.Millisecond, Tokens: 16, Usage: true}, 3, 10)
	cheap := run(t, fakellm.Script{TTFT: 200 * time.Millisecond, Gap: 25 * time.Millisecond, Tokens: 16, Usage: true}, 0.1, 0.4)
	a, err := advise.Of([]advise.Endpoint{{Name: "fast", Levels: fast}, {Name: "cheap", Levels: cheap}})
	if err != nil {
		t.Fatal(err)
	}
	uses := map[string]advise.Use{}
	for _, u := range a.Uses {
		uses[u.Profile] = u
	}
	voice, batch := uses["voice"], uses["batch"]
	if voice.Choice != "fast" || !voice.Endpoints[0].Meets || voice.Endpoints[1].Meets || voice.Endpoints[0].UpTo != 2 {
		t.Errorf("voice: %+v", voice)
	}
	if !strings.Contains(voice.Endpoints[1].Statement, "ttft_p95<=150ms (was 2") {
		t.Errorf("voice: the slow endpoint's failure does not give its TTFT: %q", voice.Endpoints[1].Statement)
	}
	if batch.Choice != "cheap" || !strings.Contains(batch.Why, "per million output tokens") {
		t.Errorf("batch: %+v", batch)
	}
	// fakellm's usage says 7 prompt tokens; 7 in + 16 out at 0.1 and 0.4
	// a million: 0.44375 a million output tokens.
	if c := batch.Endpoints[1].Level.CostPerMillion; c < 0.4437 || c > 0.4438 {
		t.Errorf("the cheap endpoint costs %g a million output tokens, want 0.44375", c)
	}
	// The agent chain: 5 calls of 600 tokens at the decode rate, plus TTFTs.
	f := batch.Endpoints[0].Level
	if want := 5 * (0.02 + 600/f.DecodeTPSP50); f.AgentChainS < want*0.98 || f.AgentChainS > want*1.1 {
		t.Errorf("fast agent chain %.2f s, want about %.2f", f.AgentChainS, want)
	}
	var text, md, js bytes.Buffer
	if advise.WriteText(&text, a) != nil || advise.WriteMarkdown(&md, a) != nil || advise.WriteJSON(&js, a) != nil {
		t.Fatal("writing failed")
	}
	if !strings.Contains(text.String(), "→ fast: the cheapest that meets it") || !strings.Contains(md.String(), "| cheap | yes |") {
		t.Errorf("text or Markdown lack the answer:\n%s\n%s", text.String(), md.String())
	}
	var back advise.Advice
	if err := json.Unmarshal(js.Bytes(), &back); err != nil || len(back.Uses) != len(a.Uses) {
		t.Errorf("JSON: %v", err)
	}
}

// TestStandingLoad: a standing's load reads as a sentence says it.
func TestStandingLoad(t *testing.T) {
	for _, c := range []struct {
		st   advise.Standing
		want string
	}{
		{advise.Standing{UpTo: 1, LoadUnit: "users"}, "1 user"},
		{advise.Standing{UpTo: 8, LoadUnit: "users"}, "8 users"},
		{advise.Standing{UpTo: 1, LoadUnit: "req/s"}, "1 req/s"},
		{advise.Standing{UpTo: 2.5, LoadUnit: "req/s"}, "2.5 req/s"},
	} {
		if got := c.st.Load(); got != c.want {
			t.Errorf("advise.Standing{UpTo: %g, LoadUnit: %q}.Load() = %q, want %q", c.st.UpTo, c.st.LoadUnit, got, c.want)
		}
	}
}

// TestAdviseConsidersEveryLevel is issue 34's case: voice missed tps_p5 ≥
// 60 at c=1 (56.78) and met both objectives at c=4 (TTFT p95 61.8 ms,
// tps_p5 88.8). The verdict is "meets", judged at c=4, not "no level
// meets".
func TestAdviseConsidersEveryLevel(t *testing.T) {
	lv := func(c int, ttftP95, tpsP5 float64) metrics.Level {
		l := metrics.Level{Load: metrics.Load{Mode: metrics.ModeConcurrency, Concurrency: c}, OutputTPS: 100 * float64(c)}
		l.Requests.Sent, l.Requests.Completed = 16, 16
		l.InputTokens, l.OutputTokens = 16*512, 16*128
		l.TTFT = metrics.Stats{Count: 16, P50: ttftP95 / 2, P95: ttftP95}
		l.DecodeTPS = metrics.Stats{Count: 16, P5: tpsP5, P50: tpsP5 + 10}
		return l
	}
	a, err := advise.Of([]advise.Endpoint{{Name: "e", Levels: []metrics.Level{lv(1, 40, 56.78), lv(4, 61.8, 88.8)}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range a.Uses {
		if u.Profile != "voice" {
			continue
		}
		st := u.Endpoints[0]
		if !st.Meets || st.UpTo != 4 || st.Level == nil || st.Level.Load != "c=4" || u.Choice != "e" {
			t.Errorf("voice: %+v (level %+v), want met up to 4 users, judged at c=4", st, st.Level)
		}
		if strings.Contains(st.Statement, "no level meets") || !strings.Contains(st.Statement, "1 user (tps_p5>=60 (was 56.78)) did not") {
			t.Errorf("voice: statement %q", st.Statement)
		}
		return
	}
	t.Fatal("no voice use")
}

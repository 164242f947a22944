package load

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tokbench/tokbench/api"
	"github.com/tokbench/tokbench/metrics"
	"github.com/tokbench/tokbench/sim"
	"github.com/tokbench/tokbench/tokenize"
	"github.com/tokbench/tokbench/wire"
)

// longSource sends one 128k-token prompt: " the" is one token under
// cl100k_base, so the prompt is exactly 131,072 tokens.
type longSource struct{ prompt string }

const longPromptTokens = 128 << 10

func (s longSource) Request(int) (*api.Request, int) {
	return &api.Request{Model: "llama-3.1-8b", MaxTokens: 8,
		Messages: []api.Message{{Role: "user", Content: s.prompt}}}, longPromptTokens
}

// fixedStep is a simulator cost model with a fixed step time.
type fixedStep struct {
	d  time.Duration
	kv int
}

func (f fixedStep) StepTime(sim.Step) time.Duration { return f.d }
func (f fixedStep) KVCapacityTokens() int           { return f.kv }

// TestLongPromptThroughSimulator: a 128k-token prompt (about 512 KB of
// JSON) goes through the runner, the HTTP client and the simulator's body
// limit, and the simulator counts every token of it. The simulator's
// default context is 32,768 tokens (vLLM's max-model-len default for
// many deployments), so the test raises it as a user would for a 128k model.
func TestLongPromptThroughSimulator(t *testing.T) {
	cfg := sim.DefaultConfig()
	cfg.MaxModelLen = 140_000
	cfg.Cost = fixedStep{time.Millisecond, 200_000} // not 10 s of simulated H100 prefill
	s, err := sim.NewServer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s.Handler())
	t.Cleanup(func() {
		hs.Close()
		s.Close()
	})
	tok, err := tokenize.Get("cl100k_base")
	if err != nil {
		t.Fatal(err)
	}
	prompt := strings.Repeat(" the", longPromptTokens)
	tr := wire.NewTransport() // what bench runs: the 512 KB body follows the request's head in a write of its own
	t.Cleanup(tr.CloseIdleConnections)
	r := &Runner{Client: &api.Client{HTTP: &http.Client{Transport: tr}, Adapter: api.OpenAI{Chat: true}, BaseURL: hs.URL + "/v1"},
		Tokenizer: tok, Timeout: time.Minute}
	res, err := r.RunLevel(context.Background(), 0, Level{Load: metrics.Load{Mode: "concurrency", Concurrency: 1}, Requests: 1}, longSource{prompt})
	if err != nil {
		t.Fatal(err)
	}
	rec := res.Records[0]
	if !rec.OK {
		t.Fatalf("128k-token prompt failed: %s %s", rec.ErrorClass, rec.Error)
	}
	// The server's prompt_tokens adds its chat template to the words.
	if rec.InputTokens < longPromptTokens || rec.InputTokens > longPromptTokens+16 {
		t.Errorf("InputTokens = %d, want %d plus the chat template", rec.InputTokens, longPromptTokens)
	}
	if rec.OutputTokens != 8 {
		t.Errorf("OutputTokens = %d, want 8", rec.OutputTokens)
	}
}

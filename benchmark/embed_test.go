package benchmark

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tokbench/tokbench/api"
	"github.com/tokbench/tokbench/metrics"
	"github.com/tokbench/tokbench/tokenize"
	"github.com/tokbench/tokbench/workload"
)

// countingEmbedder is an OpenAI embeddings server that counts the inputs
// and tokens (by the benchmark's own tokenizer) it embedded; usage says
// whether it reports them.
type countingEmbedder struct {
	mu             sync.Mutex
	inputs, tokens int
	requests       int
}

func (c *countingEmbedder) server(t *testing.T, usage bool) *httptest.Server {
	tok, err := tokenize.Open(tokenize.Default)
	if err != nil {
		t.Fatal(err)
	}
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/embeddings" {
			http.NotFound(w, r)
			return
		}
		var body struct{ Input []string }
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		n := 0
		var data []string
		for i, in := range body.Input {
			n += tok.Count(in)
			data = append(data, fmt.Sprintf(`{"index":%d,"embedding":[0.5,-0.5,0.25]}`, i))
		}
		c.mu.Lock()
		c.inputs, c.tokens, c.requests = c.inputs+len(body.Input), c.tokens+n, c.requests+1
		c.mu.Unlock()
		time.Sleep(5 * time.Millisecond)
		w.Header().Set("Content-Type", "application/json")
		u := ""
		if usage {
			u = fmt.Sprintf(`,"usage":{"prompt_tokens":%d,"total_tokens":%d}`, n, n)
		}
		fmt.Fprintf(w, `{"object":"list","data":[%s],"model":"m"%s}`, strings.Join(data, ","), u)
	}))
}

// TestRunEmbeddingsExact: inputs and tokens embedded are what the server
// counted, with usage and without it (the exact prompt lengths then), and
// their rates are those over the level's wall time; the level has no
// stream figures.
func TestRunEmbeddingsExact(t *testing.T) {
	for _, usage := range []bool{true, false} {
		var c countingEmbedder
		srv := c.server(t, usage)
		p := testPlan(t, srv.URL+"/v1", LevelSpec{Concurrency: []int{2}, Requests: 10})
		p.API, p.Workload.EmbedInputs = api.EmbedOpenAI, 3
		res, err := Run(context.Background(), p, Hooks{})
		srv.Close()
		if err != nil {
			t.Fatal(err)
		}
		c.mu.Lock() // the server's last counts may be written as the answer goes out
		defer c.mu.Unlock()
		lv := res.Summary.Levels[0]
		e := lv.Embeddings
		if e == nil {
			t.Fatalf("usage %v: no embeddings figures; %+v", usage, lv.Requests)
		}
		// Warm-up requests are the server's too, like the level's.
		if lv.Requests.Completed != 10 || c.requests < 10 || e.Inputs != 30 || c.inputs != 3*c.requests {
			t.Errorf("usage %v: %d completed of %d served, %d inputs of %d served", usage, lv.Requests.Completed, c.requests, e.Inputs, c.inputs)
		}
		if e.Tokens != 10*3*16 || c.tokens != 16*c.inputs {
			t.Errorf("usage %v: %d tokens; the server counted %d for %d inputs of 16 tokens asked", usage, e.Tokens, c.tokens, c.inputs)
		}
		if e.InputsPerS != float64(e.Inputs)/lv.DurationS || e.TokensPerS != float64(e.Tokens)/lv.DurationS {
			t.Errorf("usage %v: %g inputs/s, %g tok/s over %g s", usage, e.InputsPerS, e.TokensPerS, lv.DurationS)
		}
		wantSrc := metrics.EmbedSourcePrompt
		if usage {
			wantSrc = metrics.EmbedSourceUsage
		}
		if e.TokenSource != wantSrc || e.Dims != 3 || e.Latency.Count != 10 || e.Latency.Min < 5 {
			t.Errorf("usage %v: source %q, dims %d, latency %+v", usage, e.TokenSource, e.Dims, e.Latency)
		}
		if lv.TTFT.Count != 0 || lv.OutputTokens != 0 || lv.DecodeTPS.Count != 0 {
			t.Errorf("usage %v: stream figures %d %d %d", usage, lv.TTFT.Count, lv.OutputTokens, lv.DecodeTPS.Count)
		}
	}
}

// TestRunEmbeddingsSimulated: the embedded simulator serves the three
// protocols; its token counts are the inputs' exact lengths.
func TestRunEmbeddingsSimulated(t *testing.T) {
	for _, name := range []string{api.EmbedOpenAI, api.EmbedOllama, api.EmbedTEI} {
		p := testPlan(t, "", LevelSpec{Concurrency: []int{4}, Requests: 8})
		p.API, p.Model, p.Workload.EmbedInputs = name, "", 2
		res, err := Run(context.Background(), p, Hooks{})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		lv := res.Summary.Levels[0]
		if e := lv.Embeddings; e == nil || lv.Requests.Completed != 8 || e.Inputs != 16 || e.Tokens != 16*16 || e.Dims != 384 {
			t.Errorf("%s: %+v, embeddings %+v", name, lv.Requests, e)
		}
	}
}

// TestRunToolCalls: a run with tools against the simulator: every request
// calls one, the time to its first tool-call delta is recorded, and the
// definitions are counted in the prompt the server reports.
func TestRunToolCalls(t *testing.T) {
	for _, name := range []string{"openai-chat", "anthropic"} {
		p := testPlan(t, "", LevelSpec{Concurrency: []int{2}, Requests: 6})
		p.API, p.Model = name, ""
		p.Workload.Tools = workload.Tools(8, 1)
		res, err := Run(context.Background(), p, Hooks{})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		lv := res.Summary.Levels[0]
		tc := lv.ToolCalls
		if tc == nil || tc.Called != 6 || tc.Share != 1 || tc.ToolsPerRequest != 8 || tc.FirstCall.Count != 6 || tc.DefinitionTokens <= 0 || tc.ArgTokens <= 0 {
			t.Fatalf("%s: tool calls %+v", name, tc)
		}
		if tc.FirstCall.Max > lv.TTFT.Max || tc.FirstCall.Min <= 0 {
			t.Errorf("%s: first tool call %+v after the first token %+v", name, tc.FirstCall, lv.TTFT)
		}
		// The simulator counts the definitions at 4 bytes a token: far
		// more than the chat template's few tokens beyond the messages.
		if lv.TemplateTokensPerRequest+lv.ExtraPromptTokensPerRequest < 100 {
			t.Errorf("%s: the server counted %g+%g tokens beyond the messages", name, lv.TemplateTokensPerRequest, lv.ExtraPromptTokensPerRequest)
		}
	}
}

// TestRunTEIWithoutModel: TEI serves one model, lists none at
// /v1/models, and its requests name none: a run without --model runs.
func TestRunTEIWithoutModel(t *testing.T) {
	var n int
	var mu sync.Mutex
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/embed" {
			http.NotFound(w, r)
			return
		}
		var body struct{ Inputs []string }
		json.NewDecoder(r.Body).Decode(&body)
		mu.Lock()
		n += len(body.Inputs)
		mu.Unlock()
		fmt.Fprint(w, "["+strings.TrimSuffix(strings.Repeat("[0.1,0.2],", len(body.Inputs)), ",")+"]")
	}))
	defer srv.Close()
	p := testPlan(t, srv.URL, LevelSpec{Concurrency: []int{1}, Requests: 3})
	p.API, p.Model, p.Workload.EmbedInputs = api.EmbedTEI, "", 2
	res, err := Run(context.Background(), p, Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if e := res.Summary.Levels[0].Embeddings; e == nil || e.Inputs != 6 || e.Dims != 2 || n < 6 {
		t.Errorf("embeddings %+v; the server embedded %d", e, n)
	}
}

package load

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tokbench/tokbench/api"
	"github.com/tokbench/tokbench/metrics"
	"github.com/tokbench/tokbench/sim"
	"github.com/tokbench/tokbench/tokenize"
)

// TestRecordEmbeddings: an embeddings answer is a record without a
// stream — no TTFT, chunks or output — whose latency is its end, whose
// tokens are the server's where it counted them and else the inputs'
// exact count.
func TestRecordEmbeddings(t *testing.T) {
	tok, err := tokenize.Get("cl100k_base")
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	resp := &api.Response{Start: start, Done: start.Add(37 * time.Millisecond), Status: 200, SawDone: true,
		Embedding: &api.Embedding{Vectors: 4, Dims: 384, PromptTokens: 130}}
	info := RecordInfo{Prompt: "a b", InputTokensRequested: 128, EmbedInputs: 4}
	rec := Record(resp, tok, info)
	if !rec.OK || rec.EmbedInputs != 4 || rec.EmbedDims != 384 || rec.DoneMs != 37 || rec.InputTokens != 130 ||
		rec.TokenSource != metrics.SourceUsage || rec.OutputTokens != 0 || rec.TTFTMs != 0 || len(rec.ChunkMs) != 0 {
		t.Errorf("record %+v", rec)
	}
	resp.Embedding.PromptTokens = 0 // TEI: no count in its answer
	if rec := Record(resp, tok, info); rec.InputTokens != 128 || rec.TokenSource != metrics.SourceTokenizer {
		t.Errorf("without the server's count: %d tokens from %q, want the 128 sent", rec.InputTokens, rec.TokenSource)
	}
}

// TestRecordToolCall: the record's tool call is the response's, from the
// same t0, to the nanosecond; its arguments are counted.
func TestRecordToolCall(t *testing.T) {
	tok, err := tokenize.Get("cl100k_base")
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	resp := &api.Response{Start: start, Done: start.Add(90 * time.Millisecond), Status: 200, SawDone: true, Finish: "tool_calls",
		ToolCallAt: start.Add(41250 * time.Microsecond), ToolArgs: []byte(`{"city": "Paris"}`),
		Chunks: []api.Chunk{{At: start.Add(60 * time.Millisecond), Text: `{"city":`}, {At: start.Add(80 * time.Millisecond), Text: ` "Paris"}`}},
		Usage:  &api.Usage{PromptTokens: 300, CompletionTokens: 6}}
	rec := Record(resp, tok, RecordInfo{ToolsSent: 8, ToolTokens: 700})
	want := tok.Count(`{"city": "Paris"}`)
	if !rec.ToolCalled || rec.ToolCallMs != 41.25 || rec.ToolArgTokens != want || rec.ToolsSent != 8 || rec.ToolTokens != 700 {
		t.Errorf("tool call %v at %v ms, %d argument tokens (want 41.25 ms, %d), %d tools of %d tokens",
			rec.ToolCalled, rec.ToolCallMs, rec.ToolArgTokens, want, rec.ToolsSent, rec.ToolTokens)
	}
	resp.ToolCallAt, resp.ToolArgs = time.Time{}, nil
	if rec := Record(resp, tok, RecordInfo{ToolsSent: 8}); rec.ToolCalled || rec.ToolCallMs != 0 {
		t.Errorf("a text answer recorded a tool call: %+v", rec)
	}
}

// TestToolTokensCountedOnce: a level's requests share their tools; their
// count is the JSON's, as sent.
func TestToolTokensCountedOnce(t *testing.T) {
	tok, err := tokenize.Get("cl100k_base")
	if err != nil {
		t.Fatal(err)
	}
	r := &Runner{counter: tok}
	tools := []api.Tool{{Name: "f", Parameters: json.RawMessage(`{"type":"object"}`)}}
	buf, _ := json.Marshal(tools)
	want := tok.Count(string(buf))
	if got := r.toolTokens(tools); got != want || r.toolTokens(tools) != want || r.toolTokens(nil) != 0 {
		t.Errorf("toolTokens = %d, want %d", got, want)
	}
	other := []api.Tool{{Name: "a_much_longer_name", Parameters: json.RawMessage(`{"type":"object"}`)}}
	if got := r.toolTokens(other); got == want {
		t.Errorf("another set counted as the first: %d", got)
	}
}

// toolSource is a chain's turns, each carrying one tool.
type toolSource struct{}

func (toolSource) Request(i int) (*api.Request, int) {
	return &api.Request{Model: "m", MaxTokens: 4, IgnoreEOS: true,
		Messages: []api.Message{{Role: "user", Content: fmt.Sprintf("turn %d", i)}},
		Tools:    []api.Tool{{Name: "lookup", Parameters: json.RawMessage(`{"type":"object"}`)}}}, 2
}

// TestAgentChainFeedsToolResult: against the simulator, which answers
// every request with tools by a call, each later call of an agent chain
// carries the earlier call's arguments as the assistant's message and the
// tool's result after it, before its own turn.
func TestAgentChainFeedsToolResult(t *testing.T) {
	cfg := sim.DefaultConfig()
	cfg.Cost = fixedStep{time.Millisecond, 100_000}
	s, err := sim.NewServer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var bodies []struct{ Messages []api.Message }
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		buf, _ := io.ReadAll(r.Body)
		var b struct{ Messages []api.Message }
		json.Unmarshal(buf, &b)
		mu.Lock()
		bodies = append(bodies, b)
		mu.Unlock()
		r.Body = io.NopCloser(bytes.NewReader(buf))
		s.Handler().ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		hs.Close()
		s.Close()
	})
	tok, err := tokenize.Get("cl100k_base")
	if err != nil {
		t.Fatal(err)
	}
	r := &Runner{Client: &api.Client{HTTP: hs.Client(), Adapter: api.OpenAI{Chat: true}, BaseURL: hs.URL + "/v1"}, Tokenizer: tok, Timeout: 10 * time.Second}
	lv := Level{Load: metrics.Load{Mode: metrics.ModeConcurrency, Concurrency: 1}, Requests: 1, Steps: 3}
	res, err := r.RunLevel(context.Background(), 0, lv, toolSource{})
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(res.Records) != 3 || len(bodies) != 3 {
		t.Fatalf("%d records, %d requests; want one chain of 3", len(res.Records), len(bodies))
	}
	for _, rec := range res.Records {
		if !rec.OK || !rec.ToolCalled || rec.ToolsSent != 1 {
			t.Errorf("step %d: ok %v, called %v, %d tools", rec.Step, rec.OK, rec.ToolCalled, rec.ToolsSent)
		}
	}
	last := bodies[2].Messages
	// turn 0, its call, the result; turn 1, its call, the result; turn 2.
	if len(last) != 7 || last[1].Role != "assistant" || !strings.HasPrefix(last[1].Content, `{"input":`) || last[2] != ToolResult ||
		last[5] != ToolResult || last[6].Content != "turn 2" {
		t.Errorf("the third call's messages: %+v", last)
	}
}

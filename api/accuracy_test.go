package api_test

import (
	"context"
	"encoding/json"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tokbench/tokbench/api"
	"github.com/tokbench/tokbench/internal/busy"
	"github.com/tokbench/tokbench/load"
	"github.com/tokbench/tokbench/metrics"
	"github.com/tokbench/tokbench/tokenize"
)

// replay serves a fixture one event (SSE) or line (NDJSON) every step and
// records the instant each piece left the server: the truth the client's
// stamps are judged against.
type replay struct {
	pieces []string
	mu     sync.Mutex
	sent   []time.Time
	path   string // the request path the adapter used
	header http.Header
	body   map[string]any
}

func newReplay(t *testing.T, file string, ndjson bool, step time.Duration) (*replay, *httptest.Server) {
	t.Helper()
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	sep := "\n\n"
	if ndjson {
		sep = "\n"
	}
	r := &replay{}
	for _, p := range strings.SplitAfter(string(raw), sep) {
		if strings.TrimSpace(p) != "" {
			r.pieces = append(r.pieces, p)
		}
	}
	r.sent = make([]time.Time, len(r.pieces))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		r.path, r.header = req.URL.Path, req.Header.Clone()
		_ = json.NewDecoder(req.Body).Decode(&r.body)
		r.mu.Unlock()
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush() // headers first, as streaming servers do
		start := time.Now()
		for i, p := range r.pieces {
			time.Sleep(time.Until(start.Add(time.Duration(i+1) * step)))
			r.mu.Lock()
			r.sent[i] = time.Now()
			r.mu.Unlock()
			w.Write([]byte(p))
			w.(http.Flusher).Flush()
		}
	}))
	t.Cleanup(srv.Close)
	return r, srv
}

// TestAdapterAccuracy replays each protocol's fixture at known instants and
// checks what every adapter must get right: each chunk stamped when its
// bytes left the server, decode TPS from those instants, and the exact
// output token count from the protocol's usage.
func TestAdapterAccuracy(t *testing.T) {
	tok, err := tokenize.Get("cl100k_base")
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		api, file, base string
		ndjson          bool
		path            string
		chunks          int
		output, input   int
		reasoning       int
		finish          string
		server          bool
	}{
		{"openai-responses", "testdata/openai-responses.sse", "/v1", false, "/v1/responses", 8, 8, 14, 2, "stop", false},
		// Anthropic does not split thinking out of output_tokens: the
		// reasoning count is the local count of "Planning".
		{"anthropic", "testdata/anthropic-messages.sse", "", false, "/v1/messages", 8, 8, 14, 1, "length", false},
		{"ollama-chat", "testdata/ollama-chat.ndjson", "", true, "/api/chat", 8, 8, 14, 0, "length", true},
		{"ollama-generate", "testdata/ollama-generate.ndjson", "/v1", true, "/api/generate", 8, 8, 14, 0, "length", true},
		{"llamacpp", "testdata/llamacpp-native-completion.sse", "", false, "/completion", 12, 12, 11, 0, "length", true},
		{"tgi", "testdata/tgi-generate-stream.sse", "", false, "/generate_stream", 8, 8, 14, 0, "stop", false},
	}
	const step = 15 * time.Millisecond
	for _, c := range cases {
		t.Run(c.api, func(t *testing.T) {
			a, err := api.ByName(c.api)
			if err != nil {
				t.Fatal(err)
			}
			rp, srv := newReplay(t, c.file, c.ndjson, step)
			cl := &api.Client{HTTP: srv.Client(), Adapter: a, BaseURL: srv.URL + c.base}
			req := &api.Request{Model: "m", Messages: []api.Message{{Role: "user", Content: "Why is the sky blue?"}}, MaxTokens: 8}
			watch := busy.Start()
			resp := cl.Do(context.Background(), req)
			lag := watch.Stop()
			if resp.Failed() {
				t.Fatalf("Do failed: %s: %s", resp.ErrorClass, resp.Error)
			}
			if rp.path != c.path {
				t.Errorf("request path %q, want %q", rp.path, c.path)
			}
			if len(resp.Chunks) != c.chunks || !resp.SawDone || resp.Finish != c.finish {
				t.Fatalf("%d chunks (want %d), end marker %v, finish %q (want %q)", len(resp.Chunks), c.chunks, resp.SawDone, resp.Finish, c.finish)
			}
			rec := load.Record(resp, tok, load.RecordInfo{LevelStart: resp.Start, Prompt: req.Prompt()})
			if rec.OutputTokens != c.output || rec.TokenSource != metrics.SourceUsage || rec.InputTokens != c.input {
				t.Errorf("tokens: output %d (%s), input %d; want %d (usage), %d", rec.OutputTokens, rec.TokenSource, rec.InputTokens, c.output, c.input)
			}
			if rec.ReasoningTokens != c.reasoning {
				t.Errorf("reasoning tokens %d, want %d", rec.ReasoningTokens, c.reasoning)
			}
			if (resp.Server != nil) != c.server {
				t.Errorf("server timing %+v, want present=%v", resp.Server, c.server)
			}

			// Match each chunk to the piece that carried it, in order.
			rp.mu.Lock()
			defer rp.mu.Unlock()
			var at []time.Time
			next := 0
			for i, ch := range resp.Chunks {
				want, _ := json.Marshal(ch.Text + ch.Reasoning)
				j := next
				for j < len(rp.pieces) && !strings.Contains(rp.pieces[j], string(want)) {
					j++
				}
				if j == len(rp.pieces) {
					t.Fatalf("chunk %d %s not found in the fixture after piece %d", i, want, next)
				}
				at = append(at, rp.sent[j])
				next = j + 1
			}
			var late []float64
			for i, ch := range resp.Chunks {
				d := ch.At.Sub(at[i])
				if d < 0 {
					t.Fatalf("chunk %d stamped %v before the server sent it", i, -d)
				}
				late = append(late, float64(d)/1e6)
			}
			slices.Sort(late)
			// A stamp is as late as the machine kept the client (or the
			// server, between its clock and its write) off a core: on a
			// machine that did, the bounds grow by the lag measured beside.
			slack := 0.0
			if !lag.Quiet() {
				slack = lag.MaxMs
				t.Logf("timing bounds %.3f ms wider: the machine kept this process from its cores (%v)", slack, lag)
			}
			if p50 := late[len(late)/2]; p50 > 3+slack {
				t.Errorf("chunks stamped %.3f ms (median) after they were sent, want within %.3f ms", p50, 3+slack)
			}
			span := at[len(at)-1].Sub(at[0])
			truth := float64(c.output-1) / span.Seconds()
			got, ok := rec.DecodeTPS()
			if tol := 0.05 + slack/(float64(span)/1e6); !ok || math.Abs(got-truth)/truth > tol {
				t.Errorf("decode TPS %.2f, want %.2f (from the send instants) within %.1f%%", got, truth, 100*tol)
			}
			wantTTFT := float64(at[0].Sub(resp.Start)) / 1e6
			if rec.TTFTMs < wantTTFT || rec.TTFTMs > wantTTFT+5+slack {
				t.Errorf("TTFT %.2f ms, want %.2f ms (+%.3f)", rec.TTFTMs, wantTTFT, 5+slack)
			}
		})
	}
}

// TestAdapterErrors: each protocol's in-stream error and a stream cut
// before its end marker are failures with the right class.
func TestAdapterErrors(t *testing.T) {
	cases := []struct {
		api, body, class, msg string
	}{
		{"openai-responses", "event: error\ndata: {\"type\":\"error\",\"code\":\"server_error\",\"message\":\"The server had an error\"}\n\n", "stream_error", "The server had an error"},
		{"openai-responses", "data: {\"type\":\"response.failed\",\"response\":{\"id\":\"r\",\"status\":\"failed\",\"error\":{\"code\":\"server_error\",\"message\":\"model crashed\"}}}\n\n", "stream_error", "model crashed"},
		{"openai-responses", "data: {\"type\":\"response.output_text.delta\",\"delta\":\"hi\"}\n\n", "incomplete_stream", ""},
		{"anthropic", "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n", "stream_error", "Overloaded"},
		{"anthropic", "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"hi\"}}\n\n", "incomplete_stream", ""},
		{"ollama", "{\"message\":{\"content\":\"hi\"},\"done\":false}\n{\"error\":\"model runner has unexpectedly stopped\"}\n", "stream_error", "unexpectedly stopped"},
		{"ollama-generate", "{\"response\":\"hi\",\"done\":false}\n", "incomplete_stream", ""},
		{"ollama", "{\"message\":{\"content\":\"hi\"},\"done\":false}\nnot json\n", "malformed_stream", ""},
		{"llamacpp", "data: {\"error\":{\"code\":500,\"message\":\"slot unavailable\",\"type\":\"server_error\"}}\n\n", "stream_error", "slot unavailable"},
		{"llamacpp", "data: {\"content\":\"hi\",\"stop\":false}\n\n", "incomplete_stream", ""},
		{"tgi", "data:{\"error\":\"Request failed during generation: out of memory\",\"error_type\":\"generation\"}\n\n", "stream_error", "out of memory"},
		{"tgi", "data:{\"token\":{\"text\":\"hi\",\"special\":false},\"generated_text\":null,\"details\":null}\n\n", "incomplete_stream", ""},
	}
	for _, c := range cases {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Write([]byte(c.body))
		}))
		a, _ := api.ByName(c.api)
		resp := (&api.Client{HTTP: srv.Client(), Adapter: a, BaseURL: srv.URL}).Do(context.Background(),
			&api.Request{Model: "m", Messages: []api.Message{{Role: "user", Content: "x"}}})
		srv.Close()
		if string(resp.ErrorClass) != c.class || !strings.Contains(resp.Error, c.msg) {
			t.Errorf("%s %q: class %q (%s), want %q containing %q", c.api, c.body, resp.ErrorClass, resp.Error, c.class, c.msg)
		}
	}
}

// TestByName covers every --api spelling and the key header.
func TestByName(t *testing.T) {
	want := map[string]string{
		"openai-chat": "openai-chat", "openai-completions": "openai-completions", "openai-responses": "openai-responses",
		"anthropic": "anthropic", "ollama": "ollama-chat", "ollama-chat": "ollama-chat", "ollama-generate": "ollama-generate",
		"llamacpp": "llamacpp", "tgi": "tgi",
		"openai-embeddings": "openai-embeddings", "ollama-embed": "ollama-embed", "tei-embed": "tei-embed",
	}
	for _, n := range api.Names {
		a, err := api.ByName(n)
		if err != nil || a.Name() != want[n] {
			t.Errorf("ByName(%q) = %v, %v; want %s", n, a, err, want[n])
		}
	}
	if _, err := api.ByName("grpc"); err == nil || !strings.Contains(err.Error(), "anthropic") {
		t.Errorf("ByName(grpc) error = %v, want the list of known APIs", err)
	}
	if n, v := api.KeyHeader(api.Anthropic{}, "k1"); n != "x-api-key" || v != "k1" {
		t.Errorf("KeyHeader(anthropic) = %s: %s", n, v)
	}
	if n, v := api.KeyHeader(api.Ollama{Chat: true}, "k1"); n != "Authorization" || v != "Bearer k1" {
		t.Errorf("KeyHeader(ollama) = %s: %s", n, v)
	}
}

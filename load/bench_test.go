package load

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tokbench/tokbench/api"
	"github.com/tokbench/tokbench/internal/benchutil"
	"github.com/tokbench/tokbench/metrics"
	"github.com/tokbench/tokbench/tokenize"
	"github.com/tokbench/tokbench/wire"
)

var benchWords = []string{" the", " time", " water", " people", " world", " house", " light", " music"}

// BenchmarkRecord turns a 256-chunk response (with usage, as tokbench asks
// for it) into a metrics.Record: one token recorded per chunk.
//
//	go test -run '^$' -bench 'Record|RequestPath' -benchmem ./load
func BenchmarkRecord(b *testing.B) {
	const tokens = 256
	tok, err := tokenize.Get("cl100k_base")
	if err != nil {
		b.Fatal(err)
	}
	counter := tokenize.Cached(tok, 1<<16)
	start := time.Now()
	resp := &api.Response{Start: start, Done: start.Add(time.Second), Status: 200, Finish: "length", SawDone: true,
		Usage: &api.Usage{PromptTokens: 12, CompletionTokens: tokens}}
	for i := range tokens {
		resp.Chunks = append(resp.Chunks, api.Chunk{At: start.Add(time.Duration(i+1) * time.Millisecond), Text: benchWords[i%len(benchWords)]})
	}
	for _, usage := range []bool{true, false} {
		b.Run(fmt.Sprintf("usage=%v", usage), func(b *testing.B) {
			r := *resp
			if !usage {
				r.Usage = nil
			}
			done := benchutil.PerToken(b, tokens)
			for b.Loop() {
				rec := Record(&r, counter, RecordInfo{ID: 1, LevelStart: start, Prompt: "hello there", InputTokensRequested: 2, OutputTokensRequested: tokens})
				if rec.OutputTokens != tokens {
					b.Fatalf("OutputTokens = %d, want %d", rec.OutputTokens, tokens)
				}
			}
			done()
		})
	}
}

// BenchmarkRequestPath runs a closed-loop level (8 users, 64 requests of
// 256 tokens) through Runner against a loopback server that writes each
// prepared answer at once: client, HTTP and loopback cost per token.
func BenchmarkRequestPath(b *testing.B) {
	const tokens, requests = 256, 64
	body := streamBody(tokens)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Write(body)
	}))
	defer srv.Close()
	tok, err := tokenize.Get("cl100k_base")
	if err != nil {
		b.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		rt   interface {
			http.RoundTripper
			CloseIdleConnections()
		}
	}{{"tokbench", wire.NewTransport()}, {"net-http", &http.Transport{MaxIdleConnsPerHost: 64}}} {
		b.Run("transport="+tc.name, func(b *testing.B) {
			defer tc.rt.CloseIdleConnections()
			r := &Runner{Client: &api.Client{HTTP: &http.Client{Transport: tc.rt}, Adapter: api.OpenAI{Chat: true}, BaseURL: srv.URL + "/v1"},
				Tokenizer: tok, Timeout: 10 * time.Second}
			lv := Level{Load: metrics.Load{Mode: "concurrency", Concurrency: 8}, Requests: requests}
			done := benchutil.PerToken(b, tokens*requests)
			for b.Loop() {
				res, err := r.RunLevel(context.Background(), 0, lv, fixedSource{maxTokens: tokens})
				if err != nil || res.Level.Requests.Completed != requests {
					b.Fatalf("level: %v, %+v", err, res.Level.Requests)
				}
			}
			done()
		})
	}
}

// streamBody is a complete chat stream of n one-token chunks with usage.
func streamBody(n int) []byte {
	var b strings.Builder
	const head = `data: {"id":"chatcmpl-0123456789abcdef","object":"chat.completion.chunk","created":1700000000,"model":"m","choices":[{"index":0,`
	for i := range n {
		fmt.Fprintf(&b, head+`"delta":{"content":%q},"logprobs":null,"finish_reason":null}]}`+"\n\n", benchWords[i%len(benchWords)])
	}
	b.WriteString(head + `"delta":{},"logprobs":null,"finish_reason":"length"}]}` + "\n\n")
	fmt.Fprintf(&b, `data: {"id":"chatcmpl-0123456789abcdef","object":"chat.completion.chunk","created":1700000000,"model":"m","choices":[],"usage":{"prompt_tokens":2,"completion_tokens":%d}}`+"\n\n", n)
	b.WriteString("data: [DONE]\n\n")
	return []byte(b.String())
}

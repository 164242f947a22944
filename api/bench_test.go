package api

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/tokbench/tokbench/internal/benchutil"
	"github.com/tokbench/tokbench/wire"
)

// benchBody is a complete chat completion stream of n token chunks as vLLM
// sends it: role chunk, content chunks, finish chunk, usage chunk, [DONE].
func benchBody(n int) []byte {
	var b bytes.Buffer
	const head = `data: {"id":"chatcmpl-0123456789abcdef","object":"chat.completion.chunk","created":1700000000,"model":"llama-3.1-8b","choices":[{"index":0,`
	b.WriteString(head + `"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}` + "\n\n")
	words := []string{" the", " time", " water", " people", " world", " house", " light", " music"}
	for i := range n {
		fmt.Fprintf(&b, head+`"delta":{"content":%q},"logprobs":null,"finish_reason":null}]}`+"\n\n", words[i%len(words)])
	}
	b.WriteString(head + `"delta":{},"logprobs":null,"finish_reason":"length"}]}` + "\n\n")
	fmt.Fprintf(&b, `data: {"id":"chatcmpl-0123456789abcdef","object":"chat.completion.chunk","created":1700000000,"model":"llama-3.1-8b","choices":[],"usage":{"prompt_tokens":12,"total_tokens":%d,"completion_tokens":%d}}`+"\n\n", n+12, n)
	b.WriteString("data: [DONE]\n\n")
	return b.Bytes()
}

// benchBodyContinuous is benchBody with the running usage in every chunk,
// as vLLM sends it with stream_options.continuous_usage_stats.
func benchBodyContinuous(n int) []byte {
	var b bytes.Buffer
	const head = `data: {"id":"chatcmpl-0123456789abcdef","object":"chat.completion.chunk","created":1700000000,"model":"llama-3.1-8b","choices":[{"index":0,`
	const usage = `,"usage":{"prompt_tokens":12,"total_tokens":%d,"completion_tokens":%d}}` + "\n\n"
	fmt.Fprintf(&b, head+`"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]`+usage, 12, 0)
	words := []string{" the", " time", " water", " people", " world", " house", " light", " music"}
	for i := range n {
		fmt.Fprintf(&b, head+`"delta":{"content":%q},"logprobs":null,"finish_reason":null}]`+usage, words[i%len(words)], 13+i, i+1)
	}
	fmt.Fprintf(&b, head+`"delta":{},"logprobs":null,"finish_reason":"length"}]`+usage, n+12, n)
	fmt.Fprintf(&b, `data: {"id":"chatcmpl-0123456789abcdef","object":"chat.completion.chunk","created":1700000000,"model":"llama-3.1-8b","choices":[]`+usage, n+12, n)
	b.WriteString("data: [DONE]\n\n")
	return b.Bytes()
}

// BenchmarkOpenAIDecode decodes a 256-token chat stream (SSE framing and
// JSON per chunk) from memory.
//
//	go test -run '^$' -bench 'OpenAIDecode|Do' -benchmem ./api
func BenchmarkOpenAIDecode(b *testing.B) {
	benchDecode(b, OpenAI{Chat: true}, benchBody(256), 256)
}

// benchDecode decodes body, a whole stream of tokens one-token chunks ending
// with the server's usage, once per op, and reports per-token figures.
func benchDecode(b *testing.B, ad Adapter, body []byte, tokens int) {
	done := benchutil.PerToken(b, tokens)
	for b.Loop() {
		var resp Response
		ad.Decode(bytes.NewReader(body), &resp)
		if resp.Failed() || len(resp.Chunks) != tokens || resp.Usage == nil || resp.Usage.CompletionTokens != tokens {
			b.Fatalf("decode: %s %s, %d chunks, usage %+v", resp.ErrorClass, resp.Error, len(resp.Chunks), resp.Usage)
		}
	}
	done()
}

// BenchmarkOpenAIDecodeContinuousUsage is BenchmarkOpenAIDecode with usage
// in every chunk: reading it must not cost an allocation per chunk.
func BenchmarkOpenAIDecodeContinuousUsage(b *testing.B) {
	benchDecode(b, OpenAI{Chat: true}, benchBodyContinuous(256), 256)
}

// BenchmarkDo runs whole requests (build, send, stream 256 tokens, decode)
// against a loopback server that writes a prepared body at once, so the
// time is the client's plus loopback HTTP.
func BenchmarkDo(b *testing.B) { benchDo(b, 256) }

// benchDo runs whole requests of the given answer length on each transport,
// reported per token (per request, for a one-token answer).
func benchDo(b *testing.B, tokens int) {
	body := benchBody(tokens)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Write(body)
	}))
	defer srv.Close()
	for _, tr := range benchTransports() {
		b.Run("transport="+tr.name, func(b *testing.B) {
			defer tr.rt.CloseIdleConnections()
			// As tokbench bench sends: redirects refused, the transport
			// called directly.
			c := &Client{HTTP: &http.Client{Transport: tr.rt, CheckRedirect: RefuseRedirects}, Direct: true, Adapter: OpenAI{Chat: true}, BaseURL: srv.URL + "/v1"}
			req := &Request{Model: "m", Messages: []Message{{Role: "user", Content: "hello"}}, MaxTokens: tokens}
			done := func() {}
			if tokens > 1 {
				done = benchutil.PerToken(b, tokens)
			} else {
				b.ReportAllocs()
			}
			for b.Loop() {
				resp := c.Do(context.Background(), req)
				if resp.Failed() || len(resp.Chunks) != tokens {
					b.Fatalf("do: %s %s, %d chunks", resp.ErrorClass, resp.Error, len(resp.Chunks))
				}
			}
			done()
		})
	}
}

// benchTransport is a transport the whole-request benchmarks and the
// tests that hold for any transport run on.
type benchTransport struct {
	name string
	rt   interface {
		http.RoundTripper
		CloseIdleConnections()
	}
}

// benchTransports are tokbench's own (what bench runs) and net/http's.
func benchTransports() []benchTransport {
	return []benchTransport{{"tokbench", wire.NewTransport()}, {"net-http", &http.Transport{MaxIdleConnsPerHost: 64}}}
}

// ollamaBody is a complete Ollama /api/chat stream of n token lines and
// the final line with the counts.
func ollamaBody(n int) []byte {
	var b bytes.Buffer
	words := []string{" the", " time", " water", " people", " world", " house", " light", " music"}
	for i := range n {
		fmt.Fprintf(&b, `{"model":"llama3.1:8b","created_at":"2026-11-29T20:00:00.123456789Z","message":{"role":"assistant","content":%q},"done":false}`+"\n", words[i%len(words)])
	}
	fmt.Fprintf(&b, `{"model":"llama3.1:8b","created_at":"2026-11-29T20:00:01Z","message":{"role":"assistant","content":""},"done":true,"done_reason":"length","total_duration":1000000000,"load_duration":1000000,"prompt_eval_count":12,"prompt_eval_duration":10000000,"eval_count":%d,"eval_duration":900000000}`+"\n", n)
	return b.Bytes()
}

// BenchmarkOllamaDecode decodes a 256-token Ollama NDJSON stream from
// memory: line framing and JSON per line.
func BenchmarkOllamaDecode(b *testing.B) {
	benchDecode(b, Ollama{Chat: true}, ollamaBody(256), 256)
}

// BenchmarkOpenAIDecodeMegabyteChunk decodes a stream whose one content
// chunk is a 1 MiB line: the scanner's pass over it should run at memory
// speed, like short chunks.
func BenchmarkOpenAIDecodeMegabyteChunk(b *testing.B) {
	big := bytes.Repeat([]byte("x"), 1<<20)
	body := []byte(`data: {"choices":[{"delta":{"content":"` + string(big) + `"},"finish_reason":"stop"}]}` + "\n\ndata: [DONE]\n\n")
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		var resp Response
		OpenAI{Chat: true}.Decode(bytes.NewReader(body), &resp)
		if resp.Failed() || len(resp.Chunks) != 1 || len(resp.Chunks[0].Text) != len(big) {
			b.Fatalf("decode: %s %s", resp.ErrorClass, resp.Error)
		}
	}
}

// BenchmarkDoOneToken runs whole requests whose answer is one token, so the
// time and allocations are the per-request cost of the client (request
// body, HTTP round trip, headers, stream set-up) plus loopback HTTP.
func BenchmarkDoOneToken(b *testing.B) { benchDo(b, 1) }

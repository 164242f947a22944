package api_test

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tokbench/tokbench/api"
	"github.com/tokbench/tokbench/load"
	"github.com/tokbench/tokbench/metrics"
	"github.com/tokbench/tokbench/tokenize"
)

// TestDecodeCumulative: a chunk that carries text (or reasoning) and usage
// keeps its completion_tokens as Cumulative, on the fast path and on the
// fastjson one; chunks without text are not kept, whatever usage they
// carry; and the response's usage is the last one seen.
func TestDecodeCumulative(t *testing.T) {
	cases := []struct {
		name   string
		events []string
		want   []int // Cumulative of each token chunk
		usage  int   // final CompletionTokens
	}{
		{"usage in every chunk", []string{
			`{"choices":[{"delta":{"role":"assistant","content":""}}],"usage":{"prompt_tokens":3,"completion_tokens":0}}`,
			`{"choices":[{"delta":{"reasoning_content":"hm"}}],"usage":{"prompt_tokens":3,"completion_tokens":2}}`,
			`{"choices":[{"delta":{"content":"a"}}],"usage":{"prompt_tokens":3,"completion_tokens":3}}`,
			`{"choices":[{"delta":{"content":""}}],"usage":{"prompt_tokens":3,"completion_tokens":4}}`,
			`{"choices":[{"delta":{"content":"b"},"finish_reason":"length"}],"usage":{"prompt_tokens":3,"completion_tokens":5}}`,
			`{"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":5}}`,
		}, []int{2, 3, 5}, 5},
		{"fastjson path", []string{
			// An escape, and token details, send the chunk past the fast path.
			`{"choices":[{"delta":{"content":"a"}}],"usage":{"completion_tokens":1},"x\u0041":1}`,
			`{"choices":[{"delta":{"content":"b"}}],"usage":{"completion_tokens":2,"prompt_tokens_details":{"cached_tokens":0}}}`,
			`{"choices":[{"delta":{},"finish_reason":"stop"}],"usage":{"completion_tokens":2}}`,
		}, []int{1, 2}, 2},
		{"usage only at the end", []string{
			`{"choices":[{"delta":{"content":"a"}}]}`,
			`{"choices":[{"delta":{"content":"b"}}],"usage":null}`,
			`{"choices":[{"delta":{},"finish_reason":"stop"}]}`,
			`{"choices":[],"usage":{"completion_tokens":2}}`,
		}, []int{0, 0}, 2},
		{"usage without completion_tokens", []string{
			`{"choices":[{"delta":{"content":"a"}}],"usage":{"prompt_tokens":3}}`,
			`{"choices":[{"delta":{"content":"b"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":2}}`,
		}, []int{0, 2}, 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var body bytes.Buffer
			for _, e := range c.events {
				fmt.Fprintf(&body, "data: %s\n\n", e)
			}
			body.WriteString("data: [DONE]\n\n")
			var resp api.Response
			api.OpenAI{Chat: true}.Decode(&body, &resp)
			if resp.Failed() || resp.Usage == nil {
				t.Fatalf("Decode: %s %s, usage %+v", resp.ErrorClass, resp.Error, resp.Usage)
			}
			var got []int
			for _, ch := range resp.Chunks {
				got = append(got, ch.Cumulative)
			}
			if !slices.Equal(got, c.want) || resp.Usage.CompletionTokens != c.usage {
				t.Errorf("Decode: Cumulative %v, usage %d; want %v, %d", got, resp.Usage.CompletionTokens, c.want, c.usage)
			}
		})
	}
}

// TestContinuousUsageCountsEachChunk replays vLLM-style chat streams with
// usage in every chunk (stream_options.continuous_usage_stats; hand-written
// in vLLM's format, not captures): each token chunk counts exactly the
// difference of its completion_tokens from the token chunk before, though
// cl100k counts their texts otherwise, and ITL divides each chunk's gap by
// that count.
func TestContinuousUsageCountsEachChunk(t *testing.T) {
	tok, err := tokenize.Get("cl100k_base")
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		file      string
		want      []int // tokens of each token chunk
		reasoning int   // leading reasoning chunks
	}{
		// One token per event; " ☀" is two byte tokens, the first of
		// which decodes to nothing and went out as an empty chunk with usage.
		{"testdata/vllm-openai-chat-continuous-usage.sse", []int{1, 1, 1, 1, 1, 1, 1, 1, 2}, 0},
		// Speculative decoding: 3, 1 or 2 tokens per step, reasoning first.
		{"testdata/vllm-openai-chat-continuous-usage-spec.sse", []int{3, 1, 2, 3, 1, 2, 3, 1, 2, 3, 1, 2}, 3},
	}
	for _, c := range cases {
		t.Run(c.file, func(t *testing.T) {
			_, srv := newReplay(t, c.file, false, 5*time.Millisecond)
			cl := &api.Client{HTTP: srv.Client(), Adapter: api.OpenAI{Chat: true}, BaseURL: srv.URL + "/v1"}
			req := &api.Request{Model: "m", Messages: []api.Message{{Role: "user", Content: "Why is the sky blue?"}}}
			resp := cl.Do(context.Background(), req)
			if resp.Failed() || len(resp.Chunks) != len(c.want) {
				t.Fatalf("Do: %s %s, %d chunks, want %d", resp.ErrorClass, resp.Error, len(resp.Chunks), len(c.want))
			}
			total := 0
			est := make([]int, len(c.want))
			for i, ch := range resp.Chunks {
				total += c.want[i]
				if ch.Cumulative != total {
					t.Errorf("chunk %d (%q%q): Cumulative %d, want %d", i, ch.Reasoning, ch.Text, ch.Cumulative, total)
				}
				if (ch.Reasoning != "") != (i < c.reasoning) {
					t.Errorf("chunk %d: reasoning %q, text %q", i, ch.Reasoning, ch.Text)
				}
				est[i] = tok.Count(ch.Text) + tok.Count(ch.Reasoning)
			}
			// The fixture must tell the methods apart: spread by local
			// counts, the tokens would land elsewhere.
			if spread := metrics.AssignTokens(est, total); slices.Equal(spread, c.want) {
				t.Fatalf("local counts %v spread the same as the usage: the fixture proves nothing", est)
			}
			rec := load.Record(resp, tok, load.RecordInfo{LevelStart: resp.Start, Prompt: req.Prompt()})
			if rec.OutputTokens != total || rec.TokenSource != metrics.SourceUsage {
				t.Errorf("output tokens %d (%s), want %d (usage)", rec.OutputTokens, rec.TokenSource, total)
			}
			if !slices.Equal(rec.ChunkTokens, c.want) {
				t.Errorf("chunk tokens %v, want %v", rec.ChunkTokens, c.want)
			}
			// ITL: a chunk of k tokens after a gap g gives k values g/k.
			var want []float64
			for i := 1; i < len(c.want); i++ {
				g := rec.ChunkMs[i] - rec.ChunkMs[i-1]
				for range c.want[i] {
					want = append(want, g/float64(c.want[i]))
				}
			}
			if got := rec.AppendITL(nil); !slices.Equal(got, want) {
				t.Errorf("ITL %v, want %v", got, want)
			}
		})
	}
}

// TestContinuousUsageFallsBack: when the usage in the token chunks does not
// describe them, each chunk's tokens are what they would be without it.
func TestContinuousUsageFallsBack(t *testing.T) {
	tok, err := tokenize.Get("cl100k_base")
	if err != nil {
		t.Fatal(err)
	}
	texts := []string{"The sky is", " blue", " thanks to", " Rayleigh scattering"} // cl100k: 3, 1, 2, 3
	cases := []struct {
		name string
		cum  []int // running completion_tokens of each token chunk; -1: no usage
		eos  int   // > 0: an empty finish chunk and the final usage at this count
	}{
		{"falling", []int{3, 2, 6, 9}, 0},
		{"standing still", []int{3, 4, 4, 9}, 0},
		{"a chunk without usage", []int{3, -1, 6, 9}, 0},
		{"the first chunk without usage", []int{-1, 4, 6, 9}, 0},
		{"zero in every chunk", []int{0, 0, 0, 0}, 9},
		{"final usage below the last token chunk's", []int{3, 4, 6, 9}, 8},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var body bytes.Buffer
			total := c.cum[len(c.cum)-1]
			for i, s := range texts {
				u := ""
				if c.cum[i] >= 0 {
					u = fmt.Sprintf(`,"usage":{"prompt_tokens":5,"completion_tokens":%d}`, c.cum[i])
				}
				fmt.Fprintf(&body, "data: {\"choices\":[{\"delta\":{\"content\":%q}}]%s}\n\n", s, u)
			}
			if c.eos > 0 {
				total = c.eos
				fmt.Fprintf(&body, "data: {\"choices\":[{\"delta\":{\"content\":\"\"},\"finish_reason\":\"stop\"}],\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":%d}}\n\n", total)
			} else {
				body.WriteString("data: {\"choices\":[{\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n")
			}
			fmt.Fprintf(&body, "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":%d}}\n\ndata: [DONE]\n\n", total)
			var resp api.Response
			resp.Start = time.Now()
			api.OpenAI{Chat: true}.Decode(strings.NewReader(body.String()), &resp)
			if resp.Failed() || len(resp.Chunks) != len(texts) {
				t.Fatalf("Decode: %s %s, %d chunks", resp.ErrorClass, resp.Error, len(resp.Chunks))
			}
			rec := load.Record(&resp, tok, load.RecordInfo{LevelStart: resp.Start})
			est := make([]int, len(texts))
			for i, s := range texts {
				est[i] = tok.Count(s)
			}
			want := metrics.AssignTokens(est, total)
			if rec.OutputTokens != total || !slices.Equal(rec.ChunkTokens, want) {
				t.Errorf("output tokens %d, chunk tokens %v; want %d, %v (spread by local counts)", rec.OutputTokens, rec.ChunkTokens, total, want)
			}
		})
	}
}

// TestContinuousUsageEOSAfterLastChunk: vLLM counts a stop's end-of-sequence
// token in completion_tokens on the empty finish chunk, one above the last
// text chunk's value. The chunks keep their exact counts and the token
// without text goes to the last one, so the counts add up to the usage.
func TestContinuousUsageEOSAfterLastChunk(t *testing.T) {
	tok, err := tokenize.Get("cl100k_base")
	if err != nil {
		t.Fatal(err)
	}
	texts := []string{"The sky is", " blue", " thanks to", " Rayleigh scattering"} // cl100k: 3, 1, 2, 3
	cum := []int{1, 4, 6, 9}                                                       // the first chunk carries 1, not its local 3
	var body bytes.Buffer
	for i, s := range texts {
		fmt.Fprintf(&body, "data: {\"choices\":[{\"delta\":{\"content\":%q}}],\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":%d}}\n\n", s, cum[i])
	}
	body.WriteString("data: {\"choices\":[{\"delta\":{\"content\":\"\"},\"finish_reason\":\"stop\"}],\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":10}}\n\n")
	body.WriteString("data: {\"choices\":[],\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":10}}\n\ndata: [DONE]\n\n")
	var resp api.Response
	resp.Start = time.Now()
	api.OpenAI{Chat: true}.Decode(strings.NewReader(body.String()), &resp)
	if resp.Failed() || len(resp.Chunks) != len(texts) {
		t.Fatalf("Decode: %s %s, %d chunks", resp.ErrorClass, resp.Error, len(resp.Chunks))
	}
	rec := load.Record(&resp, tok, load.RecordInfo{LevelStart: resp.Start})
	if want := []int{1, 3, 2, 4}; rec.OutputTokens != 10 || !slices.Equal(rec.ChunkTokens, want) {
		t.Errorf("output tokens %d, chunk tokens %v; want 10, %v", rec.OutputTokens, rec.ChunkTokens, want)
	}
}

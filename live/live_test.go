package live

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/tokbench/tokbench/metrics"
)

func TestExporter(t *testing.T) {
	inflight := 3.0
	e := New(func() float64 { return inflight })
	e.Defaults("m", "openai-chat")
	ok := metrics.Record{OK: true, HTTPStatus: 200, TTFTMs: 120, E2EMs: 520, OutputTokens: 41,
		ChunkMs: []float64{120, 520}, ChunkTokens: []int{1, 40}}
	e.Observe(ok)
	e.Observe(ok)
	e.Observe(metrics.Record{ErrorClass: "http_429", HTTPStatus: 429})
	e.Observe(metrics.Record{ErrorClass: "connect", Model: "other-model"})
	// An embeddings request: its latency and inputs, no TTFT or tokens out.
	e.Observe(metrics.Record{OK: true, HTTPStatus: 200, API: "tei-embed", EmbedInputs: 8, InputTokens: 96, DoneMs: 30})
	e.Level(metrics.Load{Mode: "concurrency", Concurrency: 8})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	url, err := e.Serve(ctx, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	text := string(body)
	for _, want := range []string{
		`tokbench_requests_total{api="openai-chat",model="m",outcome="ok",status="200"} 2`,
		`tokbench_requests_total{api="openai-chat",model="m",outcome="http_429",status="429"} 1`,
		`tokbench_requests_total{api="openai-chat",model="other-model",outcome="connect",status="none"} 1`,
		`tokbench_output_tokens_total{api="openai-chat",model="m",status="200"} 82`,
		`tokbench_ttft_seconds_sum{api="openai-chat",model="m",status="200"} 0.24`,
		`tokbench_ttft_seconds_count{api="openai-chat",model="m",status="200"} 2`,
		`tokbench_decode_tokens_per_second_sum{api="openai-chat",model="m",status="200"} 200`, // 40 tokens over 0.4 s, twice
		`tokbench_tpot_seconds_sum{api="openai-chat",model="m",status="200"} 0.02`,
		// 40 gaps of 10 ms per request: 80 observations summing to 0.8 s
		`tokbench_itl_seconds_count{api="openai-chat",model="m",status="200"} 80`,
		`tokbench_itl_seconds_sum{api="openai-chat",model="m",status="200"} 0.8`,
		`tokbench_output_tokens_sum{api="openai-chat",model="m",status="200"} 82`,
		`tokbench_output_tokens_bucket{api="openai-chat",model="m",status="200",le="32"} 0`,
		`tokbench_output_tokens_bucket{api="openai-chat",model="m",status="200",le="64"} 2`,
		`tokbench_in_flight_requests 3`,
		`tokbench_requests_total{api="tei-embed",model="m",outcome="ok",status="200"} 1`,
		`tokbench_embed_latency_seconds_sum{api="tei-embed",model="m",status="200"} 0.03`,
		`tokbench_embed_latency_seconds_count{api="tei-embed",model="m",status="200"} 1`,
		`tokbench_embed_inputs_total{api="tei-embed",model="m",status="200"} 8`,
		`tokbench_embed_tokens_total{api="tei-embed",model="m",status="200"} 96`,
		`tokbench_level{load="c=8"} 1`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
	if strings.Contains(text, `tokbench_ttft_seconds_count{api="tei-embed"`) {
		t.Error("an embeddings request was observed as a TTFT")
	}
}

// TestExporterBoundsModels: past maxModels distinct model names, requests
// count under "other"; the series do not grow with them.
func TestExporterBoundsModels(t *testing.T) {
	e := New(func() float64 { return 0 })
	for i := range maxModels + 50 {
		e.Observe(metrics.Record{ErrorClass: "connect", Model: fmt.Sprintf("m%d", i)})
	}
	rec := httptest.NewRecorder()
	e.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	text := rec.Body.String()
	if n := strings.Count(text, "tokbench_requests_total{"); n != maxModels+1 {
		t.Errorf("%d request series, want %d", n, maxModels+1)
	}
	if !strings.Contains(text, `tokbench_requests_total{api="",model="other",outcome="connect",status="none"} 50`) {
		t.Errorf("the names past the bound are not counted as other:\n%s", text)
	}
}

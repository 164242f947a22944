package live

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/tokbench/tokbench/metrics"
)

func TestExporter(t *testing.T) {
	inflight := 3.0
	e := New(func() float64 { return inflight })
	ok := metrics.Record{OK: true, TTFTMs: 120, E2EMs: 520, OutputTokens: 41,
		ChunkMs: []float64{120, 520}, ChunkTokens: []int{1, 40}}
	e.Observe(ok)
	e.Observe(ok)
	e.Observe(metrics.Record{ErrorClass: "http_429"})
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
		`tokbench_requests_total{outcome="ok"} 2`,
		`tokbench_requests_total{outcome="http_429"} 1`,
		`tokbench_output_tokens_total 82`,
		`tokbench_ttft_seconds_sum 0.24`,
		`tokbench_ttft_seconds_count 2`,
		`tokbench_decode_tokens_per_second_sum 200`, // 40 tokens over 0.4 s, twice
		`tokbench_in_flight_requests 3`,
		`tokbench_level{load="c=8"} 1`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
}

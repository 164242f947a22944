package sim

import (
	"context"
	"io"
	"math"
	"testing"

	"github.com/tokbench/tokbench/probe"
)

// With fixed 2 ms steps, requests to an idle server get their first token
// one step after the engine takes them and one per step after that: the vLLM
// histograms on /metrics must move by exactly that, for streamed and
// non-streamed answers alike, and be readable the moment the client has
// its last token.
func TestLatencyHistograms(t *testing.T) {
	_, hs := testServer(t, nil)
	ctx := context.Background()
	before, err := probe.ScrapeMetrics(ctx, hs.Client(), hs.URL+"/v1", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, body := range []string{
		`{"prompt":"a b c","max_tokens":8,"stream":true}`,
		`{"prompt":"a b c","max_tokens":8}`,
	} {
		resp := post(t, ctx, hs.URL+"/v1/completions", body)
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	after, err := probe.ScrapeMetrics(ctx, hs.Client(), hs.URL+"/v1", nil)
	if err != nil {
		t.Fatal(err)
	}
	d := after.Sub(before)
	sm, ok := d.ServerMetrics()
	near := func(x, y float64) bool { return math.Abs(x-y) < 1e-6 }
	// TTFT counts from the handler's start: one step, plus the moment the
	// idle engine took to wake up for the request.
	if !ok || sm.Requests != 2 || sm.TTFTMsMean < 2 || sm.TTFTMsMean > 7 || !near(sm.TPOTMsMean, 2) || !near(sm.E2EMsMean-sm.TTFTMsMean, 14) ||
		!near(sm.DecodeMsMean, 14) || sm.TPOTSeries != "vllm:request_time_per_output_token_seconds" {
		t.Errorf("ServerMetrics() = %+v, %v; want 2 requests, TTFT 2 ms and a wake-up, TPOT 2 ms, E2E TTFT + 14 ms, decode 14 ms", sm, ok)
	}
	if itl := d["vllm:inter_token_latency_seconds"]; itl.Count != 14 || !near(itl.Sum, 0.028) {
		t.Errorf("inter-token latency %+v, want 14 gaps of 2 ms", itl)
	}
}

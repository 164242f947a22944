package report

import (
	"strings"
	"testing"

	"github.com/tokbench/tokbench/metrics"
)

func TestServerNote(t *testing.T) {
	recs := []metrics.Record{{
		OK: true, TTFTMs: 40, E2EMs: 120, OutputTokens: 9,
		ChunkMs:     []float64{40, 50, 60, 70, 80, 90, 100, 110, 120},
		ChunkTokens: []int{1, 1, 1, 1, 1, 1, 1, 1, 1},
		Server:      &metrics.ServerTiming{LoadMs: 5, PromptMs: 25, PredictedMs: 80, DecodeTPS: 112.5},
	}}
	lv := metrics.Summarize(metrics.Load{Mode: "concurrency", Concurrency: 2}, recs, 1)
	var b strings.Builder
	if err := Table(&b, metrics.Summary{Levels: []metrics.Level{lv}}); err != nil {
		t.Fatal(err)
	}
	want := "c=2: server-reported TTFT p50 30 ms (load+prefill), decode p50 112.5 tok/s; client − server p50: TTFT +10 ms, decode -12.5 tok/s, E2E +10 ms (network, proxy, client) over 1 requests"
	if !strings.Contains(b.String(), want) {
		t.Errorf("table lacks the server line\n%s\nwant %s", b.String(), want)
	}
}

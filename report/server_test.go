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
	want := "c=2: server-reported TTFT p50 30 ms (load+prefill), decode p50 112.5 tok/s; client − server p50: TTFT +10.0 ms (network, proxy, client), decode -12.5 tok/s, E2E +10.0 ms; over 1 requests"
	if !strings.Contains(b.String(), want) {
		t.Errorf("table lacks the server line\n%s\nwant %s", b.String(), want)
	}
}

// TestServerNoteQueue: requests that waited inside the server for a free
// slot show a TTFT gap far beyond the level's smallest; the note calls
// that the server's queue, not the network, and the decode gap compares
// like with like (the server's 9 tokens over 80 ms counted as 8).
func TestServerNoteQueue(t *testing.T) {
	var recs []metrics.Record
	for _, ttft := range []float64{40, 540, 1040, 1540} {
		var chunks []float64
		for k := range 9 {
			chunks = append(chunks, ttft+10*float64(k))
		}
		recs = append(recs, metrics.Record{
			OK: true, TTFTMs: ttft, E2EMs: ttft + 80, OutputTokens: 9, ChunkMs: chunks, ChunkTokens: []int{1, 1, 1, 1, 1, 1, 1, 1, 1},
			Server: &metrics.ServerTiming{LoadMs: 5, PromptMs: 25, PredictedMs: 80, DecodeTPS: 112.5, PredictedTokens: 9},
		})
	}
	lv := metrics.Summarize(metrics.Load{Mode: "concurrency", Concurrency: 4}, recs, 1)
	var b strings.Builder
	if err := Table(&b, metrics.Summary{Levels: []metrics.Level{lv}}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"decode p50 112.5 tok/s (100 counted as tokbench counts: the tokens after the first)",
		"TTFT +760 ms: server queue +750 ms (waiting for a free slot: the server's prefill time leaves it out) and network, proxy, client +10.0 ms (the level's smallest difference)",
		"decode +0.00 tok/s",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("table lacks %q\n%s", want, b.String())
		}
	}
}

package report

import (
	"fmt"
	"regexp"
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
	want := "c=2: server-reported TTFT p50 30.00 ms (load+prefill), decode p50 112.5 tok/s; client − server p50: TTFT +10.0 ms (network, proxy, client), decode -12.5 tok/s, E2E +10.0 ms; over 1 requests"
	if !strings.Contains(b.String(), want) {
		t.Errorf("table lacks the server line\n%s\nwant %s", b.String(), want)
	}
}

// TestServerNoteQueue: requests that waited inside the server for a free
// slot show a TTFT gap far beyond the level's smallest; the note calls
// that the server's queue, not the network, and the decode gap compares
// like with like (the server's 9 tokens over 80 ms counted as 8).
func TestServerNoteQueue(t *testing.T) {
	level := func(c int, ttfts ...float64) metrics.Level {
		var recs []metrics.Record
		for _, ttft := range ttfts {
			var chunks []float64
			for k := range 9 {
				chunks = append(chunks, ttft+10*float64(k))
			}
			recs = append(recs, metrics.Record{
				OK: true, TTFTMs: ttft, E2EMs: ttft + 80, OutputTokens: 9, ChunkMs: chunks, ChunkTokens: []int{1, 1, 1, 1, 1, 1, 1, 1, 1},
				Server: &metrics.ServerTiming{LoadMs: 5, PromptMs: 25, PredictedMs: 80, DecodeTPS: 112.5, PredictedTokens: 9},
			})
		}
		return metrics.Summarize(metrics.Load{Mode: "concurrency", Concurrency: c}, recs, 1)
	}
	queue := "TTFT +760 ms: server queue +750 ms (%s; the server's prefill time leaves it out) and network, proxy, client +10.0 ms (the level's smallest difference)"
	for _, c := range []struct {
		name  string
		lv    metrics.Level
		slots int
		want  string
		lacks string
	}{
		{"slots full", level(4, 40, 540, 1040, 1540), 2, fmt.Sprintf(queue, "slots full: 4 users on the server's 2 slots, the rest waiting for one"), "other requests' prefill"},
		{"others' prefill", level(4, 40, 540, 1040, 1540), 4, fmt.Sprintf(queue, "the server busy with other requests' prefill in the same batch: 4 users fit its 4 slots, so none waited for a slot"), "slots full"},
		{"slots not said", level(4, 40, 540, 1040, 1540), 0, fmt.Sprintf(queue, "waiting for a free slot or for other requests' prefill: the server did not say its slots"), "slots full"},
		{"one user", level(1, 40, 540, 1040, 1540), 4, fmt.Sprintf(queue, "unexplained by the server's figures: one user at a time, with nothing to wait for"), "free slot"},
		// 3 ms beyond the smallest gap, under one 10 ms step of the loop:
		// the step's granularity, not a queue, and given no cause.
		{"within a step", level(1, 31, 34, 34, 34), 4, "TTFT +4.00 ms (network, proxy, client)", "server queue"},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.lv.NameQueue(c.slots)
			var b strings.Builder
			if err := Table(&b, metrics.Summary{Levels: []metrics.Level{c.lv}}); err != nil {
				t.Fatal(err)
			}
			for _, want := range []string{c.want, "decode +0.00 tok/s", "decode p50 112.5 tok/s (100.0 counted as tokbench counts: the tokens after the first)"} {
				if !strings.Contains(b.String(), want) {
					t.Errorf("table lacks %q\n%s", want, b.String())
				}
			}
			if note := serverNote(c.lv); strings.Contains(note, c.lacks) {
				t.Errorf("server note says %q: %s", c.lacks, note)
			}
		})
	}
}

// TestNoScientificNotation: figures of any size print in plain notation
// beside the integers on their line (never 1.595e+04 ms).
func TestNoScientificNotation(t *testing.T) {
	var recs []metrics.Record
	for _, ttft := range []float64{15950, 16950, 17950} {
		recs = append(recs, metrics.Record{
			OK: true, TTFTMs: ttft, E2EMs: ttft + 80, OutputTokens: 9, ChunkMs: []float64{ttft, ttft + 80}, ChunkTokens: []int{1, 8},
			Server: &metrics.ServerTiming{PromptMs: 15900, PredictedMs: 80, DecodeTPS: 112.5, PredictedTokens: 9},
		})
	}
	lv := metrics.Summarize(metrics.Load{Mode: "concurrency", Concurrency: 8}, recs, 1)
	lv.Repeats = &metrics.Repeats{Runs: 16, Fold: "mean", Spread: map[string][2]float64{
		"ttft_p50": {28940, 34750}, "decode_tps_p50": {12.5, 13.25}, "output_tps": {123456, 234567}}}
	lv.ServerMetrics = &metrics.ServerMetrics{Engine: "vllm", TTFTMsMean: 15950, TTFTMsP50: 15950, TTFTMsP99: 123456}
	var b strings.Builder
	if err := Table(&b, metrics.Summary{Levels: []metrics.Level{lv}}); err != nil {
		t.Fatal(err)
	}
	if m := regexp.MustCompile(`\d[eE][+-]\d`).FindString(b.String()); m != "" {
		t.Errorf("table has %q in scientific notation:\n%s", m, b.String())
	}
	for _, want := range []string{"server-reported TTFT p50 15900 ms", "TTFT p50 28940–34750 ms", "TTFT p50 15950 ms, p99 123456 ms"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, b.String())
		}
	}
}

package report

import (
	"testing"

	"github.com/tokbench/tokbench/metrics"
)

func TestWindowLine(t *testing.T) {
	w := metrics.Window{StartS: 3540, EndS: 3600, OutputTokens: 7200, OutputTPS: 120,
		Requests: metrics.Requests{Sent: 62, Completed: 60, Failed: 2, Errors: map[string]int{"timeout": 1, "http_503": 1}},
		TTFT:     metrics.Stats{Count: 60, P50: 45.25, P99: 120.5}, TPOT: metrics.Stats{P50: 9.75}, E2E: metrics.Stats{P99: 1402}}
	got := WindowLine(metrics.Load{Mode: metrics.ModeConcurrency, Concurrency: 16}, w)
	want := "c=16 59:00–1:00:00: 62 requests, 2 failed (http_503 1, timeout 1), 120.0 tok/s, TTFT p50 45.25 p99 120.5 ms, TPOT p50 9.750 ms, E2E p99 1402 ms"
	if got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	sched := metrics.Stats{P50: 50, P99: 700}
	w.TTFTSched = &sched
	got = WindowLine(metrics.Load{Mode: metrics.ModeRate, RateRPS: 100, Arrival: "poisson"}, w)
	if want := "100 req/s poisson 59:00–1:00:00: 62 requests, 2 failed (http_503 1, timeout 1), 120.0 tok/s, TTFT from schedule p50 50.00 p99 700.0 ms, TPOT p50 9.750 ms, E2E p99 1402 ms"; got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}

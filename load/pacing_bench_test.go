package load

import (
	"context"
	"testing"
	"time"

	"github.com/tokbench/tokbench/internal/fakellm"
	"github.com/tokbench/tokbench/metrics"
)

// BenchmarkOpenLoopPacing sends 1,000 requests at 500 req/s (constant) to a
// fast loopback server and reports how late the sends went out against their
// schedule (client queue p50/p99, ms) and the drift of the last send.
//
//	go test -run '^$' -bench OpenLoopPacing -benchtime 1x ./load
func BenchmarkOpenLoopPacing(b *testing.B) {
	srv := fakellm.New(fakellm.Script{TTFT: time.Millisecond, Gap: time.Millisecond, Tokens: 2, Usage: true})
	defer srv.Close()
	for b.Loop() {
		r := newRunnerB(b, srv)
		lv := Level{Load: metrics.Load{Mode: "rate", RateRPS: 500, Arrival: ArrivalConstant}, Requests: 1000}
		res, err := r.RunLevel(context.Background(), 0, lv, fixedSource{maxTokens: 2})
		if err != nil {
			b.Fatal(err)
		}
		q := res.Level.QueueMs
		b.ReportMetric(q.P50, "queue-p50-ms")
		b.ReportMetric(q.P99, "queue-p99-ms")
		b.ReportMetric(q.Max, "queue-max-ms")
		b.ReportMetric(float64(res.Level.Requests.Failed), "failed")
	}
}

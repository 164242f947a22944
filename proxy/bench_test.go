package proxy

import (
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/tokbench/tokbench/internal/fakellm"
	"github.com/tokbench/tokbench/metrics"
)

// BenchmarkProxyStreams sends 100 concurrent streams through the proxy
// and reports how far its recorded upstream TTFT is from the fake
// server's own first flush (p50, p99, in ms): the measurement's error at
// that load, against the truth no client can bend.
func BenchmarkProxyStreams(b *testing.B) {
	up := fakellm.New(fakellm.Script{TTFT: 30 * time.Millisecond, Gap: 5 * time.Millisecond, Tokens: 24, Usage: true})
	defer up.Close()
	base, records := proxied(b, up.URL)
	var errs []float64
	for b.Loop() {
		var wg sync.WaitGroup
		for range 100 {
			wg.Go(func() {
				if st, _ := chat(b, base, http.Header{}); st != 200 {
					b.Errorf("status %d", st)
				}
			})
		}
		wg.Wait()
	}
	first := map[string]time.Time{}
	for _, s := range up.Streams() {
		if len(s.Flushes) > 0 {
			first[s.ID] = s.Flushes[0]
		}
	}
	for _, r := range records() {
		if f, ok := first[r.ResponseID]; ok && r.OK {
			errs = append(errs, r.TTFTMs-float64(f.Sub(r.Start))/1e6)
		}
	}
	slices.Sort(errs)
	b.ReportMetric(metrics.Percentile(errs, 50), "ttft-err-p50-ms")
	b.ReportMetric(metrics.Percentile(errs, 99), "ttft-err-p99-ms")
}

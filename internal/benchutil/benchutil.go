// Package benchutil holds what tokbench's benchmarks and benchmark programs
// share: per-token figures for testing.B, and a raised file limit for
// programs that hold thousands of connections.
package benchutil

import (
	"runtime"
	"testing"
)

// PerToken reports ns/token, allocs/token and B/token of a benchmark whose
// every op handles tokens tokens. Call it before the loop, and the function
// it returns after.
func PerToken(b *testing.B, tokens int) func() {
	b.ReportAllocs()
	var m0 runtime.MemStats
	runtime.ReadMemStats(&m0)
	return func() {
		var m1 runtime.MemStats
		runtime.ReadMemStats(&m1)
		n := float64(b.N) * float64(tokens)
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/n, "ns/token")
		b.ReportMetric(float64(m1.Mallocs-m0.Mallocs)/n, "allocs/token")
		b.ReportMetric(float64(m1.TotalAlloc-m0.TotalAlloc)/n, "B/token")
	}
}

// Package metrics turns per-request records into the numbers tokbench
// reports: TTFT, decode TPS, TPOT, ITL, E2E latency, aggregate throughput and
// failures by class. Definitions follow docs/metrics.md exactly; percentiles are
// exact over the recorded values with numpy's default linear interpolation,
// so results line up with vLLM's.
//
// The functions here are pure: they take values and return values and are
// safe for concurrent use.
package metrics

import (
	"fmt"
	"math"
	"sort"
)

// Stats summarises one distribution. Percentile fields are raw percentiles:
// P5 is the 5th percentile whether lower or higher is better.
type Stats struct {
	Count  int     `json:"count"`
	Mean   float64 `json:"mean"`
	Stddev float64 `json:"stddev"`
	Min    float64 `json:"min"`
	P5     float64 `json:"p5"`
	P10    float64 `json:"p10"`
	P25    float64 `json:"p25"`
	P50    float64 `json:"p50"`
	P75    float64 `json:"p75"`
	P90    float64 `json:"p90"`
	P95    float64 `json:"p95"`
	P99    float64 `json:"p99"`
	Max    float64 `json:"max"`
}

// Percentile returns the p-th percentile (0..100) of sorted values using
// linear interpolation between closest ranks (numpy's default "linear"
// method): position p/100·(n−1). It returns 0 for no values.
func Percentile(sorted []float64, p float64) float64 {
	n := len(sorted)
	if n == 0 {
		return 0
	}
	if p <= 0 {
		return sorted[0]
	}
	if p >= 100 {
		return sorted[n-1]
	}
	pos := p / 100 * float64(n-1)
	lo := int(math.Floor(pos))
	hi := lo + 1
	if hi >= n {
		return sorted[n-1]
	}
	frac := pos - float64(lo)
	return sorted[lo] + (sorted[hi]-sorted[lo])*frac
}

// Describe computes Stats over values. It sorts a copy; values is not
// modified. The standard deviation is the population one (numpy's default).
func Describe(values []float64) Stats {
	n := len(values)
	if n == 0 {
		return Stats{}
	}
	s := make([]float64, n)
	copy(s, values)
	sort.Float64s(s)
	var sum float64
	for _, v := range s {
		sum += v
	}
	mean := sum / float64(n)
	var sq float64
	for _, v := range s {
		d := v - mean
		sq += d * d
	}
	return Stats{
		Count:  n,
		Mean:   mean,
		Stddev: math.Sqrt(sq / float64(n)),
		Min:    s[0],
		P5:     Percentile(s, 5),
		P10:    Percentile(s, 10),
		P25:    Percentile(s, 25),
		P50:    Percentile(s, 50),
		P75:    Percentile(s, 75),
		P90:    Percentile(s, 90),
		P95:    Percentile(s, 95),
		P99:    Percentile(s, 99),
		Max:    s[n-1],
	}
}

// Get returns the named percentile or moment ("p50", "mean", "max", …) and
// whether the name is known.
func (s Stats) Get(name string) (float64, bool) {
	switch name {
	case "count":
		return float64(s.Count), true
	case "mean":
		return s.Mean, true
	case "stddev":
		return s.Stddev, true
	case "min":
		return s.Min, true
	case "p5":
		return s.P5, true
	case "p10":
		return s.P10, true
	case "p25":
		return s.P25, true
	case "p50", "median":
		return s.P50, true
	case "p75":
		return s.P75, true
	case "p90":
		return s.P90, true
	case "p95":
		return s.P95, true
	case "p99":
		return s.P99, true
	case "max":
		return s.Max, true
	}
	return 0, false
}

// Figure formats a measured value with about four significant digits, as
// tables and comparisons print it: 1234, 123.4, 12.34, 1.234.
func Figure(v float64) string {
	switch a := math.Abs(v); {
	case a >= 1000:
		return fmt.Sprintf("%.0f", v)
	case a >= 100:
		return fmt.Sprintf("%.1f", v)
	case a >= 10:
		return fmt.Sprintf("%.2f", v)
	default:
		return fmt.Sprintf("%.3f", v)
	}
}

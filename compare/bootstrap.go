package compare

import (
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"

	"github.com/tokbench/tokbench/metrics"
)

// Block bootstrap settings: a level's requests are cut, in the order they
// started, into blocks of consecutive requests; resampling whole blocks
// keeps what requests running together share (one slow engine step slows
// every request in flight), which resampling single requests would break.
const (
	bootstrapResamples = 400
	bootstrapMaxValues = 2000 // per side; more are thinned evenly
	minBlocks          = 5
	maxBlocks          = 30
	requestsPerBlock   = 10
	// minBeyond is how many requests each side needs beyond a percentile
	// (above p95: 5% of them) for it to be tested: a p99 of 100 requests
	// is one request's value, and no resampling makes it more.
	minBeyond = 2
)

// timed is one request's value and when it started in its level.
type timed struct{ at, v float64 }

// timedSamples are the values of m over the completed records, in start
// order.
func timedSamples(m metrics.Metric, recs []metrics.Record) []timed {
	var out []timed
	for i := range recs {
		if !recs[i].OK {
			continue
		}
		if v, ok := m.Sample(&recs[i]); ok {
			out = append(out, timed{recs[i].OffsetMs, v})
		}
	}
	slices.SortStableFunc(out, func(a, b timed) int {
		switch {
		case a.at < b.at:
			return -1
		case a.at > b.at:
			return 1
		}
		return 0
	})
	if n := len(out); n > bootstrapMaxValues {
		thin := make([]timed, bootstrapMaxValues)
		for i := range thin {
			thin[i] = out[i*n/bootstrapMaxValues]
		}
		out = thin
	}
	return out
}

// blocks cuts start-ordered values into contiguous blocks of about equal
// count.
func blocks(x []timed) [][]float64 {
	nb := min(max(len(x)/requestsPerBlock, minBlocks), maxBlocks, len(x))
	out := make([][]float64, nb)
	for i, t := range x {
		b := i * nb / len(x)
		out[b] = append(out[b], t.v)
	}
	return out
}

// quantileName is the percentile a stat names ("p95" → 95), and whether it
// names one.
func quantileName(stat string) (float64, bool) {
	s, ok := strings.CutPrefix(stat, "p")
	if !ok {
		return 0, false
	}
	p, err := strconv.ParseFloat(s, 64)
	return p, err == nil && p > 0 && p < 100
}

// blockBootstrap returns the 95% interval of the difference of percentile p
// (B − A) from resampled blocks of each side, with a fixed seed so a
// comparison reads the same every time.
func blockBootstrap(a, b []timed, p float64) (lo, hi float64) {
	ba, bb := blocks(a), blocks(b)
	rng := rand.New(rand.NewPCG(1, 2))
	diffs := make([]float64, bootstrapResamples)
	var buf []float64
	resample := func(bs [][]float64) float64 {
		buf = buf[:0]
		for range bs {
			buf = append(buf, bs[rng.IntN(len(bs))]...)
		}
		slices.Sort(buf)
		return metrics.Percentile(buf, p)
	}
	for i := range diffs {
		qa := resample(ba)
		diffs[i] = resample(bb) - qa
	}
	slices.Sort(diffs)
	return metrics.Percentile(diffs, 2.5), metrics.Percentile(diffs, 97.5)
}

package metrics

import (
	"math"
	"slices"

	"github.com/DataDog/sketches-go/ddsketch"
)

// SketchAccuracy is the relative accuracy of the sketches a long level's
// distributions move to: a percentile read from one is within 0.5% of a
// value of the distribution at that rank (DDSketch's guarantee).
const SketchAccuracy = 0.005

// Exact limits: a distribution holds its values exactly up to these many,
// then moves them into a sketch. Per-request distributions (TTFT, E2E …)
// stay exact for 524,288 requests, per-token ones (ITL, chunk gaps) for
// 4,194,304 tokens. A soak at 100 req/s of 64 tokens peaked at 419 MB RSS
// as the token buffers filled (11 minutes in), then held about 130 MB
// once they had moved to sketches of a few KB each.
const (
	RequestLimit = 1 << 19
	TokenLimit   = 1 << 22
)

// requestLimit and tokenLimit are the limits in force (tests lower them).
var requestLimit, tokenLimit = RequestLimit, TokenLimit

// Sample collects one distribution: its values exactly while there are at
// most Limit of them, then a DDSketch of SketchAccuracy with the count,
// mean, standard deviation, minimum and maximum kept exactly. The zero
// value holds up to RequestLimit values exactly.
type Sample struct {
	Limit int

	vals     []float64
	sk       *ddsketch.DDSketch
	n        int
	mean, m2 float64 // Welford's running mean and sum of squared deviations
	min, max float64
}

// Add adds one value.
func (s *Sample) Add(v float64) {
	// (Once sketched, Limit is -1: no value is held exactly again.)
	if n := len(s.vals); n < s.Limit || s.Limit == 0 && n < requestLimit {
		s.vals = append(s.vals, v)
		return
	}
	s.addPast(v)
}

// AddAll adds the values of vs, in one append while they fit exactly.
func (s *Sample) AddAll(vs []float64) {
	if n := len(s.vals) + len(vs); n <= s.Limit || s.Limit == 0 && n <= requestLimit {
		s.vals = append(s.vals, vs...)
		return
	}
	for _, v := range vs {
		s.Add(v)
	}
}

// addPast adds a value past the exact limit.
func (s *Sample) addPast(v float64) {
	if s.sk == nil {
		s.spill()
	}
	s.addSketched(v)
}

// spill moves the exact values into the sketch.
func (s *Sample) spill() {
	sk, err := ddsketch.LogUnboundedDenseDDSketch(SketchAccuracy)
	if err != nil {
		panic(err) // a constant accuracy the library accepts
	}
	s.sk, s.Limit = sk, -1
	s.min, s.max = math.Inf(1), math.Inf(-1)
	vals := s.vals
	s.vals = nil
	for _, v := range vals {
		s.addSketched(v)
	}
}

func (s *Sample) addSketched(v float64) {
	s.n++
	d := v - s.mean
	s.mean += d / float64(s.n)
	s.m2 += d * (v - s.mean)
	s.min, s.max = min(s.min, v), max(s.max, v)
	_ = s.sk.Add(v) // NaN and ±Inf are refused; the exact moments still count them
}

// Len is the number of values added.
func (s *Sample) Len() int {
	if s.sk != nil {
		return s.n
	}
	return len(s.vals)
}

// Sketched reports whether the percentiles are the sketch's.
func (s *Sample) Sketched() bool { return s.sk != nil }

// Values are the values added, while they are held exactly (nil once
// sketched).
func (s *Sample) Values() []float64 { return s.vals }

// Stats describes the distribution: Describe's exact figures, or once
// sketched the exact count, mean, deviation and extremes with the
// sketch's percentiles (clamped to the extremes).
func (s *Sample) Stats() Stats {
	if s.sk == nil {
		return Describe(s.vals)
	}
	q := func(p float64) float64 {
		v, err := s.sk.GetValueAtQuantile(p / 100)
		if err != nil {
			return math.NaN()
		}
		return min(max(v, s.min), s.max)
	}
	return Stats{
		Count: s.n, Mean: s.mean, Stddev: math.Sqrt(s.m2 / float64(s.n)), Min: s.min, Max: s.max,
		P5: q(5), P10: q(10), P25: q(25), P50: q(50), P75: q(75), P90: q(90), P95: q(95), P99: q(99),
	}
}

// somePtr is the Stats of a sample with values, nil without.
func (s *Sample) somePtr() *Stats {
	if s.Len() == 0 {
		return nil
	}
	st := s.Stats()
	return &st
}

// Counts is a distribution of small whole numbers (tokens per chunk) held
// exactly in any amount: a count per value. The zero value is empty.
type Counts struct {
	small [64]int     // values 0..63, the common case
	big   map[int]int // the others
}

// Add counts one k.
func (c *Counts) Add(k int) {
	if k >= 0 && k < len(c.small) {
		c.small[k]++
		return
	}
	if c.big == nil {
		c.big = map[int]int{}
	}
	c.big[k]++
}

// all is every value counted, with its count.
func (c *Counts) all() map[int]int {
	m := make(map[int]int, len(c.big)+8)
	for k, n := range c.small {
		if n > 0 {
			m[k] = n
		}
	}
	for k, n := range c.big {
		m[k] += n
	}
	return m
}

// Stats describes the distribution exactly, as Describe would the
// values one by one.
func (cs *Counts) Stats() Stats {
	c := cs.all()
	n := 0
	keys := make([]int, 0, len(c))
	for k, m := range c {
		n += m
		keys = append(keys, k)
	}
	if n == 0 {
		return Stats{}
	}
	slices.Sort(keys)
	var sum float64
	for _, k := range keys {
		sum += float64(k) * float64(c[k])
	}
	mean := sum / float64(n)
	var sq float64
	for _, k := range keys {
		d := float64(k) - mean
		if n > tokenLimit {
			sq += d * d * float64(c[k])
			continue
		}
		for range c[k] { // value by value in sorted order, as Describe adds them
			sq += d * d
		}
	}
	// at is the value at sorted position i.
	at := func(i int) float64 {
		for _, k := range keys {
			if i < c[k] {
				return float64(k)
			}
			i -= c[k]
		}
		return float64(keys[len(keys)-1])
	}
	pct := func(p float64) float64 {
		pos := p / 100 * float64(n-1)
		lo := int(math.Floor(pos))
		if lo+1 >= n {
			return at(n - 1)
		}
		a, b := at(lo), at(lo+1)
		return a + (b-a)*(pos-float64(lo))
	}
	return Stats{
		Count: n, Mean: mean, Stddev: math.Sqrt(sq / float64(n)),
		Min: float64(keys[0]), Max: float64(keys[len(keys)-1]),
		P5: pct(5), P10: pct(10), P25: pct(25), P50: pct(50), P75: pct(75), P90: pct(90), P95: pct(95), P99: pct(99),
	}
}

package workload

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
)

// Dist is a distribution of token lengths: a fixed value ("512"), a normal
// one ("512:128", mean:stddev, rounded and clamped to at least 1) or a
// uniform one ("256-2048", both ends included). A number may end in k
// (×1024): "32k" is 32768, as context lengths are written.
type Dist struct {
	Mean, StdDev float64
	// Lo and Hi bound a uniform distribution (Hi 0 otherwise).
	Lo, Hi int
}

// Fixed is the distribution that always gives n.
func Fixed(n int) Dist { return Dist{Mean: float64(n)} }

// ParseDist reads one distribution.
func ParseDist(s string) (Dist, error) {
	s = strings.TrimSpace(s)
	if mean, sd, ok := strings.Cut(s, ":"); ok {
		m, err := parseTokens(mean)
		if err != nil {
			return Dist{}, err
		}
		d, err := parseTokens(sd)
		if err != nil || d < 0 {
			return Dist{}, fmt.Errorf("%q: the standard deviation must be a whole number ≥ 0", s)
		}
		return Dist{Mean: float64(m), StdDev: float64(d)}, nil
	}
	if lo, hi, ok := strings.Cut(s, "-"); ok {
		l, err := parseTokens(lo)
		if err != nil {
			return Dist{}, err
		}
		h, err := parseTokens(hi)
		if err != nil {
			return Dist{}, err
		}
		if h < l {
			return Dist{}, fmt.Errorf("%q: the range is empty", s)
		}
		return Dist{Mean: float64(l+h) / 2, Lo: l, Hi: h}, nil
	}
	n, err := parseTokens(s)
	if err != nil {
		return Dist{}, err
	}
	return Fixed(n), nil
}

// ParseDists reads a comma list of distributions (a sweep).
func ParseDists(s string) ([]Dist, error) {
	var out []Dist
	for _, part := range strings.Split(s, ",") {
		d, err := ParseDist(part)
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, nil
}

func parseTokens(s string) (int, error) {
	s = strings.TrimSpace(s)
	mul := 1
	if t, ok := strings.CutSuffix(strings.ToLower(s), "k"); ok {
		s, mul = t, 1024
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > 10_000_000/mul {
		return 0, fmt.Errorf("%q is not a token count ≥ 1 (want N, MEAN:STDDEV, LO-HI or a comma list)", s)
	}
	return n * mul, nil
}

// Sample draws one length, at least 1.
func (d Dist) Sample(r *rand.Rand) int {
	switch {
	case d.Hi > 0:
		return d.Lo + r.IntN(d.Hi-d.Lo+1)
	case d.StdDev > 0:
		return max(1, int(math.Round(d.Mean+d.StdDev*r.NormFloat64())))
	}
	return max(1, int(d.Mean))
}

// IsFixed reports whether d always gives the same length.
func (d Dist) IsFixed() bool { return d.Hi == 0 && d.StdDev == 0 }

// String is the flag spelling of d.
func (d Dist) String() string {
	switch {
	case d.Hi > 0:
		return fmt.Sprintf("%d-%d", d.Lo, d.Hi)
	case d.StdDev > 0:
		return fmt.Sprintf("%g:%g", d.Mean, d.StdDev)
	}
	return fmt.Sprintf("%g", d.Mean)
}

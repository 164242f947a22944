package compare

import (
	"math"
)

// minRuns is how many runs each side needs for compare to test per-run
// values instead of requests (--repeat 3 or more).
const minRuns = 3

// welch is the 95% interval of mean(b) − mean(a) by Welch's t, over one
// value per run: the unit that repeated runs make independent. ok is false
// with fewer than minRuns values a side.
func welch(a, b []float64) (diff, lo, hi float64, ok bool) {
	if len(a) < minRuns || len(b) < minRuns {
		return 0, 0, 0, false
	}
	ma, va := meanVar(a)
	mb, vb := meanVar(b)
	na, nb := float64(len(a)), float64(len(b))
	sa, sb := va/na, vb/nb
	se := math.Sqrt(sa + sb)
	diff = mb - ma
	if se == 0 {
		return diff, diff, diff, true
	}
	// Welch–Satterthwaite degrees of freedom, rounded down: the interval
	// is then a little wider, never narrower.
	df := (sa + sb) * (sa + sb) / (sa*sa/(na-1) + sb*sb/(nb-1))
	t := t975(int(math.Floor(df)))
	return diff, diff - t*se, diff + t*se, true
}

func meanVar(x []float64) (mean, variance float64) {
	for _, v := range x {
		mean += v
	}
	mean /= float64(len(x))
	for _, v := range x {
		variance += (v - mean) * (v - mean)
	}
	return mean, variance / float64(len(x)-1)
}

// t975 is Student's t distribution's 97.5th percentile for df degrees of
// freedom (a two-sided 95% interval).
func t975(df int) float64 {
	table := [...]float64{0, 12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
		2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
		2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042}
	switch {
	case df < 1:
		return table[1]
	case df < len(table):
		return table[df]
	case df < 60: // each range's value at its lowest df: never narrower
		return 2.042
	case df < 120:
		return 2.000
	}
	return 1.980
}

package compare

import (
	"math"
	"sort"
)

// MannWhitney is the two-sided Mann-Whitney U test of whether samples x and
// y come from the same distribution, with the normal approximation, a
// correction for ties and a continuity correction (scipy's
// mannwhitneyu(method="asymptotic") gives the same p). U is the statistic of
// x: the number of pairs (xi, yj) with xi > yj, ties counting one half. With
// fewer than two samples on either side, or every value equal, p is 1.
func MannWhitney(x, y []float64) (u, p float64) {
	n1, n2 := len(x), len(y)
	if n1 == 0 || n2 == 0 {
		return 0, 1
	}
	type obs struct {
		v     float64
		fromX bool
	}
	all := make([]obs, 0, n1+n2)
	for _, v := range x {
		all = append(all, obs{v, true})
	}
	for _, v := range y {
		all = append(all, obs{v, false})
	}
	sort.Slice(all, func(i, j int) bool { return all[i].v < all[j].v })
	n := float64(n1 + n2)
	var rankX, tieTerm float64
	for i := 0; i < len(all); {
		j := i
		for j < len(all) && all[j].v == all[i].v {
			j++
		}
		rank := float64(i+j+1) / 2 // ranks i+1 … j, averaged
		for k := i; k < j; k++ {
			if all[k].fromX {
				rankX += rank
			}
		}
		t := float64(j - i)
		tieTerm += t*t*t - t
		i = j
	}
	u = rankX - float64(n1*(n1+1))/2
	if n1 < 2 || n2 < 2 {
		return u, 1
	}
	mu := float64(n1*n2) / 2
	sigma2 := float64(n1*n2) / 12 * ((n + 1) - tieTerm/(n*(n-1)))
	if sigma2 <= 0 {
		return u, 1
	}
	z := (math.Abs(u-mu) - 0.5) / math.Sqrt(sigma2)
	if z < 0 {
		z = 0
	}
	return u, math.Erfc(z / math.Sqrt2)
}

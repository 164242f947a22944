package load

import (
	"sort"

	"github.com/tokbench/tokbench/metrics"
)

// AutoSweep plans a concurrency sweep from what it has measured: one user
// first, then doubling until aggregate throughput stops growing (under 10%
// more for twice the users), an SLO is clearly broken (more than 50% past
// its threshold), half the requests fail, or Max users is reached; then up
// to Refine levels between the highest passing and the lowest failing level
// (the knee when there are no SLOs), so the capacity is interpolated over a
// short span.
type AutoSweep struct {
	Max    int
	Refine int
	SLOs   []metrics.SLO

	refining bool
	refined  int
}

// Next returns the next concurrency to measure, or false when done. done
// holds every level measured so far, in any order.
func (a *AutoSweep) Next(done []metrics.Level) (int, bool) {
	if len(done) == 0 {
		return 1, true
	}
	if !a.refining {
		last := &done[len(done)-1]
		c := last.Load.Concurrency
		stop := c >= a.Max || last.ErrorRate >= 0.5 || a.clearlyBroken(last)
		if len(done) >= 2 {
			prev := &done[len(done)-2]
			if last.OutputTPS < 1.1*prev.OutputTPS {
				stop = true
			}
		}
		if !stop {
			return min(2*c, a.Max), true
		}
		a.refining = true
	}
	if a.refined >= a.Refine {
		return 0, false
	}
	lo, hi := a.boundary(done)
	if hi-lo < 2 {
		return 0, false
	}
	a.refined++
	return (lo + hi) / 2, true
}

func (a *AutoSweep) clearlyBroken(lv *metrics.Level) bool {
	for _, o := range a.SLOs {
		if o.Margin(o.Observed(lv)) < -0.5 {
			return true
		}
	}
	return false
}

// boundary is the span to refine: highest passing to lowest failing level
// with SLOs, else the knee and the level after it.
func (a *AutoSweep) boundary(done []metrics.Level) (lo, hi int) {
	lv := append([]metrics.Level(nil), done...)
	sort.Slice(lv, func(i, j int) bool { return lv[i].Load.Concurrency < lv[j].Load.Concurrency })
	if len(a.SLOs) > 0 {
		for i := range lv {
			met := lv[i].SLO != nil && lv[i].SLO.Met
			if !met {
				if i == 0 {
					return 0, 0
				}
				return lv[i-1].Load.Concurrency, lv[i].Load.Concurrency
			}
		}
		return 0, 0
	}
	best := 0
	for i := range lv {
		if lv[i].OutputTPS*lv[i].DecodeTPS.P50 > lv[best].OutputTPS*lv[best].DecodeTPS.P50 {
			best = i
		}
	}
	if best == len(lv)-1 {
		return 0, 0
	}
	return lv[best].Load.Concurrency, lv[best+1].Load.Concurrency
}

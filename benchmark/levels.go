package benchmark

import (
	"context"
	"errors"

	"github.com/tokbench/tokbench/load"
	"github.com/tokbench/tokbench/metrics"
)

// levelRunner runs one level once.
type levelRunner func(ctx context.Context, idx int, lv load.Level) (load.Result, error)

// runLevels runs the planned levels (or the automatic sweep), each Repeat
// times, judges the SLOs, prices each level, and returns the levels in
// the order run and whether an interrupt ended the run.
func (r *run) runLevels(ctx context.Context, run levelRunner, annotate func(*metrics.Level)) ([]metrics.Level, bool, error) {
	p := r.p
	var out []metrics.Level
	var sweep *load.AutoSweep
	if p.Sweep != nil {
		s := *p.Sweep // the sweep keeps its state as it goes: the plan's stays as given
		sweep = &s
	}
	planned := p.levels()
	next := func(i int) (load.Level, bool) {
		if sweep == nil {
			if i < len(planned) {
				return planned[i], true
			}
			return load.Level{}, false
		}
		c, ok := sweep.Next(out)
		if !ok {
			return load.Level{}, false
		}
		lv := p.Load.SweepLevel()
		lv.Load = metrics.Load{Mode: metrics.ModeConcurrency, Concurrency: c}
		if lv.Requests == 0 && lv.Duration == 0 {
			lv.Requests = max(4*c, 16)
		}
		return lv, true
	}
	for i := 0; ; i++ {
		lv, ok := next(i)
		if !ok {
			return out, false, nil
		}
		var runs []metrics.Level
		interrupted := false
		for range max(p.Repeat, 1) {
			res, err := run(ctx, i, lv)
			if err != nil && !errors.Is(err, load.ErrInterrupted) {
				return out, false, err
			}
			runs = append(runs, res.Level)
			if errors.Is(err, load.ErrInterrupted) {
				interrupted = true
				break
			}
		}
		level := metrics.MedianOfRuns(runs, p.SLOs)
		if annotate != nil {
			annotate(&level)
		}
		level.Cost = metrics.CostOf(&level, p.Prices)
		out = append(out, level)
		if interrupted {
			return out, true, nil
		}
	}
}

// finish adds the SLOs, capacity, knee and profile to a summary.
func (r *run) finish(s *metrics.Summary) {
	for _, o := range r.p.SLOs {
		s.SLOs = append(s.SLOs, o.Expr)
	}
	s.Capacity = metrics.FindCapacity(s.Levels, r.p.SLOs)
	s.Knee = metrics.FindKnee(s.Levels)
	s.Context = metrics.FindContextEffect(s.Levels)
	s.Profile = r.p.Profile
	s.MediaCost = r.mediaCost
}

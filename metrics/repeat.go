package metrics

import (
	"sort"
)

// Repeats says a level was run several times and how far the runs spread.
type Repeats struct {
	Runs int `json:"runs"`
	// Fold is how the runs' values became the level's: "mean" (the
	// simulator's phase replicas), else their median.
	Fold string `json:"fold,omitempty"`
	// Spread is [min, max] over the runs of the statistics each metric
	// names in Metric.Spread.
	Spread map[string][2]float64 `json:"spread"`
	// PerRun holds each run's value of every statistic of every metric
	// (Metric.RunStats: those compare rows and gates may name), in run
	// order: the unit a comparison of repeated runs tests, one value per
	// run.
	PerRun map[string][]float64 `json:"per_run,omitempty"`
}

func median(v []float64) float64 {
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	return Percentile(s, 50)
}

func mean(v []float64) float64 {
	sum := 0.0
	for _, x := range v {
		sum += x
	}
	return sum / float64(len(v))
}

func foldStats(runs []Level, get func(*Level) *Stats, fold func([]float64) float64) Stats {
	var out Stats
	fields := []func(*Stats) *float64{
		func(s *Stats) *float64 { return &s.Mean }, func(s *Stats) *float64 { return &s.Stddev },
		func(s *Stats) *float64 { return &s.Min }, func(s *Stats) *float64 { return &s.P5 },
		func(s *Stats) *float64 { return &s.P10 }, func(s *Stats) *float64 { return &s.P25 },
		func(s *Stats) *float64 { return &s.P50 }, func(s *Stats) *float64 { return &s.P75 },
		func(s *Stats) *float64 { return &s.P90 }, func(s *Stats) *float64 { return &s.P95 },
		func(s *Stats) *float64 { return &s.P99 }, func(s *Stats) *float64 { return &s.Max },
	}
	vals := make([]float64, 0, len(runs))
	for _, field := range fields {
		vals = vals[:0]
		for i := range runs {
			if st := get(&runs[i]); st.Count > 0 {
				vals = append(vals, *field(st))
			}
		}
		if len(vals) > 0 {
			*field(&out) = fold(vals)
		}
	}
	for i := range runs {
		out.Count += get(&runs[i]).Count
	}
	return out
}

// MedianOfRuns folds K runs of one level into one: every statistic and rate
// is the median of the per-run values (as one reports repeated benchmark
// runs), counts are summed, and Repeats records the spread. SLO verdicts
// are judged again on the median values; goodput is the median goodput.
func MedianOfRuns(runs []Level, slos []SLO) Level { return foldRuns(runs, slos, median, "") }

// MeanOfRuns folds K runs of one level as MedianOfRuns does, with the mean
// of the per-run values instead of their median: the expected value of a
// statistic over runs that differ by chance, as the simulator's phase
// replicas do (sim.CurveConfig.Phases).
func MeanOfRuns(runs []Level, slos []SLO) Level { return foldRuns(runs, slos, mean, "mean") }

func foldRuns(runs []Level, slos []SLO, fold func([]float64) float64, name string) Level {
	if len(runs) == 1 {
		return runs[0]
	}
	out := Level{Load: runs[0].Load, Requests: Requests{Errors: map[string]int{}}, TokenSource: runs[0].TokenSource}
	scalar := func(get func(*Level) float64) float64 {
		v := make([]float64, len(runs))
		for i := range runs {
			v[i] = get(&runs[i])
		}
		return fold(v)
	}
	for i := range runs {
		r := &runs[i]
		out.Requests.Sent += r.Requests.Sent
		out.Requests.Completed += r.Requests.Completed
		out.Requests.Failed += r.Requests.Failed
		out.Requests.Interrupted += r.Requests.Interrupted
		for k, v := range r.Requests.Errors {
			out.Requests.Errors[k] += v
		}
		for k, v := range r.Requests.ErrorSamples {
			if _, ok := out.Requests.ErrorSamples[k]; !ok {
				if out.Requests.ErrorSamples == nil {
					out.Requests.ErrorSamples = map[string]string{}
				}
				out.Requests.ErrorSamples[k] = v
			}
		}
		out.InputTokens += r.InputTokens
		out.OutputTokens += r.OutputTokens
		out.Shortfall.RequestedTokens += r.Shortfall.RequestedTokens
		out.Shortfall.ReceivedTokens += r.Shortfall.ReceivedTokens
		out.Shortfall.ShortRequests += r.Shortfall.ShortRequests
		out.Warnings = append(out.Warnings, r.Warnings...)
		if r.TokenSource != out.TokenSource {
			out.TokenSource = SourceMixed
		}
	}
	out.DurationS = scalar(func(l *Level) float64 { return l.DurationS })
	out.OutputTPS = scalar(func(l *Level) float64 { return l.OutputTPS })
	out.SteadyOutputTPS = scalar(func(l *Level) float64 { return l.SteadyOutputTPS })
	out.RequestRPS = scalar(func(l *Level) float64 { return l.RequestRPS })
	out.GoodputRPS = scalar(func(l *Level) float64 { return l.GoodputRPS })
	out.ErrorRate = scalar(func(l *Level) float64 { return l.ErrorRate })
	out.TTFT = foldStats(runs, func(l *Level) *Stats { return &l.TTFT }, fold)
	out.TTFVT = foldStats(runs, func(l *Level) *Stats { return &l.TTFVT }, fold)
	out.DecodeTPS = foldStats(runs, func(l *Level) *Stats { return &l.DecodeTPS }, fold)
	out.TPOT = foldStats(runs, func(l *Level) *Stats { return &l.TPOT }, fold)
	out.ITL = foldStats(runs, func(l *Level) *Stats { return &l.ITL }, fold)
	out.E2E = foldStats(runs, func(l *Level) *Stats { return &l.E2E }, fold)
	out.E2ETPS = foldStats(runs, func(l *Level) *Stats { return &l.E2ETPS }, fold)
	out.ChunkGap = foldStats(runs, func(l *Level) *Stats { return &l.ChunkGap }, fold)
	out.TokensPerChunk = foldStats(runs, func(l *Level) *Stats { return &l.TokensPerChunk }, fold)
	out.Embeddings, out.ToolCalls = foldEmbeddings(runs, fold), foldToolCalls(runs, fold)
	spread := func(get func(*Level) float64) [2]float64 {
		lo, hi := get(&runs[0]), get(&runs[0])
		for i := range runs {
			v := get(&runs[i])
			lo, hi = min(lo, v), max(hi, v)
		}
		return [2]float64{lo, hi}
	}
	out.Repeats = &Repeats{Runs: len(runs), Fold: name, Spread: map[string][2]float64{}, PerRun: map[string][]float64{}}
	for _, m := range Registry {
		for _, stat := range m.Spread {
			out.Repeats.Spread[m.StatName(stat)] = spread(func(l *Level) float64 {
				v, _ := m.Of(l, stat) // 0 for a run without samples
				return v
			})
		}
		for _, stat := range m.RunStats() {
			for i := range runs {
				if v, ok := m.Of(&runs[i], stat); ok {
					out.Repeats.PerRun[m.StatName(stat)] = append(out.Repeats.PerRun[m.StatName(stat)], v)
				}
			}
		}
	}
	if m := runs[0].Media; m != nil {
		// A request's media cost the same tokens in every run: the first's.
		out.Media = m
		out.Notes = append(out.Notes, m.Note())
	}
	goodput := out.GoodputRPS
	JudgeSLOs(&out, slos)
	out.GoodputRPS = goodput
	return out
}

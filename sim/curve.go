package sim

import (
	"context"
	"time"

	"github.com/tokbench/tokbench/metrics"
)

// CurveConfig is a concurrency curve to compute in virtual time: one
// closed-loop level per entry of Users, Requests each (0: max(4×users, 16)),
// every request PromptTokens in and MaxTokens out.
type CurveConfig struct {
	Users                   []int
	Requests                int
	PromptTokens, MaxTokens int
	// Lockstep starts each level's users at the same instant; otherwise
	// their starts are spread over one request's duration on an idle
	// engine, as tokbench bench spreads them.
	Lockstep bool
}

// Curve runs each level of c through the engine in virtual time and
// summarizes it with the metrics code bench uses.
func Curve(ctx context.Context, eng EngineConfig, cost Cost, c CurveConfig) ([]metrics.Level, error) {
	var spread time.Duration
	if !c.Lockstep {
		one, err := RunClosedLoop(ctx, eng, cost, ClosedLoop{Users: 1, Requests: 1, PromptTokens: c.PromptTokens, MaxTokens: c.MaxTokens})
		if err != nil {
			return nil, err
		}
		if at := one[0].ChunkAt; len(at) > 0 {
			spread = at[len(at)-1] - one[0].Arrival
		}
	}
	var levels []metrics.Level
	for i, u := range c.Users {
		n := c.Requests
		if n == 0 {
			n = max(4*u, 16)
		}
		traces, err := RunClosedLoop(ctx, eng, cost, ClosedLoop{
			Users: u, Requests: n, PromptTokens: c.PromptTokens, MaxTokens: c.MaxTokens, StartSpread: spread,
		})
		if err != nil {
			return nil, err
		}
		lv := metrics.Summarize(metrics.Load{Mode: metrics.ModeConcurrency, Concurrency: u}, Records(i, traces), 0)
		if u > 1 {
			lv.Lockstep = c.Lockstep
			lv.StartSpreadMs = float64(spread) / float64(time.Millisecond)
		}
		levels = append(levels, lv)
	}
	return levels, nil
}

// Records turns engine traces into the records a real run of level
// produces: times are milliseconds from each request's arrival (its t0),
// and token counts are exact, as a server's usage report gives them.
func Records(level int, traces []Trace) []metrics.Record {
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	recs := make([]metrics.Record, len(traces))
	for i, t := range traces {
		r := metrics.Record{
			ID: int(t.ID), Level: level, OffsetMs: ms(t.Arrival),
			OK: len(t.ChunkAt) > 0, FinishReason: t.Finish.String(),
			InputTokens: t.PromptTokens, InputTokensRequested: t.PromptTokens,
			OutputTokens: t.OutputTokens, TokenSource: metrics.SourceUsage,
			ChunkMs: make([]float64, len(t.ChunkAt)), ChunkTokens: t.ChunkTokens,
		}
		for j, at := range t.ChunkAt {
			r.ChunkMs[j] = ms(at - t.Arrival)
		}
		if r.OK {
			r.TTFTMs = r.ChunkMs[0]
			r.TTFVTMs = r.TTFTMs
			r.E2EMs = r.ChunkMs[len(r.ChunkMs)-1]
			r.DoneMs = r.E2EMs
		} else {
			r.ErrorClass = "not_run"
		}
		recs[i] = r
	}
	return recs
}

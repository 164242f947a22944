package benchmark

import (
	"math"
	"time"

	"github.com/tokbench/tokbench/load"
	"github.com/tokbench/tokbench/metrics"
	"github.com/tokbench/tokbench/workload"
)

// LevelSpec is the load asked for: closed-loop users per level, or
// open-loop rates, what each level sends, and this process's shard of it.
type LevelSpec struct {
	Concurrency []int     // one closed-loop level each
	Rates       []float64 // one open-loop level each (instead of Concurrency)
	Arrival     metrics.Arrival
	Burstiness  float64
	MaxInFlight int // open loop: cap on requests in flight (0: none)
	// Requests per level (0: max(4×users, 16), or max(10×rate, 16));
	// with Duration, a cap.
	Requests int
	Duration time.Duration
	Warmup   int
	Seed     uint64
	// InputTokens, with two or more lengths, makes input length a level
	// dimension: every level once per length.
	InputTokens []int
	Steps       int
	ThinkTime   time.Duration
	RampUp      time.Duration
	Lockstep    bool
	Shard       load.Shard
	// SummaryEvery summarizes each level in windows of this length too
	// (0: none).
	SummaryEvery time.Duration
	// Trace, when set, is the load: one open-loop level per TraceSpeeds
	// factor, sending the trace's requests at its instants divided by it.
	Trace       *workload.Trace
	TraceSpeeds []float64
}

// Levels are the spec's levels, this shard's part of each.
func (s LevelSpec) Levels() []load.Level {
	var levels []load.Level
	if t := s.Trace; t != nil {
		n := len(t.Requests)
		for _, speed := range s.TraceSpeeds {
			rate := 0.0
			if span := t.Span().Seconds() / speed; span > 0 {
				rate = float64(n-1) / span
			}
			levels = append(levels, load.Level{
				Load:     metrics.Load{Mode: metrics.ModeRate, RateRPS: rate, Arrival: metrics.ArrivalTrace, TraceSpeed: speed},
				Requests: n, Offsets: t.Offsets(speed), Warmup: s.Warmup, MaxInFlight: s.MaxInFlight,
				SummaryEvery: s.SummaryEvery,
			})
		}
		return levels
	}
	for _, r := range s.Rates {
		n := s.Requests
		if n == 0 && s.Duration == 0 {
			n = max(int(math.Ceil(10*r)), 16)
		}
		levels = append(levels, load.Level{
			Load:     metrics.Load{Mode: metrics.ModeRate, RateRPS: r, Arrival: s.Arrival},
			Requests: n, Duration: s.Duration, Warmup: s.Warmup,
			Burstiness: s.Burstiness, MaxInFlight: s.MaxInFlight, Seed: s.Seed,
		})
	}
	for _, c := range s.Concurrency {
		n := s.Requests
		if n == 0 && s.Duration == 0 {
			n = max(4*c, 16)
		}
		levels = append(levels, load.Level{
			Load:     metrics.Load{Mode: metrics.ModeConcurrency, Concurrency: c},
			Requests: n, Duration: s.Duration, Warmup: s.Warmup, Seed: s.Seed,
		})
	}
	if len(s.InputTokens) > 1 {
		var swept []load.Level
		for _, in := range s.InputTokens {
			for _, lv := range levels {
				lv.Load.InputTokens = in
				swept = append(swept, lv)
			}
		}
		levels = swept
	}
	for i := range levels {
		levels[i].Steps, levels[i].ThinkTime, levels[i].SummaryEvery = s.Steps, s.ThinkTime, s.SummaryEvery
		if levels[i].Load.Mode == metrics.ModeConcurrency {
			levels[i].RampUp, levels[i].Lockstep = s.RampUp, s.Lockstep
		}
		levels[i] = s.Shard.Apply(levels[i])
	}
	return levels
}

// SweepLevel is what each level of an automatic sweep sends.
func (s LevelSpec) SweepLevel() load.Level {
	return load.Level{Requests: s.Requests, Duration: s.Duration, Warmup: s.Warmup,
		Steps: s.Steps, ThinkTime: s.ThinkTime, RampUp: s.RampUp, Lockstep: s.Lockstep, SummaryEvery: s.SummaryEvery}
}

// Validate checks what the plan's levels, workload and client options can
// run, and that the copies of a dataset's rows its levels make fit the
// budget; the error is an InputError naming the Plan field. Run
// validates the plan first.
func (p *Plan) Validate() error {
	c := p.Client
	switch {
	case c.Timeout < 0:
		return fieldErrorf("Client.Timeout", "must not be negative, got %s", c.Timeout)
	case c.StallTimeout < 0:
		return fieldErrorf("Client.StallTimeout", "must not be negative, got %s", c.StallTimeout)
	case c.Grace < 0:
		return fieldErrorf("Client.Grace", "must not be negative, got %s", c.Grace)
	case c.Retry < 0:
		return fieldErrorf("Client.Retry", "must be 0 or more, got %d", c.Retry)
	case c.MaxErrorRate < 0 || c.MaxErrorRate > 1:
		return fieldErrorf("Client.MaxErrorRate", "must be between 0 and 1, got %g", c.MaxErrorRate)
	case p.Repeat < 1:
		return fieldErrorf("Repeat", "must be at least 1, got %d", p.Repeat)
	case p.Workload.Tokenizer == nil:
		return fieldErrorf("Workload.Tokenizer", "none: prompts are built and output counted with one")
	case len(p.Workload.Inputs) == 0:
		return fieldErrorf("Workload.Inputs", "none: give at least one prompt length")
	}
	planned := p.levels()
	if len(planned) == 0 && p.Sweep == nil {
		return fieldErrorf("Load", "no level to run: give concurrency levels, rates, a trace or a sweep")
	}
	sweep := p.Load.SweepLevel()
	closed := p.Sweep != nil
	for i, lv := range append([]load.Level{sweep}, planned...) {
		isPlanned := i > 0
		if isPlanned && lv.Load.Mode == metrics.ModeConcurrency {
			closed = true
			if lv.Load.Concurrency < 1 {
				return fieldErrorf("Shard", "shard %d/%d of a level with fewer users than shards has no users; give each level at least %d",
					p.Shard.Index, p.Shard.Count, p.Shard.Count)
			}
		}
		if isPlanned && lv.Requests == 0 && lv.Duration == 0 {
			return fieldErrorf("Shard", "shard %d/%d of a level's requests sends none; give at least %d", p.Shard.Index, p.Shard.Count, p.Shard.Count)
		}
		if lv.Lockstep && lv.RampUp > 0 {
			return fieldErrorf("Load.Lockstep", "starts every user at once; it cannot go with a ramp-up")
		}
		if lv.RampUp > 0 && lv.Duration > 0 && lv.RampUp >= lv.Duration {
			return fieldErrorf("Load.RampUp", "%s is not shorter than the level's duration %s, so the last users would never start", lv.RampUp, lv.Duration)
		}
	}
	if sweep.RampUp > 0 && !closed {
		return fieldErrorf("Load.RampUp", "applies to closed-loop levels; open-loop levels send on their own schedule")
	}
	return p.checkDataset(planned)
}

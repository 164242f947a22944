package cli

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/tokbench/tokbench/load"
	"github.com/tokbench/tokbench/metrics"
	"github.com/tokbench/tokbench/profile"
)

// loadFlags are bench's load-shaping flags beyond the level lists.
type loadFlags struct {
	slo       string
	profile   string
	repeat    int
	sweep     string
	sweepMax  int
	priceIn   float64
	priceOut  float64
	gpuHour   float64
	shardSpec string
	startAt   string
	shard     load.Shard
	start     time.Time
	workload  string
	steps     int
	thinkTime time.Duration
	rampUp    time.Duration
	lockstep  bool
	slos      []metrics.SLO
	prof      *profile.Profile
	autoSweep *load.AutoSweep
	prices    metrics.Prices
}

func (l *loadFlags) register(fl *pflag.FlagSet) {
	fl.StringVar(&l.slo, "slo", "", `service-level objectives, e.g. "ttft_p95<=500ms,tps_p5>=40,e2e_p99<=8s"`)
	fl.StringVar(&l.profile, "profile", "", "use case: chat, code, voice, batch, agent (sets workload and SLOs unless given)")
	fl.IntVar(&l.repeat, "repeat", 1, "run each level this many times and report the median of the runs with their spread")
	fl.StringVar(&l.sweep, "sweep", "", "auto: one user, then doubling to maximum throughput, then levels in between")
	fl.IntVar(&l.sweepMax, "sweep-max", 512, "highest concurrency --sweep auto may try")
	fl.StringVar(&l.shardSpec, "shard", "", "run shard I of N (0-based), e.g. 0/4: 1/N of every level's users, rate and requests; merge the shards with tokbench merge")
	fl.StringVar(&l.startAt, "start-at", "", "wait until this RFC 3339 instant before the first level, so shards begin together")
	fl.StringVar(&l.workload, "workload", "synthetic", "synthetic (independent requests) or agent (chains of --steps dependent calls)")
	fl.IntVar(&l.steps, "steps", 5, "calls per agent chain with --workload agent")
	fl.DurationVar(&l.thinkTime, "think-time", 0, "pause between the calls of an agent chain (tool time)")
	fl.DurationVar(&l.rampUp, "ramp-up", 0, "closed loop: start each level's users evenly over this time (default: over one request's duration, measured by the warm-up or the level before)")
	fl.BoolVar(&l.lockstep, "lockstep", false, "closed loop: start each level's users at the same instant, so its first requests prefill together (the default spreads them over one request's duration)")
	fl.Float64Var(&l.priceIn, "price-in", 0, "price per million input tokens (for cost per level)")
	fl.Float64Var(&l.priceOut, "price-out", 0, "price per million output tokens (for cost per level)")
	fl.Float64Var(&l.gpuHour, "gpu-hour-price", 0, "price of one GPU-hour, with --gpus (for cost per million output tokens)")
}

// validate checks the load flags and applies a profile's defaults to the
// bench flags the user did not set.
func (l *loadFlags) validate(f *benchFlags, set func(string) bool) error {
	if l.profile != "" {
		p, err := profile.Lookup(l.profile)
		if err != nil {
			return usagef("--profile: %v", err)
		}
		l.prof = &p
		if !set("input-tokens") {
			f.inputTokens = p.InputTokens
		}
		if !set("output-tokens") {
			f.outputTokens = p.OutputTokens
		}
		if !set("slo") {
			l.slo = p.SLOs
		}
		if p.Steps > 1 && !set("workload") {
			l.workload = "agent"
			if !set("steps") {
				l.steps = p.Steps
			}
		}
	}
	if l.slo != "" {
		slos, err := metrics.ParseSLOs(l.slo)
		if err != nil {
			return usagef("--slo: %v", err)
		}
		l.slos = slos
	}
	switch {
	case l.repeat < 1:
		return usagef("--repeat: must be at least 1, got %d", l.repeat)
	case l.priceIn < 0 || l.priceOut < 0 || l.gpuHour < 0:
		return usagef("--price-in, --price-out and --gpu-hour-price must not be negative")
	case l.gpuHour > 0 && (l.priceIn > 0 || l.priceOut > 0):
		return usagef("--gpu-hour-price: prices a run you host; --price-in/--price-out price a provider's tokens; give one or the other")
	case l.sweepMax < 1:
		return usagef("--sweep-max: must be at least 1, got %d", l.sweepMax)
	}
	if l.shardSpec != "" {
		sh, err := load.ParseShard(l.shardSpec)
		if err != nil {
			return usagef("--shard: %v", err)
		}
		l.shard = sh
		if l.sweep != "" {
			return usagef("--shard: an automatic sweep decides its levels from results; give the levels explicitly")
		}
	}
	if l.startAt != "" {
		t, err := time.Parse(time.RFC3339Nano, l.startAt)
		if err != nil {
			return usagef("--start-at: want an RFC 3339 instant like 2026-01-02T15:04:05Z, got %q", l.startAt)
		}
		l.start = t
	}
	switch l.workload {
	case "synthetic":
		l.steps = 1
	case "agent":
		if l.steps < 2 {
			return usagef("--steps: an agent chain needs at least 2 calls, got %d", l.steps)
		}
	default:
		return usagef("--workload: unknown %q (known: synthetic, agent)", l.workload)
	}
	if l.thinkTime < 0 {
		return usagef("--think-time: must not be negative")
	}
	if l.rampUp < 0 {
		return usagef("--ramp-up: must not be negative")
	}
	if l.lockstep && l.rampUp > 0 {
		return usagef("--lockstep: starts every user at once; it cannot go with --ramp-up")
	}
	switch l.sweep {
	case "":
	case "auto":
		if f.rate != "" {
			return usagef("--sweep: auto sweeps concurrency; it does not combine with --rate")
		}
		if set("concurrency") {
			return usagef("--sweep: auto chooses the concurrency levels; drop --concurrency")
		}
		l.autoSweep = &load.AutoSweep{Max: l.sweepMax, Refine: 2, SLOs: l.slos}
	default:
		return usagef("--sweep: unknown %q (known: auto)", l.sweep)
	}
	l.prices = metrics.Prices{InputPerMillion: l.priceIn, OutputPerMillion: l.priceOut, GPUHour: l.gpuHour, GPUs: max(f.gpus, 1)}
	return nil
}

// shardLevels gives the closed-loop levels their --ramp-up and returns this
// shard's part of the planned levels.
func (l *loadFlags) shardLevels(levels []load.Level) []load.Level {
	for i := range levels {
		if levels[i].Load.Mode == "concurrency" {
			levels[i].RampUp, levels[i].Lockstep = l.rampUp, l.lockstep
		}
		levels[i] = l.shard.Apply(levels[i])
	}
	return levels
}

// waitStart blocks until --start-at (if any); false when ctx ended first.
func (l *loadFlags) waitStart(ctx context.Context) bool {
	if l.start.IsZero() {
		return true
	}
	t := time.NewTimer(time.Until(l.start))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// levelRunner runs one planned level once.
type levelRunner func(ctx context.Context, idx int, lv load.Level) (load.Result, error)

// runLevels runs the planned levels (or an automatic sweep), each
// --repeat times, judges SLOs, and returns the levels in the order run.
func (l *loadFlags) runLevels(ctx context.Context, planned []load.Level, template load.Level, run levelRunner, annotate func(*metrics.Level)) ([]metrics.Level, bool, error) {
	var out []metrics.Level
	template.Steps, template.ThinkTime, template.RampUp, template.Lockstep = l.steps, l.thinkTime, l.rampUp, l.lockstep
	next := func(i int) (load.Level, bool) {
		if l.autoSweep == nil {
			if i < len(planned) {
				lv := planned[i]
				lv.Steps, lv.ThinkTime = l.steps, l.thinkTime
				return lv, true
			}
			return load.Level{}, false
		}
		c, ok := l.autoSweep.Next(out)
		if !ok {
			return load.Level{}, false
		}
		lv := template
		lv.Load = metrics.Load{Mode: "concurrency", Concurrency: c}
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
		for k := 0; k < l.repeat; k++ {
			res, err := run(ctx, i, lv)
			if err != nil && !errors.Is(err, load.ErrInterrupted) {
				return out, false, err
			}
			metrics.ApplySLOs(&res.Level, res.Records, l.slos)
			runs = append(runs, res.Level)
			if errors.Is(err, load.ErrInterrupted) {
				interrupted = true
				break
			}
		}
		level := metrics.MedianOfRuns(runs, l.slos)
		if annotate != nil {
			annotate(&level)
		}
		level.Cost = metrics.CostOf(&level, l.prices)
		out = append(out, level)
		if interrupted {
			return out, true, nil
		}
	}
}

// finish adds the SLOs, capacity, knee and profile to a summary.
func (l *loadFlags) finish(s *metrics.Summary) {
	for _, o := range l.slos {
		s.SLOs = append(s.SLOs, o.Expr)
	}
	s.Capacity = metrics.FindCapacity(s.Levels, l.slos)
	s.Knee = metrics.FindKnee(s.Levels)
	if l.prof != nil {
		s.Profile = l.prof.Name
	}
}

// describe is a one-line account of the load flags for run.json.
func (l *loadFlags) describe() map[string]any {
	return map[string]any{
		"slo": strings.TrimSpace(l.slo), "profile": l.profile, "repeat": l.repeat, "sweep": l.sweep,
		"start_at": l.startAt,
		"workload": l.workload, "steps": l.steps, "think_time": l.thinkTime.String(),
		"ramp_up": l.rampUp.String(), "lockstep": l.lockstep,
		"price_in": l.priceIn, "price_out": l.priceOut, "gpu_hour_price": l.gpuHour,
	}
}

package cli

import (
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/tokbench/tokbench/benchmark"
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

// validate checks the load flags and keeps what they parse to; a
// --profile sets the SLOs, workload and steps the user did not give (its
// token lengths are workloadFlags').
func (l *loadFlags) validate(f *benchFlags, set func(string) bool) error {
	if l.profile != "" {
		p, err := profile.Lookup(l.profile)
		if err != nil {
			return usagef("--profile: %v", err)
		}
		l.prof = &p
		// The profile stands in for the flags the user did not give.
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

// describe is the load part of run.json's configuration.
func (l *loadFlags) describe() benchmark.LoadConfig {
	return benchmark.LoadConfig{
		SLO: strings.TrimSpace(l.slo), Profile: l.profile, Repeat: l.repeat, Sweep: l.sweep,
		StartAt: l.startAt, Workload: l.workload, Steps: l.steps, ThinkTime: l.thinkTime.String(),
		RampUp: l.rampUp.String(), Lockstep: l.lockstep,
		PriceIn: l.priceIn, PriceOut: l.priceOut, GPUHourPrice: l.gpuHour,
	}
}

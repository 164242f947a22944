package cli

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"

	"github.com/tokbench/tokbench/api"
	"github.com/tokbench/tokbench/benchmark"
	"github.com/tokbench/tokbench/load"
	"github.com/tokbench/tokbench/metrics"
)

// plan validates the flags and turns them into the benchmark's plan; bad
// input is a usage error naming the flag. set reports whether the user gave
// a flag.
func (f *benchFlags) plan(env Env, set func(string) bool) (*benchmark.Plan, error) {
	if set("url") && strings.TrimSpace(f.url) == "" {
		// A CI script's unset variable must not gate on simulated numbers.
		return nil, usagef("--url: empty; leave it out to benchmark the embedded simulator")
	}
	if err := f.lf.validate(f, set); err != nil {
		return nil, err
	}
	fileKey, err := f.nf.validate()
	if err != nil {
		return nil, err
	}
	p := &benchmark.Plan{
		URL: f.url, API: f.apiName, Model: f.model, Header: http.Header{},
		Sim:             benchmark.SimOptions{Quant: f.quant, Hardware: f.hardware, GPUs: f.gpus, Seed: f.seed},
		ContinuousUsage: benchmark.Switch(f.continuousUsage), IgnoreEOS: f.ignoreEOS,
		ServerMetrics: f.serverMetrics, Client: f.nf.clientOptions(f),
		Sweep: f.lf.autoSweep, Repeat: f.lf.repeat, SLOs: f.lf.slos, Prices: f.lf.prices,
		StartAt: f.lf.start, Shard: f.lf.shard, Version: Version,
	}
	if f.lf.prof != nil {
		p.Profile = f.lf.prof.Name
	}
	if err := f.checkLoad(set); err != nil {
		return nil, err
	}
	if f.url != "" {
		ph, note, err := benchmark.ResolvePhysics(f.model, f.paramsB, f.quant, f.hardware, f.gpus)
		if err != nil {
			return nil, err
		}
		p.Physics = ph
		if note != "" {
			p.Notes = append(p.Notes, note)
		}
		if _, err := (api.OpenAI{}).Endpoint(f.url); err != nil {
			return nil, usagef("--url: %v", err)
		}
	}
	switch f.format {
	case "table", "json", "markdown", "csv":
	default:
		return nil, usagef("--format: unknown %q (known: table, json, markdown, csv)", f.format)
	}
	if f.apiName != "auto" {
		if _, err := api.ByName(f.apiName); err != nil {
			return nil, usagef("--api: %v", err)
		}
	}
	switch p.ContinuousUsage {
	case benchmark.Auto, benchmark.On, benchmark.Off:
	default:
		return nil, usagef("--continuous-usage: unknown %q (known: auto, on, off)", f.continuousUsage)
	}
	if err := benchmark.CheckContinuousUsage(f.apiName, p.ContinuousUsage); err != nil {
		return nil, err
	}
	if err := f.wl.validate(f, set); err != nil {
		return nil, err
	}
	promptSeed := f.seed // given, --seed fixes the prompts too
	if !set("seed") {
		promptSeed = rand.Uint64() | 1
	}
	p.Workload = f.wl.plan(f.wl.tok, promptSeed)
	for _, h := range f.headers {
		name, value, ok := strings.Cut(h, ":")
		name = strings.TrimSpace(name)
		if !ok || name == "" || strings.ContainsAny(name, " \t") {
			return nil, usagef("--header: want 'Name: value', got %q", redactHeaderArg(h))
		}
		value = strings.TrimSpace(value)
		p.Header.Add(name, value)
		if sensitiveHeader(name) {
			p.Secrets = append(p.Secrets, value)
		}
	}
	keyEnv := f.apiKeyEnv
	if f.apiName == "anthropic" && !set("api-key-env") {
		keyEnv = "ANTHROPIC_API_KEY"
	}
	p.APIKey = fileKey
	if p.APIKey == "" && keyEnv != "" {
		p.APIKey = strings.TrimSpace(env.Getenv(keyEnv))
		if p.APIKey == "" && set("api-key-env") {
			// Named on purpose, so a key is meant to go: a run without it
			// would measure 401s (or a different tier).
			return nil, usagef("--api-key-env: $%s is not set or is empty", keyEnv)
		}
	}
	p.Secrets = append(p.Secrets, api.URLSecrets(f.url)...)
	spec, err := f.levelSpec()
	if err != nil {
		return nil, err
	}
	p.Levels, p.SweepLevel = spec.Levels(), spec.SweepLevel()
	if p.Sweep != nil {
		p.Levels = nil // the sweep picks its levels from results
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	p.Meta = f.meta(p.Workload)
	p.Config = f.config(keyEnv, p)
	return p, nil
}

// checkLoad checks the level flags: open-loop flags need --rate, counts
// and durations are positive.
func (f *benchFlags) checkLoad(set func(string) bool) error {
	if f.rate != "" {
		if set("concurrency") {
			return usagef("--rate: give --concurrency (closed loop) or --rate (open loop), not both")
		}
		switch metrics.Arrival(f.arrival) {
		case load.ArrivalConstant, load.ArrivalPoisson, load.ArrivalGamma:
		default:
			return usagef("--arrival: unknown %q (known: constant, poisson, gamma)", f.arrival)
		}
		if !(f.burstiness > 0) {
			return usagef("--burstiness: must be positive, got %g", f.burstiness)
		}
		if f.maxConcurrency < 0 {
			return usagef("--max-concurrency: must be 0 or more, got %d", f.maxConcurrency)
		}
	} else {
		for _, name := range []string{"arrival", "burstiness", "max-concurrency"} {
			if set(name) {
				return usagef("--%s: applies to open-loop levels; give --rate too", name)
			}
		}
	}
	switch {
	case f.requests < 0 || set("requests") && f.requests == 0:
		return usagef("--requests: must be at least 1, got %d (leave it out for the default)", f.requests)
	case f.duration < 0 || set("duration") && f.duration == 0:
		return usagef("--duration: must be positive, got %s", f.duration)
	case f.warmup < 0:
		return usagef("--warmup: must be 0 or more, got %d", f.warmup)
	case f.gpus < 0:
		return usagef("--gpus: must be positive, got %d", f.gpus)
	case f.paramsB < 0:
		return usagef("--params: must be positive, got %g", f.paramsB)
	}
	return nil
}

// levelSpec is the load the flags ask for.
func (f *benchFlags) levelSpec() (benchmark.LevelSpec, error) {
	spec := benchmark.LevelSpec{
		Arrival: metrics.Arrival(f.arrival), Burstiness: f.burstiness, MaxInFlight: f.maxConcurrency,
		Requests: f.requests, Duration: f.duration, Warmup: f.warmup, Seed: f.seed,
		Steps: f.lf.steps, ThinkTime: f.lf.thinkTime, RampUp: f.lf.rampUp, Lockstep: f.lf.lockstep,
		Shard: f.lf.shard,
	}
	for _, d := range f.wl.inputs {
		spec.InputTokens = append(spec.InputTokens, int(d.Mean))
	}
	var err error
	if f.rate != "" {
		spec.Rates, err = parseFloatList("--rate", f.rate)
	} else if f.lf.sweep == "" {
		spec.Concurrency, err = parseIntList("--concurrency", f.concurrency, 1)
	}
	return spec, err
}

// meta is run.json's like-for-like metadata from the flags.
func (f *benchFlags) meta(wl benchmark.Workload) map[string]string {
	m := map[string]string{}
	for k, v := range map[string]string{
		"hardware": f.hardware, "quant": f.quant, "engine": f.engine, "label": f.label,
	} {
		if v != "" {
			m[k] = v
		}
	}
	if f.gpus > 0 {
		m["gpus"] = fmt.Sprint(f.gpus)
	}
	m["input_tokens"] = fmt.Sprint(wl.InputTokens)
	m["output_tokens"] = fmt.Sprint(wl.OutputTokens)
	return m
}

// config is run.json's configuration, without secrets: sensitive header
// values read "[REDACTED]".
func (f *benchFlags) config(keyEnv string, p *benchmark.Plan) benchmark.Config {
	var hs []string
	for _, h := range f.headers {
		hs = append(hs, redactHeaderArg(h))
	}
	// The levels as configured (a shard runs its part of each).
	var conc []int
	var rates []float64
	if f.rate != "" {
		rates, _ = parseFloatList("--rate", f.rate)
	} else if f.lf.sweep == "" {
		conc, _ = parseIntList("--concurrency", f.concurrency, 1)
	}
	return benchmark.Config{
		URL: api.RedactURL(f.url), API: f.apiName, Model: f.model,
		Concurrency: conc, Rate: rates, Arrival: f.arrival, Burstiness: f.burstiness,
		MaxConcurrency: f.maxConcurrency, Requests: f.requests, Duration: f.duration.String(),
		Warmup: f.warmup, InputTokens: p.Workload.InputTokens, OutputTokens: p.Workload.OutputTokens,
		Tokenizer: p.Workload.Tokenizer.Name(), IgnoreEOS: f.ignoreEOS, Headers: hs,
		APIKeyEnv: keyEnv, Timeout: f.timeout.String(), StallTimeout: f.stallTimeout.String(),
		Seed: f.seed, PromptSeed: p.Workload.PromptSeed, Load: f.lf.describe(),
		HTTP2: f.nf.http2, Connections: f.nf.connections, Redirects: f.nf.redirects,
		Shard: f.lf.shardSpec, Prompts: f.wl.describe(),
	}
}

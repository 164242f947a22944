package cli

import (
	"errors"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/dustin/go-humanize"

	"github.com/tokbench/tokbench/api"
	"github.com/tokbench/tokbench/benchmark"
	"github.com/tokbench/tokbench/load"
	"github.com/tokbench/tokbench/metrics"
	"github.com/tokbench/tokbench/profile"
	"github.com/tokbench/tokbench/tokenize"
	"github.com/tokbench/tokbench/wire"
	"github.com/tokbench/tokbench/workload"
)

// The checks of bench's flags, in the order plan makes them; each error
// names the flag.

// loadShape checks the load-shaping options; a --profile sets the SLOs,
// workload and steps the user did not give (and, in workload, the token
// lengths).
func (o *planning) loadShape() error {
	if o.Profile != "" {
		p, err := profile.Lookup(o.Profile)
		if err != nil {
			return usagef("--profile: %v", err)
		}
		o.prof = &p
		if !o.given("slo") {
			o.SLO = p.SLOs
		}
		if p.Steps > 1 && !o.given("workload") {
			o.Workload = "agent"
			if !o.given("steps") {
				o.Steps = p.Steps
			}
		}
	}
	if o.SLO != "" {
		slos, err := metrics.ParseSLOs(o.SLO)
		if err != nil {
			return usagef("--slo: %v", err)
		}
		o.slos = slos
	}
	switch {
	case o.PriceIn < 0 || o.PriceOut < 0 || o.GPUHourPrice < 0:
		return usagef("--price-in, --price-out and --gpu-hour-price must not be negative")
	case o.GPUHourPrice > 0 && (o.PriceIn > 0 || o.PriceOut > 0):
		return usagef("--gpu-hour-price: prices a run you host; --price-in/--price-out price a provider's tokens; give one or the other")
	case o.SweepMax < 1:
		return usagef("--sweep-max: must be at least 1, got %d", o.SweepMax)
	case o.ThinkTime < 0:
		return usagef("--think-time: must not be negative")
	case o.RampUp < 0:
		return usagef("--ramp-up: must not be negative")
	case o.SummaryEvery < 0 || o.SummaryEvery > 0 && o.SummaryEvery < time.Second:
		return usagef("--summary-every: want 1s or more, got %s", o.SummaryEvery)
	}
	if o.Shard != "" {
		sh, err := load.ParseShard(o.Shard)
		if err != nil {
			return usagef("--shard: %v", err)
		}
		o.shard = sh
		if o.Sweep != "" {
			return usagef("--shard: an automatic sweep decides its levels from results; give the levels explicitly")
		}
	}
	if o.StartAt != "" {
		t, err := time.Parse(time.RFC3339Nano, o.StartAt)
		if err != nil {
			return usagef("--start-at: want an RFC 3339 instant like 2026-01-02T15:04:05Z, got %q", o.StartAt)
		}
		o.start = t
	}
	switch o.Workload {
	case "synthetic":
		o.Steps = 1
	case "agent":
		if o.Steps < 2 {
			return usagef("--steps: an agent chain needs at least 2 calls, got %d", o.Steps)
		}
	case "chat":
		// A conversation is a chain whose every turn carries the whole
		// history, as an agent's calls do; --turns counts them.
		if o.Turns < 2 {
			return usagef("--turns: a conversation needs at least 2 turns, got %d", o.Turns)
		}
		if o.given("steps") {
			return usagef("--steps: counts an agent chain's calls; a chat's are --turns")
		}
		o.Steps = o.Turns
	default:
		return usagef("--workload: unknown %q (known: synthetic, agent, chat)", o.Workload)
	}
	if o.given("turns") && o.Workload != "chat" {
		return usagef("--turns: counts a conversation's turns; give --workload chat")
	}
	switch o.Sweep {
	case "":
	case "auto":
		if o.Rate != "" {
			return usagef("--sweep: auto sweeps concurrency; it does not combine with --rate")
		}
		if o.given("concurrency") {
			return usagef("--sweep: auto chooses the concurrency levels; drop --concurrency")
		}
		o.sweep = &load.AutoSweep{Max: o.SweepMax, Refine: 2, SLOs: o.slos}
	default:
		return usagef("--sweep: unknown %q (known: auto)", o.Sweep)
	}
	return nil
}

// checkLoad checks the level options: open-loop options need --rate,
// counts and durations are positive.
func (o *planning) checkLoad() error {
	if o.Rate != "" {
		if o.given("concurrency") {
			return usagef("--rate: give --concurrency (closed loop) or --rate (open loop), not both")
		}
		switch metrics.Arrival(o.Arrival) {
		case load.ArrivalConstant, load.ArrivalPoisson, load.ArrivalGamma:
		default:
			return usagef("--arrival: unknown %q (known: constant, poisson, gamma)", o.Arrival)
		}
		if !(o.Burstiness > 0) {
			return usagef("--burstiness: must be positive, got %g", o.Burstiness)
		}
		if o.MaxConcurrency < 0 {
			return usagef("--max-concurrency: must be 0 or more, got %d", o.MaxConcurrency)
		}
	} else {
		for _, name := range []string{"arrival", "burstiness", "max-concurrency"} {
			if o.given(name) {
				return usagef("--%s: applies to open-loop levels; give --rate too", name)
			}
		}
	}
	switch {
	case o.Requests < 0 || o.given("requests") && o.Requests == 0:
		return usagef("--requests: must be at least 1, got %d (leave it out for the default)", o.Requests)
	case o.Duration < 0 || o.given("duration") && o.Duration == 0:
		return usagef("--duration: must be positive, got %s", o.Duration)
	case o.Warmup < 0:
		return usagef("--warmup: must be 0 or more, got %d", o.Warmup)
	case o.GPUs < 0:
		return usagef("--gpus: must be positive, got %d", o.GPUs)
	case o.ParamsB < 0:
		return usagef("--params: must be positive, got %g", o.ParamsB)
	}
	return nil
}

// network checks the transport options and reads the CA file.
func (o *planning) network() error {
	switch {
	case o.Connections != "warm" && o.Connections != "cold":
		return usagef("--connections: want warm or cold, got %q", o.Connections)
	case o.Redirects != "none" && o.Redirects != "same-origin":
		return usagef("--redirects: want none or same-origin, got %q", o.Redirects)
	}
	cfg, err := wire.ClientTLS(o.Insecure, o.CACert)
	if err != nil {
		return usagef("--ca-cert: %v", err)
	}
	o.tls = cfg
	return nil
}

// protocol checks the URL, the API and the usage switch.
func (o *planning) protocol() error {
	if o.URL != "" {
		if _, err := (api.OpenAI{}).Endpoint(o.URL); err != nil {
			return usagef("--url: %v", err)
		}
		// Every API tokbench speaks runs over HTTP: another scheme is the
		// URL's mistake, not a server that is down.
		if u, _ := url.Parse(strings.TrimSpace(o.URL)); u.Scheme != "http" && u.Scheme != "https" {
			return usagef("--url: scheme %q is not http or https: want http(s)://host[:port][/v1]", u.Scheme)
		}
	}
	if o.API != "auto" {
		if _, err := api.ByName(o.API); err != nil {
			return usagef("--api: %v", err)
		}
	}
	switch benchmark.Switch(o.ContinuousUsage) {
	case benchmark.Auto, benchmark.On, benchmark.Off:
	default:
		return usagef("--continuous-usage: unknown %q (known: auto, on, off)", o.ContinuousUsage)
	}
	if err := benchmark.CheckLlamaCppMedia(o.API, o.LlamaCppMedia); err != nil {
		return err
	}
	return benchmark.CheckContinuousUsage(o.API, benchmark.Switch(o.ContinuousUsage))
}

// workload parses the prompt and length options, loads the tokenizer and
// reads every dataset row. A --profile's lengths stand in for
// --input-tokens and --output-tokens when they are not given.
func (o *planning) workload() error {
	var err error
	prof := o.prof
	if prof != nil && !o.given("input-tokens") && prof.InputTokens > 0 {
		o.inputs = []workload.Dist{workload.Fixed(prof.InputTokens)}
	} else if o.inputs, err = workload.ParseDists(o.InputTokens); err != nil {
		return usagef("--input-tokens: %v", err)
	}
	if prof != nil && !o.given("output-tokens") && prof.OutputTokens > 0 {
		o.output = workload.Fixed(prof.OutputTokens)
	} else if o.output, err = workload.ParseDist(o.OutputTokens); err != nil {
		return usagef("--output-tokens: %v", err)
	}
	switch {
	case len(o.inputs) > 1 && o.Sweep != "":
		return usagef("--input-tokens: a list sweeps input length; it does not combine with --sweep")
	case len(o.inputs) > 1 && o.Dataset != "":
		return usagef("--input-tokens: a list sweeps synthetic input length; it does not combine with --dataset")
	case o.PrefixTokens < 0:
		return usagef("--prefix-tokens: must be 0 or more, got %d", o.PrefixTokens)
	case o.PrefixGroups < 1:
		return usagef("--prefix-groups: must be at least 1, got %d", o.PrefixGroups)
	case o.MinTokens < 0:
		return usagef("--min-tokens: must be 0 or more, got %d", o.MinTokens)
	}
	name := o.Tokenizer
	if name == "server" {
		o.serverTok = true
		name = tokenize.Default // builds prompts and counts output without usage
	}
	if o.tok, err = tokenize.Open(name); err != nil {
		return usagef("--tokenizer: %v", err)
	}
	// Every workload builds synthetic prompts (datasets too, for the words
	// put in front of rows sent again): refuse a tokenizer that cannot.
	if _, err := workload.NewSynthetic(o.tok, o.Seed); err != nil {
		return usagef("--tokenizer: %v", err)
	}
	if o.media, err = parseMedia(o.Images, o.ImageSize, o.ImageFormat, o.AudioSeconds); err != nil {
		return err
	}
	budget, err := humanize.ParseBytes(o.DatasetBudget)
	if err != nil || budget == 0 || budget > 1<<62 {
		return usagef("--dataset-budget: want a size such as 512MiB or 4GiB, got %q", o.DatasetBudget)
	}
	if o.Dataset == "" {
		return nil
	}
	ds, err := workload.OpenDataset(o.Dataset, o.DatasetFormat, 100_000, o.Seed, workload.Limits{Tokenizer: o.tok, Budget: int64(budget)})
	switch {
	case errors.Is(err, workload.ErrFormat):
		return usagef("--dataset-format: %v", err)
	case errors.Is(err, workload.ErrBudget):
		return usagef("--dataset: %v; --dataset-budget raises it", err)
	case err != nil:
		return usagef("--dataset: %v", err)
	}
	o.format, o.rows = ds.Format, ds.Rows
	o.copyBudget = max(1, int64(budget)-workload.RowsBytes(ds.Rows))
	return nil
}

// plannedWorkload is the validated workload as the plan's.
func (o *planning) plannedWorkload(promptSeed uint64) benchmark.Workload {
	wl := benchmark.Workload{
		Inputs: o.inputs, Output: o.output, Rows: o.rows, CopyBudget: o.copyBudget,
		Dataset: o.Dataset, DatasetFormat: o.format,
		PrefixTokens: o.PrefixTokens, PrefixGroups: o.PrefixGroups, MinTokens: o.MinTokens,
		Tokenizer: o.tok, ServerTokenizer: o.serverTok, PromptSeed: promptSeed, Chat: o.Workload == "chat",
		Trace: o.trace, Media: o.media,
	}
	if o.format == workload.FormatText {
		wl.Corpus = o.Dataset
	}
	return wl
}

// readTrace reads --trace, its window and speeds; a trace is the load, so
// the options that make levels of their own are refused beside it.
func (o *planning) readTrace() error {
	if o.Trace == "" {
		for _, name := range []string{"trace-format", "trace-speed", "trace-window"} {
			if o.given(name) {
				return usagef("--%s: applies to a replayed trace; give --trace too", name)
			}
		}
		return nil
	}
	for _, name := range []string{"concurrency", "rate", "sweep", "requests", "duration", "dataset", "input-tokens", "output-tokens", "shard", "workload", "arrival", "burstiness"} {
		if o.given(name) {
			return usagef("--%s: a --trace run sends the trace's requests at the trace's instants with its lengths; leave --%s out", name, name)
		}
	}
	t, err := workload.ReadTrace(o.Trace, o.TraceFormat)
	if err != nil {
		return usagef("--trace: %v", err)
	}
	if o.TraceWindow != "" {
		a, b, ok := strings.Cut(o.TraceWindow, ":")
		from, err1 := traceInstant(a)
		to, err2 := traceInstant(b)
		if !ok || err1 != nil || err2 != nil || b != "" && to <= from {
			return usagef("--trace-window: want A:B, trace time from its first request (seconds or durations: 600:1200, 10m:20m, 10m:), got %q", o.TraceWindow)
		}
		if t = t.Window(from, to); len(t.Requests) == 0 {
			return usagef("--trace-window: %s holds no request of %s", o.TraceWindow, o.Trace)
		}
	}
	for _, f := range strings.Split(o.TraceSpeed, ",") {
		v, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil || !(v > 0) || v > 1e6 {
			return usagef("--trace-speed: want positive factors (2 is twice as fast), got %q", o.TraceSpeed)
		}
		o.speeds = append(o.speeds, v)
	}
	t.Kept = o.TraceWindow
	o.trace = t
	o.IgnoreEOS = true // the trace's output lengths, exactly
	return nil
}

// traceInstant reads one end of --trace-window: seconds or a duration
// ("" is 0).
func traceInstant(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, nil
	}
	if v, err := strconv.ParseFloat(s, 64); err == nil && v >= 0 {
		return time.Duration(v * float64(time.Second)), nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, errors.New("bad instant")
	}
	return d, nil
}

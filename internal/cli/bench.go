package cli

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/tokbench/tokbench/api"
	"github.com/tokbench/tokbench/load"
	"github.com/tokbench/tokbench/metrics"
	"github.com/tokbench/tokbench/report"
	"github.com/tokbench/tokbench/results"
	"github.com/tokbench/tokbench/sim"
	"github.com/tokbench/tokbench/tokenize"
)

type benchFlags struct {
	url, apiName, model   string
	concurrency           string
	rate, arrival         string
	burstiness            float64
	maxConcurrency        int
	requests              int
	duration              time.Duration
	warmup                int
	inputTokens           int
	outputTokens          int
	tokenizer             string
	ignoreEOS             bool
	headers               []string
	apiKeyEnv             string
	out, format           string
	timeout, stallTimeout time.Duration
	grace                 time.Duration
	seed                  uint64
	replace               bool
	promptSeed            uint64 // --seed when given, else drawn for the run
	hardware, quant       string
	gpus                  int
	paramsB               float64
	engine, label         string
	serverMetrics         bool
	continuousUsage       string
	lf                    loadFlags
	wl                    workloadFlags
	nf                    netFlags
}

func newBenchCmd(env Env) *cobra.Command {
	f := &benchFlags{}
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Benchmark a streaming endpoint (the embedded simulator without --url)",
		Long: `bench sends streaming requests at one or more load levels and reports
TTFT, decode tokens/s, TPOT, ITL, E2E latency and aggregate throughput.

Without --url it starts the embedded simulated server on loopback (Llama 3.1
8B BF16 on one H100 SXM unless --model/--quant/--hardware/--gpus say
otherwise) and benchmarks it over real HTTP.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runBench(cmd.Context(), env, f, cmd)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.url, "url", "", "base URL as the API's SDK takes it, e.g. http://localhost:8000/v1 (default: the embedded simulator)")
	fl.StringVar(&f.apiName, "api", "openai-chat", "protocol: "+strings.Join(api.Names, ", ")+", auto (probe the server)")
	fl.StringVar(&f.model, "model", "", "model name (default: the first one the server lists)")
	fl.StringVar(&f.concurrency, "concurrency", "1,4,16", "comma list of concurrent users, one level each")
	fl.StringVar(&f.rate, "rate", "", "open loop: comma list of request rates per second, one level each (instead of --concurrency)")
	fl.StringVar(&f.arrival, "arrival", "poisson", "open-loop arrivals: constant, poisson, gamma")
	fl.Float64Var(&f.burstiness, "burstiness", 1, "gamma arrivals: shape (below 1 burstier than Poisson, above 1 smoother)")
	fl.IntVar(&f.maxConcurrency, "max-concurrency", 0, "open loop: cap on requests in flight; late sends count as client queue time (0: no cap)")
	fl.IntVar(&f.requests, "requests", 0, "requests per level (default max(4×concurrency, 16); with --duration, a cap)")
	fl.DurationVar(&f.duration, "duration", 0, "run each level this long instead of a request count, e.g. 60s")
	fl.IntVar(&f.warmup, "warmup", 1, "unrecorded warm-up requests before each level")
	f.wl.register(fl, f)
	fl.BoolVar(&f.ignoreEOS, "ignore-eos", false, "send ignore_eos (vLLM, SGLang, llama.cpp) so outputs reach --output-tokens")
	fl.StringArrayVar(&f.headers, "header", nil, "extra request header 'Name: value' (repeatable; values never written to files)")
	fl.StringVar(&f.apiKeyEnv, "api-key-env", "OPENAI_API_KEY", "environment variable holding the API key (sent in the protocol's header: Bearer token, Anthropic x-api-key; default ANTHROPIC_API_KEY with --api anthropic)")
	fl.StringVar(&f.out, "out", "", "write run.json, requests.jsonl and summary.json to this directory (one that holds a run is refused without --replace)")
	fl.BoolVar(&f.replace, "replace", false, "with --out: write over the run the directory holds")
	fl.StringVar(&f.format, "format", "table", "stdout format: table, json, markdown, csv")
	fl.DurationVar(&f.timeout, "timeout", 10*time.Minute, "limit for one whole request")
	fl.DurationVar(&f.stallTimeout, "stall-timeout", 0, "fail a request whose stream is silent this long (0: never)")
	fl.DurationVar(&f.grace, "grace", 5*time.Second, "after Ctrl-C, how long streams in flight may finish")
	fl.Uint64Var(&f.seed, "seed", 1, "seed for arrival times and the embedded simulator; given, it also fixes the prompts, which are otherwise new in every run (so no run is served from the prompt cache another filled)")
	fl.StringVar(&f.hardware, "hardware", "", "hardware the endpoint runs on, e.g. h100-sxm (recorded; configures the simulator)")
	fl.StringVar(&f.quant, "quant", "", "weight precision, e.g. bf16, fp8, int4 (recorded; configures the simulator)")
	fl.IntVar(&f.gpus, "gpus", 0, "GPUs serving the model (recorded; configures the simulator)")
	fl.Float64Var(&f.paramsB, "params", 0, "billions of parameters of a dense model not in the catalog (for the ceiling and MBU)")
	fl.StringVar(&f.engine, "engine", "", "serving engine and version, e.g. vllm-0.11 (recorded)")
	fl.StringVar(&f.label, "label", "", "free-form label for this run (recorded)")
	fl.BoolVar(&f.serverMetrics, "server-metrics", false, "scrape the server's /metrics (vLLM's latency histograms) around each level and record its mean TTFT, TPOT and E2E beside the client's (on when --api auto finds vLLM or the simulator)")
	fl.StringVar(&f.continuousUsage, "continuous-usage", "auto", "ask for usage in every chunk (stream_options.continuous_usage_stats) for exact tokens per chunk: auto (when the server is vLLM or tokbench's simulator), on, off; openai-chat and openai-completions only")
	f.lf.register(fl)
	f.nf.register(fl)
	return cmd
}

// benchPlan is the validated configuration of a run.
type benchPlan struct {
	levels  []load.Level
	adapter api.Adapter
	tok     tokenize.Tokenizer
	header  http.Header
	secrets []string
	physics *benchPhysics
	notes   []string
	// apiKey and keyHeader: the key and the header setAPIKey put it in.
	apiKey, keyHeader string
	// detected is what probing the server found (--api auto, native APIs).
	detected *api.Detection
	// maxModelLen is vLLM's max_model_len from the model list bench read.
	maxModelLen int
}

func (f *benchFlags) validate(env Env, set func(string) bool) (*benchPlan, error) {
	p := &benchPlan{header: http.Header{}}
	if set("url") && strings.TrimSpace(f.url) == "" {
		// A CI script's unset variable must not gate on simulated numbers.
		return nil, usagef("--url: empty; leave it out to benchmark the embedded simulator")
	}
	f.promptSeed = f.seed
	if !set("seed") {
		f.promptSeed = rand.Uint64() | 1
	}
	if err := f.lf.validate(f, set); err != nil {
		return nil, err
	}
	fileKey, err := f.nf.validate()
	if err != nil {
		return nil, err
	}
	var conc []int
	var rates []float64
	if f.rate != "" {
		if set("concurrency") {
			return nil, usagef("--rate: give --concurrency (closed loop) or --rate (open loop), not both")
		}
		if rates, err = parseFloatList("--rate", f.rate); err != nil {
			return nil, err
		}
		switch f.arrival {
		case load.ArrivalConstant, load.ArrivalPoisson, load.ArrivalGamma:
		default:
			return nil, usagef("--arrival: unknown %q (known: constant, poisson, gamma)", f.arrival)
		}
		if !(f.burstiness > 0) {
			return nil, usagef("--burstiness: must be positive, got %g", f.burstiness)
		}
		if f.maxConcurrency < 0 {
			return nil, usagef("--max-concurrency: must be 0 or more, got %d", f.maxConcurrency)
		}
	} else {
		for _, name := range []string{"arrival", "burstiness", "max-concurrency"} {
			if set(name) {
				return nil, usagef("--%s: applies to open-loop levels; give --rate too", name)
			}
		}
		if conc, err = parseIntList("--concurrency", f.concurrency, 1); err != nil {
			return nil, err
		}
	}
	switch {
	case f.requests < 0 || set("requests") && f.requests == 0:
		return nil, usagef("--requests: must be at least 1, got %d (leave it out for the default)", f.requests)
	case f.duration < 0 || set("duration") && f.duration == 0:
		return nil, usagef("--duration: must be positive, got %s", f.duration)
	case f.warmup < 0:
		return nil, usagef("--warmup: must be 0 or more, got %d", f.warmup)
	case f.timeout < 0 || f.stallTimeout < 0 || f.grace < 0:
		return nil, usagef("--timeout, --stall-timeout and --grace must not be negative")
	case f.gpus < 0:
		return nil, usagef("--gpus: must be positive, got %d", f.gpus)
	case f.paramsB < 0:
		return nil, usagef("--params: must be positive, got %g", f.paramsB)
	}
	if f.url != "" {
		ph, note, err := resolvePhysics(f.model, f.paramsB, f.quant, f.hardware, f.gpus)
		if err != nil {
			return nil, err
		}
		p.physics = ph
		if note != "" {
			p.notes = append(p.notes, note)
		}
	}
	switch f.format {
	case "table", "json", "markdown", "csv":
	default:
		return nil, usagef("--format: unknown %q (known: table, json, markdown, csv)", f.format)
	}
	if f.apiName == "auto" {
		p.adapter = api.OpenAI{Chat: true} // until detectAPI probes the server
	} else if p.adapter, err = api.ByName(f.apiName); err != nil {
		return nil, usagef("--api: %v", err)
	}
	switch f.continuousUsage {
	case "auto", "on", "off":
	default:
		return nil, usagef("--continuous-usage: unknown %q (known: auto, on, off)", f.continuousUsage)
	}
	if f.apiName != "auto" {
		if err := p.setContinuousUsage(f.continuousUsage, ""); err != nil {
			return nil, err
		}
	}
	if f.apiName == "anthropic" && !set("api-key-env") {
		f.apiKeyEnv = "ANTHROPIC_API_KEY"
	}
	if f.url != "" {
		if _, err := (api.OpenAI{}).Endpoint(f.url); err != nil {
			return nil, usagef("--url: %v", err)
		}
	}
	if err := f.wl.validate(f, set, p); err != nil {
		return nil, err
	}
	for _, h := range f.headers {
		name, value, ok := strings.Cut(h, ":")
		name = strings.TrimSpace(name)
		if !ok || name == "" || strings.ContainsAny(name, " \t") {
			return nil, usagef("--header: want 'Name: value', got %q", redactHeaderArg(h))
		}
		value = strings.TrimSpace(value)
		p.header.Add(name, value)
		if sensitiveHeader(name) {
			p.secrets = append(p.secrets, value)
		}
	}
	if fileKey == "" && f.apiKeyEnv != "" {
		fileKey = strings.TrimSpace(env.Getenv(f.apiKeyEnv))
		if fileKey == "" && set("api-key-env") {
			// Named on purpose, so a key is meant to go: a run without it
			// would measure 401s (or a different tier).
			return nil, usagef("--api-key-env: $%s is not set or is empty", f.apiKeyEnv)
		}
	}
	p.setAPIKey(fileKey)
	p.secrets = append(p.secrets, api.URLSecrets(f.url)...)
	for _, r := range rates {
		n := f.requests
		if n == 0 && f.duration == 0 {
			n = max(int(math.Ceil(10*r)), 16)
		}
		p.levels = append(p.levels, load.Level{
			Load:     metrics.Load{Mode: "rate", RateRPS: r, Arrival: f.arrival},
			Requests: n, Duration: f.duration, Warmup: f.warmup,
			Burstiness: f.burstiness, MaxInFlight: f.maxConcurrency, Seed: f.seed,
		})
	}
	for _, c := range conc {
		n := f.requests
		if n == 0 && f.duration == 0 {
			n = max(4*c, 16)
		}
		p.levels = append(p.levels, load.Level{
			Load:     metrics.Load{Mode: "concurrency", Concurrency: c},
			Requests: n, Duration: f.duration, Warmup: f.warmup, Seed: f.seed,
		})
	}
	p.levels = f.lf.shardLevels(f.wl.sweep(p.levels))
	for _, lv := range p.levels {
		if lv.Load.Mode == "concurrency" && lv.Load.Concurrency == 0 {
			return nil, usagef("--shard: shard %s of a level with fewer users than shards has no users; give each level at least %d",
				f.lf.shardSpec, f.lf.shard.Count)
		}
		if lv.Requests == 0 && lv.Duration == 0 && f.requests > 0 {
			return nil, usagef("--shard: shard %s of --requests %d sends none; give at least %d", f.lf.shardSpec, f.requests, f.lf.shard.Count)
		}
	}
	if r := f.lf.rampUp; r > 0 {
		if f.duration > 0 && r >= f.duration {
			return nil, usagef("--ramp-up: %s is not shorter than --duration %s, so the last users would never start", r, f.duration)
		}
		closed := f.lf.autoSweep != nil
		for _, lv := range p.levels {
			closed = closed || lv.Load.Mode == "concurrency"
		}
		if !closed {
			return nil, usagef("--ramp-up: applies to closed-loop levels (--concurrency); --rate levels send on their own schedule")
		}
	}
	return p, nil
}

func runBench(ctx context.Context, env Env, f *benchFlags, cmd *cobra.Command) error {
	plan, err := f.validate(env, cmd.Flags().Changed)
	if err != nil {
		return err
	}
	var w *results.Writer
	if f.out != "" {
		if !f.replace {
			if _, err := os.Stat(filepath.Join(f.out, results.RunFile)); err == nil {
				return usagef("--out: %s holds a run already; give another directory, or --replace to write over it", f.out)
			}
		}
		if w, err = results.Create(f.out); err != nil {
			return usagef("--out: %v", err)
		}
		defer w.Close()
	}

	target := metrics.Target{URL: api.RedactURL(f.url), API: plan.adapter.Name(), Model: f.model}
	baseURL := f.url
	if f.url == "" {
		simCtx, stopSim := context.WithCancel(context.WithoutCancel(ctx))
		defer stopSim()
		emb, err := startEmbedded(simCtx, f)
		if err != nil {
			return err
		}
		defer emb.close()
		baseURL = emb.url
		target.URL = emb.url
		target.Simulated = true
		if f.model == "" {
			f.model = emb.model
		}
		target.Model = f.model
		c := emb.srv.Config()
		if plan.physics, _, err = resolvePhysics(c.Model, 0, c.Quant, c.Hardware, c.GPUs); err != nil {
			return err
		}
		fmt.Fprintf(env.Stderr, "tokbench: no --url given: benchmarking the embedded SIMULATED server (%s) at %s\n", emb.desc, emb.url)
	}

	transport := f.nf.transport()
	// Redirects are not followed unless asked, and then only to the same
	// origin: a POST would become a GET, and the API key would go
	// wherever the server points (see api's "redirect").
	httpClient := &http.Client{Transport: transport, CheckRedirect: api.RefuseRedirects}
	if f.nf.redirects == "same-origin" {
		httpClient.CheckRedirect = api.FollowSameOrigin
	}
	defer httpClient.CloseIdleConnections()
	if err := plan.detect(ctx, env, f, httpClient, baseURL, &target); err != nil {
		return err
	}
	if f.ignoreEOS && !api.SendsIgnoreEOS(plan.adapter) {
		note := fmt.Sprintf("--ignore-eos: the %s API has no way to generate past the end of sequence, so it is not sent; outputs may end before --output-tokens", plan.adapter.Name())
		plan.notes = append(plan.notes, note)
		fmt.Fprintln(env.Stderr, "tokbench: "+note)
	}
	if d := plan.detected; f.apiName == "auto" && d != nil {
		switch d.Engine {
		case "vllm", "sglang", "tgi", "llama.cpp", sim.EngineName:
			f.serverMetrics = true
		}
	}
	engine := "" // what the probes already made say the server is
	if d := plan.detected; f.apiName == "auto" && d != nil {
		engine = d.Engine
	}
	if target.Simulated {
		engine = sim.EngineName
	}
	if f.model == "" {
		models, err := api.ListModels(ctx, httpClient, baseURL, plan.header)
		if err != nil {
			return modelListError(err, plan.secrets)
		}
		m := models[0]
		plan.maxModelLen = m.MaxModelLen
		f.model = m.ID
		target.Model = m.ID
		if engine == "" {
			engine = m.OwnedBy
		}
	}
	if err := plan.setContinuousUsage(f.continuousUsage, engine); err != nil {
		return err
	}
	if f.continuousUsage == "auto" && plan.continuousUsage() && engine == "vllm" {
		fmt.Fprintln(env.Stderr, "tokbench: the server is vLLM: asking for usage in every chunk, for exact tokens per chunk (--continuous-usage off stops it)")
	}

	client := &api.Client{
		HTTP: httpClient, Adapter: plan.adapter, BaseURL: baseURL,
		Header: plan.header, Secrets: plan.secrets, StallTimeout: f.stallTimeout,
		CountSetup: f.nf.cold(),
	}
	var sinkErr error
	var run results.Run
	runner := &load.Runner{Client: client, Tokenizer: plan.tok, Timeout: f.timeout, Grace: f.grace,
		Retry: f.nf.retry, MaxErrorRate: f.nf.maxErrorRate, Cold: f.nf.cold()}
	if w != nil {
		runner.Sink = func(rec metrics.Record) {
			if err := w.Append(rec); err != nil && sinkErr == nil {
				sinkErr = err
			}
		}
		run = results.Run{
			Tool: "tokbench", Version: Version, StartedAt: time.Now().UTC(),
			Target: target, Meta: plan.withModelLen(plan.withFacts(f.meta())), Config: plan.withDetection(f.config(plan)),
		}
		if err := w.WriteRun(run); err != nil {
			return usagef("--out: %v", err)
		}
	}

	if _, err := startLive(ctx, env, f.nf.metricsAddr, runner); err != nil {
		return err
	}
	charts := newTermCharts(env, runner) // after runner.Sink is set
	summary := metrics.Summary{Schema: metrics.Schema, Target: target, Warnings: plan.notes}
	if err := f.wl.connect(ctx, baseURL, f.model, httpClient, plan.header); err != nil {
		return err
	}
	template := load.Level{Requests: f.requests, Duration: f.duration, Warmup: f.warmup}
	var scrape *serverScrape
	if f.serverMetrics {
		scrape = &serverScrape{client: httpClient, base: baseURL, header: plan.header, warn: &summary.Warnings, delta: api.MetricsSnapshot{}}
	}
	runOnce := func(ctx context.Context, i int, lv load.Level) (load.Result, error) {
		src, err := f.wl.source(ctx, f, plan, i, lv)
		if err != nil {
			return load.Result{}, err
		}
		stop := startProgress(env, runner, lv)
		defer stop()
		if scrape == nil {
			return runner.RunLevel(ctx, i, lv, src)
		}
		return scrape.around(ctx, lv, func(lv load.Level) (load.Result, error) { return runner.RunLevel(ctx, i, lv, src) },
			func(w load.Level) {
				(&load.Runner{Client: client, Tokenizer: plan.tok, Timeout: f.timeout}).RunLevel(ctx, i, w, load.Warmups(src, lv.Requests))
			})
	}
	annotate := func(lv *metrics.Level) {
		if !f.wl.server && !strings.HasSuffix(plan.tok.Name(), ".json") {
			lv.NotCountedByModel() // a tiktoken encoding, not the model's own tokenizer
		}
		if plan.physics != nil {
			plan.physics.annotate(lv, f.wl.contextTokens(f, lv))
		}
		if scrape != nil {
			scrape.annotate(lv)
		}
	}
	summary.Levels, summary.Interrupted, err = f.lf.runLevels(ctx, plan.levels, template, runOnce, annotate)
	if err != nil {
		return err
	}
	f.lf.finish(&summary)
	// Levels are stored in load order (a sweep runs 1, 2, 4, 8, then 3);
	// the records on disk and the charts' follow.
	if newIndex, moved := metrics.SortLevels(summary.Levels); moved {
		if w != nil {
			if err := w.RenumberLevels(newIndex); err != nil {
				summary.Warnings = append(summary.Warnings, err.Error())
			}
		}
		charts.renumber(newIndex)
	}
	if sinkErr != nil {
		summary.Warnings = append(summary.Warnings, "writing requests.jsonl failed: "+sinkErr.Error())
	}
	// A run whose files could not be written (a full disk) fails, after
	// stdout has what was measured.
	writeErr := sinkErr
	if w != nil {
		// run.json again, now with what the run measured with.
		run.Transport = f.nf.measuredTransport(transport, baseURL, summary.Levels)
		if err := w.WriteRun(run); err != nil {
			fmt.Fprintf(env.Stderr, "tokbench: %v\n", err)
			writeErr = cmp.Or(writeErr, err)
		}
		if err := w.WriteSummary(summary); err != nil {
			fmt.Fprintf(env.Stderr, "tokbench: %v\n", err)
			writeErr = cmp.Or(writeErr, err)
		} else if sinkErr == nil { // (a report of records that were not all written would mislead)
			if err := writeReportHTML(w.Dir()); err != nil {
				fmt.Fprintf(env.Stderr, "tokbench: %v\n", err)
				writeErr = cmp.Or(writeErr, err)
			}
		}
	}
	switch f.format {
	case "json":
		err = report.JSON(env.Stdout, summary)
	case "markdown":
		err = report.Markdown(env.Stdout, summary)
	case "csv":
		err = report.CSV(env.Stdout, summary)
	default:
		if err = report.Table(env.Stdout, summary); err == nil {
			err = charts.write(env.Stdout, summary)
		}
	}
	if err != nil {
		return err
	}
	if writeErr != nil {
		return &exitError{code: ExitFailure, err: fmt.Errorf("--out: the run was not written whole: %w (what was written is valid)", writeErr)}
	}
	if summary.Interrupted {
		return &exitError{code: ExitInterrupted, err: errors.New("interrupted: results so far were written")}
	}
	completed := 0
	for _, lv := range summary.Levels {
		completed += lv.Requests.Completed
	}
	if completed == 0 {
		return &exitError{code: ExitFailure, err: errors.New("no request completed (see the error classes above)")}
	}
	return nil
}

// serverScrape scrapes the server's /metrics before and after each run of a
// level (--server-metrics) and adds up the histogram deltas over the
// level's repeats. The level's warm-up runs first, unrecorded, so the
// deltas hold the measured requests only.
type serverScrape struct {
	client *http.Client
	base   string
	header http.Header
	delta  api.MetricsSnapshot
	warn   *[]string // the summary's warnings: a failed scrape is said once
	failed bool
	none   bool // said that the scrapes held no series tokbench reads
}

func (s *serverScrape) around(ctx context.Context, lv load.Level, run func(load.Level) (load.Result, error), warmup func(load.Level)) (load.Result, error) {
	if lv.Warmup > 0 {
		w := lv
		w.Load, w.Requests, w.Duration, w.Warmup = metrics.Load{Mode: "concurrency", Concurrency: max(lv.Load.Concurrency, 1)}, lv.Warmup, 0, 0
		warmup(w)
		lv.Warmup = 0
	}
	before, err := api.ScrapeMetrics(ctx, s.client, s.base, s.header)
	res, runErr := run(lv)
	if err == nil {
		var after api.MetricsSnapshot
		if after, err = api.ScrapeMetrics(context.WithoutCancel(ctx), s.client, s.base, s.header); err == nil {
			s.delta.Add(after.Sub(before))
		}
	}
	if err != nil && !s.failed {
		s.failed = true
		*s.warn = append(*s.warn, "--server-metrics: "+err.Error())
	}
	return res, runErr
}

func (s *serverScrape) annotate(lv *metrics.Level) {
	if sm, ok := s.delta.ServerMetrics(); ok {
		lv.SetServerMetrics(sm)
	} else if !s.failed && !s.none {
		s.none = true
		*s.warn = append(*s.warn, "--server-metrics: the server's /metrics moved none of the series tokbench reads (vLLM's, SGLang's, TGI's, llama.cpp's): no server-side figures")
	}
	s.delta = api.MetricsSnapshot{}
}

// withModelLen records the max_model_len of the model list in run.json meta
// as server_max_context and model_context_length, unless detection did.
func (p *benchPlan) withModelLen(m map[string]string) map[string]string {
	if p.maxModelLen > 0 {
		for _, k := range []string{"server_max_context", "model_context_length"} {
			if _, ok := m[k]; !ok {
				m[k] = fmt.Sprint(p.maxModelLen)
			}
		}
	}
	return m
}

// modelListError words a failed model list: a server that cannot be
// reached is the run's failure (exit 1), or the URL's (a name that does not
// resolve: exit 2), not --model's; an answer that lists no model asks for
// --model.
func modelListError(err error, secrets []string) error {
	msg := api.Scrub(err.Error(), secrets)
	if ue, ok := errors.AsType[*api.UnreachableError](err); ok {
		if ue.Class == "dns" {
			return usagef("--url: %s", msg)
		}
		return &exitError{code: ExitFailure, err: errors.New(msg + " (is the server running at that address?)")}
	}
	return usagef("--model: not given, and the server did not list one: %s", msg)
}

func (f *benchFlags) meta() map[string]string {
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
	m["input_tokens"] = fmt.Sprint(f.inputTokens)
	m["output_tokens"] = fmt.Sprint(f.outputTokens)
	return m
}

// config is the effective configuration for run.json, without secrets:
// header values are replaced by "[REDACTED]" when the header is sensitive.
func (f *benchFlags) config(p *benchPlan) map[string]any {
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
	return map[string]any{
		"url": api.RedactURL(f.url), "api": p.adapter.Name(), "model": f.model,
		"concurrency": conc, "rate": rates, "arrival": f.arrival, "burstiness": f.burstiness,
		"max_concurrency": f.maxConcurrency, "requests": f.requests, "duration": f.duration.String(),
		"warmup": f.warmup, "input_tokens": f.inputTokens, "output_tokens": f.outputTokens,
		"tokenizer": p.tok.Name(), "ignore_eos": f.ignoreEOS, "ignore_eos_sent": f.ignoreEOS && api.SendsIgnoreEOS(p.adapter), "continuous_usage": p.continuousUsage(), "headers": hs,
		"api_key_env": f.apiKeyEnv, "timeout": f.timeout.String(),
		"stall_timeout": f.stallTimeout.String(), "seed": f.seed, "prompt_seed": f.promptSeed, "load": f.lf.describe(),
		"http2": f.nf.http2, "connections": f.nf.connections, "redirects": f.nf.redirects,
		"shard":   f.lf.shardSpec,
		"prompts": f.wl.describe(),
	}
}

// startProgress prints a live line per level to stderr when it is a
// terminal, and returns the function that ends it.
func startProgress(env Env, r *load.Runner, lv load.Level) func() {
	if !env.isTerminal(env.Stderr) {
		return func() {}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(250 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				fmt.Fprint(env.Stderr, "\r\033[K")
				return
			case <-t.C:
				start := time.Unix(0, r.Progress.Start.Load())
				el := time.Since(start).Seconds()
				tps := 0.0
				if el > 0 {
					tps = float64(r.Progress.Tokens.Load()) / el
				}
				total := "?"
				if lv.Requests > 0 {
					total = fmt.Sprint(lv.Requests)
				}
				extra := ""
				if n := r.Progress.Retries.Load(); n > 0 {
					extra += fmt.Sprintf("  %d retries", n)
				}
				if n := r.Progress.Reconnects.Load(); n > 0 {
					extra += fmt.Sprintf("  %d resent on a new connection", n)
				}
				fmt.Fprintf(env.Stderr, "\r\033[K%s  %d/%s done  %d errors%s  %.0f tok/s  %.0fs",
					lv.Load, r.Progress.Done.Load(), total, r.Progress.Failed.Load(), extra, tps, el)
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

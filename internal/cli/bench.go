package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/tokbench/tokbench/api"
	"github.com/tokbench/tokbench/benchmark"
	"github.com/tokbench/tokbench/live"
	"github.com/tokbench/tokbench/load"
	"github.com/tokbench/tokbench/report"
	"github.com/tokbench/tokbench/results"
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
	tokenizer             string
	ignoreEOS             bool
	headers               []string
	apiKeyEnv             string
	out, format           string
	timeout, stallTimeout time.Duration
	grace                 time.Duration
	seed                  uint64
	replace               bool
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
		Example: `  tokbench bench                                    # the embedded simulator, c=1,4,16
  tokbench bench --url http://localhost:8000/v1 --concurrency 1,8,32 --out run-a
  tokbench bench --url http://localhost:8080 --api auto --ignore-eos --output-tokens 256
  tokbench bench --url https://api.example.com/v1 --model m --rate 2,5 --duration 60s
  tokbench bench --url http://localhost:8000/v1 --profile chat --sweep auto
  tokbench bench --url http://localhost:8000/v1 --dataset sharegpt.json --format json`,
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
	groupedHelp(cmd, benchFlagGroups)
	return cmd
}

// benchFlagGroups are bench's flags in its help, by purpose.
var benchFlagGroups = []flagGroup{
	{"Target", []string{"url", "api", "model", "header", "api-key-env", "api-key-file", "insecure", "ca-cert", "http2", "redirects"}},
	{"Load", []string{"concurrency", "rate", "arrival", "burstiness", "max-concurrency", "requests", "duration", "warmup",
		"ramp-up", "lockstep", "connections", "sweep", "sweep-max", "repeat", "workload", "steps", "think-time", "shard", "start-at"}},
	{"Prompts and outputs", []string{"input-tokens", "output-tokens", "dataset", "dataset-format", "tokenizer", "prefix-tokens",
		"prefix-groups", "min-tokens", "ignore-eos", "seed", "continuous-usage"}},
	{"Objectives, physics and cost", []string{"profile", "slo", "hardware", "quant", "gpus", "params", "price-in", "price-out",
		"gpu-hour-price", "server-metrics"}},
	{"Failures and limits", []string{"timeout", "stall-timeout", "retry", "max-error-rate", "grace"}},
	{"Output", []string{"out", "replace", "format", "metrics-addr", "engine", "label", "help"}},
}

func runBench(ctx context.Context, env Env, f *benchFlags, cmd *cobra.Command) error {
	plan, err := f.plan(env, cmd.Flags().Changed)
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
	var charts *live.Recorder // what the terminal charts draw, when stdout is a terminal
	if env.isTerminal(env.Stdout) {
		charts = &live.Recorder{}
	}
	hooks := benchmark.Hooks{
		Out:    w,
		Notice: func(s string) { fmt.Fprintln(env.Stderr, "tokbench: "+s) },
		Runner: func(r *load.Runner) error {
			if err := startLive(ctx, env, f.nf.metricsAddr, r); err != nil {
				return err
			}
			charts.Attach(r)
			return nil
		},
	}
	if env.isTerminal(env.Stderr) {
		hooks.Level = func(r *load.Runner, lv load.Level) func() { return live.Progress(env.Stderr, r, lv) }
	}
	res, err := benchmark.Run(ctx, plan, hooks)
	if err != nil {
		return err
	}
	charts.Renumber(res.NewIndex)
	if res.WriteErr != nil {
		fmt.Fprintf(env.Stderr, "tokbench: %v\n", res.WriteErr)
	}
	summary := res.Summary
	switch f.format {
	case "json":
		err = report.JSON(env.Stdout, summary)
	case "markdown":
		err = report.Markdown(env.Stdout, summary)
	case "csv":
		err = report.CSV(env.Stdout, summary)
	default:
		if err = report.Table(env.Stdout, summary); err == nil && charts != nil {
			err = report.TerminalCharts(env.Stdout, summary, charts.Records(), termWidth(env))
		}
	}
	switch {
	case err != nil:
		return err
	case res.WriteErr != nil:
		// A run whose files could not be written (a full disk) fails,
		// after stdout has what was measured.
		return &exitError{code: ExitFailure, err: fmt.Errorf("--out: the run was not written whole: %w (what was written is valid)", res.WriteErr)}
	case summary.Interrupted:
		return &exitError{code: ExitInterrupted, err: errors.New("interrupted: results so far were written")}
	case res.Completed() == 0:
		return &exitError{code: ExitFailure, err: errors.New("no request completed (see the error classes above)")}
	}
	return nil
}

// termWidth is the terminal's width from $COLUMNS (100 when unset), at
// most 160.
func termWidth(env Env) int {
	if n, err := strconv.Atoi(env.Getenv("COLUMNS")); err == nil && n > 0 {
		return min(n, 160)
	}
	return 100
}

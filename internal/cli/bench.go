package cli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/tokbench/tokbench/benchmark"
	"github.com/tokbench/tokbench/live"
	"github.com/tokbench/tokbench/load"
	"github.com/tokbench/tokbench/metrics"
	"github.com/tokbench/tokbench/report"
	"github.com/tokbench/tokbench/results"
)

// benchFlags are bench's flags: the benchmark's options, and what the
// command does with the result.
type benchFlags struct {
	opt         benchOptions
	out, format string
	replace     bool
	metricsAddr string
	quiet       bool
	progress    time.Duration
}

func newBenchCmd(env Env) *cobra.Command {
	f := &benchFlags{opt: defaultBenchOptions()}
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
	registerOptions(fl, &f.opt)
	fl.StringVar(&f.out, "out", "", "write run.json, requests.jsonl and summary.json to this directory (one that holds a run is refused without --replace)")
	fl.BoolVar(&f.replace, "replace", false, "with --out: write over the run the directory holds")
	fl.StringVar(&f.format, "format", "table", "stdout format: table, json, markdown, csv")
	fl.BoolVar(&f.quiet, "quiet", false, "no progress on stderr (the results and warnings still print)")
	fl.DurationVar(&f.progress, "progress-every", 10*time.Second, "off a terminal, print a progress line this often while a level runs")
	fl.StringVar(&f.metricsAddr, "metrics-addr", "", "serve live Prometheus metrics of the run on this address, e.g. 127.0.0.1:9090 (/metrics)")
	groupedHelp(cmd, benchFlagGroups)
	return cmd
}

// benchFlagGroups are bench's flags in its help, by purpose.
var benchFlagGroups = []flagGroup{
	{"Target", []string{"url", "api", "llamacpp-media", "model", "header", "api-key-env", "api-key-file", "insecure", "ca-cert", "http2", "redirects"}},
	{"Load", []string{"concurrency", "rate", "arrival", "burstiness", "max-concurrency", "requests", "duration", "warmup",
		"ramp-up", "lockstep", "connections", "keep-awake", "sweep", "sweep-max", "repeat", "workload", "steps", "turns", "think-time", "shard", "start-at",
		"summary-every", "trace", "trace-format", "trace-speed", "trace-window"}},
	{"Prompts and outputs", []string{"input-tokens", "output-tokens", "dataset", "dataset-format", "dataset-budget", "images", "image-size",
		"image-format", "audio-seconds", "tokenizer", "prefix-tokens",
		"prefix-groups", "min-tokens", "ignore-eos", "seed", "continuous-usage", "embed-inputs", "tools", "tools-file"}},
	{"Objectives, physics and cost", []string{"profile", "slo", "hardware", "remeasure", "quant", "gpus", "params", "gguf", "price-in", "price-out",
		"gpu-hour-price", "server-metrics", "gpu-telemetry", "energy-price"}},
	{"Failures and limits", []string{"timeout", "stall-timeout", "retry", "max-error-rate", "grace"}},
	{"Output", []string{"out", "replace", "format", "quiet", "progress-every", "metrics-addr", "engine", "label", "help"}},
}

func runBench(ctx context.Context, env Env, f *benchFlags, cmd *cobra.Command) error {
	switch f.format {
	case "table", "json", "markdown", "csv":
	default:
		return usagef("--format: unknown %q (known: table, json, markdown, csv)", f.format)
	}
	if f.progress < time.Second {
		return usagef("--progress-every: want 1s or more, got %s", f.progress)
	}
	if f.metricsAddr != "" {
		// Before the run starts: a listen that fails later is the
		// machine's failure, an address that cannot be one is the user's.
		if _, err := net.ResolveTCPAddr("tcp", f.metricsAddr); err != nil {
			return usagef("--metrics-addr: %v", err)
		}
	}
	plan, err := f.opt.plan(planEnv{Given: cmd.Flags().Changed, Getenv: env.Getenv, Version: Version})
	if err != nil {
		return err
	}
	ctx, hurry, stop := env.interrupts(ctx)
	defer stop()
	var w *results.Writer
	if f.out != "" {
		if w, err = createOut(f.out, f.replace); err != nil {
			return err
		}
		defer w.Close()
	}
	var charts *live.Recorder // what the terminal charts draw, when stdout is a terminal
	if env.isTerminal(env.Stdout) {
		charts = &live.Recorder{}
	}
	hooks := benchmark.Hooks{
		Out:    w,
		Hurry:  hurry.Done(),
		Notice: func(s string) { fmt.Fprintln(env.Stderr, "tokbench: "+s) },
		Runner: func(r *load.Runner, t metrics.Target) error {
			if err := startLive(ctx, env, f.metricsAddr, r, t); err != nil {
				return err
			}
			charts.Attach(r)
			return nil
		},
		// A soak test's log shows each window as it closes, on a terminal
		// or off one.
		Window: func(_ int, l metrics.Load, w metrics.Window) {
			fmt.Fprintln(env.Stderr, clearLine(env)+"tokbench: "+report.WindowLine(l, w))
		},
	}
	switch {
	case f.quiet:
	case env.isTerminal(env.Stderr):
		hooks.Level = func(r *load.Runner, lv load.Level) func() { return live.Progress(env.Stderr, r, lv) }
	default: // a CI log shows the run is alive
		hooks.Level = func(r *load.Runner, lv load.Level) func() { return live.Plain(env.Stderr, r, lv, f.progress) }
	}
	res, err := benchmark.Run(ctx, plan, hooks)
	if err != nil {
		if w != nil {
			removeUnused(w)
		}
		return err
	}
	charts.Renumber(res.NewIndex)
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
		return fmt.Errorf("--out: the run was not written whole: %w (what was written is valid)", res.WriteErr)
	case summary.Interrupted:
		return withExitCode(ExitInterrupted, errors.New("interrupted: results so far were written"))
	case res.Completed() == 0:
		return errors.New("no request completed (see the error classes above)")
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

// removeUnused closes w and, when the run failed before writing anything
// into it (a server that cannot be reached), removes its empty
// requests.jsonl and the directory if that leaves it empty, so no empty
// run directory is left for report or compare to read.
func removeUnused(w *results.Writer) {
	w.Close()
	req := filepath.Join(w.Dir(), results.RequestsFile)
	if st, err := os.Stat(req); err == nil && st.Size() == 0 {
		os.Remove(req)
		os.Remove(w.Dir()) // only if empty
	}
}

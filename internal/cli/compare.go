package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/tokbench/tokbench/compare"
	"github.com/tokbench/tokbench/results"
)

type compareFlags struct {
	failIf    string
	alpha     float64
	minChange float64
	format    string
	html      string
}

func newCompareCmd(env Env) *cobra.Command {
	f := &compareFlags{}
	cmd := &cobra.Command{
		Use:   "compare A B [C…]",
		Short: "Compare saved runs level by level; gate on regressions with --fail-if",
		Long: `compare sets each later run against the first (the baseline), level by
level (levels are matched by load), with the change and a verdict per metric.
A change is called better or worse only when a test says it is not noise and
it is at least --min-change: with 3 or more runs a side (--repeat), Welch's t
over one value per run; else, for a percentile with enough requests beyond it,
a block bootstrap of the per-request samples in requests.jsonl; other rows a
Mann-Whitney U test of those samples (--alpha). An aggregate with one value
per level (output tok/s, req/s) has no samples to test: a move past
--min-change reads "better?" or "worse?" and is not counted as a change. Runs
that are not like for like (model, api, hardware, quant, engine, gpus, token
lengths, images, audio, embeddings inputs, load levels) are named in a
WARNING line (on stderr too when stdout is not a terminal, so a log shows it
once), and a --fail-if gate over them says so beside its verdict.

--fail-if takes conditions on B against A, e.g. "ttft_p95>+10%,decode_tps_p50<-5%"
(without % the change is absolute, in the metric's unit); the command exits 1
when one holds at any level, the change is at least --min-change, and a test
calls it significant or none could judge it: a gate that cannot judge (an
aggregate, a percentile of too few requests) trips on its threshold alone and
says how many requests, or --repeat 3, would let it be tested.

--format json prints the same comparisons and gate verdicts as one JSON
object (schema tokbench.compare/v1) for programs; warnings still go to
stderr.`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) < 2 {
				return usagef("compare: want at least two run directories, got %d", len(args))
			}
			return nil
		},
		RunE: func(_ *cobra.Command, args []string) error {
			return runCompare(env, f, args)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.failIf, "fail-if", "", `exit 1 when a condition holds significantly, or holds and cannot be tested, e.g. "ttft_p95>+10%,decode_tps_p50<-5%"`)
	fl.Float64Var(&f.alpha, "alpha", 0.05, "significance level of the Mann-Whitney U test")
	fl.Float64Var(&f.minChange, "min-change", 2, "smallest change in percent called better or worse")
	fl.StringVar(&f.format, "format", "table", "output format: table or json")
	fl.StringVar(&f.html, "html", "", "also write the runs' curves overlaid with the verdicts beside them to this file (one self-contained page)")
	return cmd
}

func runCompare(env Env, f *compareFlags, dirs []string) error {
	var conds []compare.Condition
	if f.failIf != "" {
		var err error
		if conds, err = compare.ParseConditions(f.failIf); err != nil {
			return usagef("--fail-if: %v", err)
		}
	}
	if f.alpha <= 0 || f.alpha >= 1 {
		return usagef("--alpha: want a value between 0 and 1, got %g", f.alpha)
	}
	if f.minChange < 0 {
		return usagef("--min-change: must not be negative, got %g", f.minChange)
	}
	if f.format == "text" {
		f.format = "table" // the spelling before every command said table
	}
	if f.format != "table" && f.format != "json" {
		return usagef("--format: unknown %q (known: table, json)", f.format)
	}
	text := f.format == "table"
	runs := make([]*compare.Run, len(dirs))
	for i, d := range dirs {
		r, err := compare.Load(d)
		if err != nil {
			return usagef("%v", err)
		}
		runs[i] = r
	}
	opt := compare.Options{Alpha: f.alpha, MinChange: f.minChange / 100}
	if f.minChange == 0 {
		opt.MinChange = 1e-12
	}
	outs, rep, nothing := compare.All(runs[0], runs[1:], opt, conds, f.failIf)
	// The table names mismatches itself; on a terminal that is enough.
	if !text || !env.isTerminal(env.Stdout) {
		for _, o := range outs {
			for _, m := range o.Diff.Mismatches {
				fmt.Fprintf(env.Stderr, "tokbench: WARNING: %s and %s are not like for like: %s\n", runs[0].Dir, o.B.Dir, m)
			}
		}
	}
	if f.html != "" {
		if err := writeCompareHTML(f.html, runs[0], outs); err != nil {
			return fmt.Errorf("--html: %w", err)
		}
	}
	var failed []string
	if text {
		var err error
		if failed, err = compare.WriteText(env.Stdout, outs, f.failIf); err != nil {
			return err
		}
	} else {
		failed = compare.Failed(outs)
		enc := json.NewEncoder(env.Stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			return err
		}
	}
	if len(failed) > 0 {
		return errors.New("--fail-if: " + strings.Join(failed, "; "))
	}
	if len(nothing) > 0 {
		// Nothing compared is no gate passed.
		return fmt.Errorf("%s and %s share no load level: nothing was compared", runs[0].Dir, strings.Join(nothing, ", "))
	}
	return nil
}

// writeCompareHTML writes the comparison page to path, whole or not at all.
func writeCompareHTML(path string, base *compare.Run, outs []compare.Outcome) error {
	var b bytes.Buffer
	if err := compare.WriteHTML(&b, base, outs); err != nil {
		return err
	}
	return results.WriteFile(path, b.Bytes())
}

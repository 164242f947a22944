package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/tokbench/tokbench/calibrate"
	"github.com/tokbench/tokbench/report"
	"github.com/tokbench/tokbench/results"
)

func newCalibrateCmd(env Env) *cobra.Command {
	var (
		out, format          string
		maxBatch, maxBatched int
		maxErrorPct          float64
		force                bool
	)
	cmd := &cobra.Command{
		Use:   "calibrate RUN --out FILE",
		Short: "Fit the simulator to a measured run, to predict other loads for that deployment",
		Long: `calibrate fits the simulator's cost model to a run's closed-loop levels:
memory efficiency (MBU), prefill rate, and per-step and per-sequence
overhead, so that the simulated decode TPS p50 and TTFT p50 of every level
match the measured ones. The run must carry physics (bench --hardware, with
the model's size from --gguf, the catalog or the server). It prints each
level's measured and simulated figures, and writes FILE for
simulate --calibration and serve --calibration.

A fit that misses the measured levels by more than --max-rms-error (20%
by default, the root mean square of every level's decode TPS and TTFT
error) is not written: calibrate prints the fit, exits 1 and names the
likely cause (a declared model or hardware that cannot have served the
run, too few levels, levels at one load or in lockstep). --force writes it
anyway, the error in the file, and simulate --calibration repeats it.`,
		Example: `  tokbench bench --url http://localhost:8080 --api auto --hardware local --concurrency 1,2 --out run
  tokbench calibrate run --out cal.json
  tokbench simulate --calibration cal.json --concurrency 4,8`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usagef("calibrate: want one run directory, got %d", len(args))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if out == "" {
				return usagef("--out: required (the calibration file to write)")
			}
			if format != "table" && format != "json" {
				return usagef("--format: unknown %q (known: table, json)", format)
			}
			if maxBatch < 0 || maxBatched < 0 {
				return usagef("--max-batch and --max-batched-tokens must not be negative")
			}
			if !(maxErrorPct > 0) {
				return usagef("--max-rms-error: want a positive percentage, got %g", maxErrorPct)
			}
			dir := args[0]
			s, err := results.ReadSummary(dir)
			if err != nil {
				return usagef("%s: %v", dir, err)
			}
			run, err := results.ReadRun(dir)
			if err != nil && !errors.Is(err, os.ErrNotExist) {
				return usagef("%s: %v", filepath.Join(dir, results.RunFile), err)
			}
			lockstep := false
			if l, ok := run.Config["load"].(map[string]any); ok {
				lockstep, _ = l["lockstep"].(bool)
			}
			f, err := calibrate.FromRun(cmd.Context(), dir, s, run.Meta, calibrate.Options{
				MaxBatch: maxBatch, MaxBatchedTokens: maxBatched, MaxRMSError: maxErrorPct / 100, Lockstep: lockstep,
			})
			fe, refused := errors.AsType[*calibrate.FitError](err)
			if ie, ok := errors.AsType[*calibrate.InputError](err); ok {
				return usagef("%s", ie.Msg)
			} else if err != nil && !refused {
				return err
			}
			written := ""
			if !refused || force {
				if err := f.Write(out); err != nil {
					return fmt.Errorf("--out: %w", err)
				}
				written = out
			}
			if format == "json" {
				enc := json.NewEncoder(env.Stdout)
				enc.SetIndent("", "  ")
				err = enc.Encode(f)
			} else {
				err = report.CalibrationText(env.Stdout, f, written)
			}
			if err != nil {
				return err
			}
			if refused && !force {
				return fmt.Errorf("calibrate: %s; %s not written (--force writes it anyway)", fe, out)
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&out, "out", "", "the calibration file to write (JSON)")
	fl.IntVar(&maxBatch, "max-batch", 0, "most sequences the server runs at once (default: the run's llama.cpp slots when it said, else the simulator's 256)")
	fl.IntVar(&maxBatched, "max-batched-tokens", 0, "the server's tokens per step (default: the simulator's 8192)")
	fl.StringVar(&format, "format", "table", "output: table or json")
	fl.Float64Var(&maxErrorPct, "max-rms-error", 100*calibrate.DefaultMaxRMSError, "percent: refuse a fit whose rms error over the levels' decode TPS and TTFT is larger")
	fl.BoolVar(&force, "force", false, "write a fit beyond --max-rms-error anyway, its error in the file")
	return cmd
}

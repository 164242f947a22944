package cli

import (
	"encoding/json"
	"errors"
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
simulate --calibration and serve --calibration.`,
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
			dir := args[0]
			s, err := results.ReadSummary(dir)
			if err != nil {
				return usagef("%s: %v", dir, err)
			}
			run, err := results.ReadRun(dir)
			if err != nil && !errors.Is(err, os.ErrNotExist) {
				return usagef("%s: %v", filepath.Join(dir, results.RunFile), err)
			}
			f, err := calibrate.FromRun(cmd.Context(), dir, s, run.Meta, calibrate.Options{MaxBatch: maxBatch, MaxBatchedTokens: maxBatched})
			if ie, ok := errors.AsType[*calibrate.InputError](err); ok {
				return usagef("%s", ie.Msg)
			} else if err != nil {
				return err
			}
			if err := f.Write(out); err != nil {
				return usagef("--out: %v", err)
			}
			if format == "json" {
				enc := json.NewEncoder(env.Stdout)
				enc.SetIndent("", "  ")
				return enc.Encode(f)
			}
			return report.CalibrationText(env.Stdout, f, out)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&out, "out", "", "the calibration file to write (JSON)")
	fl.IntVar(&maxBatch, "max-batch", 0, "most sequences the server runs at once (default: the run's llama.cpp slots when it said, else the simulator's 256)")
	fl.IntVar(&maxBatched, "max-batched-tokens", 0, "the server's tokens per step (default: the simulator's 8192)")
	fl.StringVar(&format, "format", "table", "output: table or json")
	return cmd
}

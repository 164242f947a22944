package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/tokbench/tokbench/calibrate"
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
			writeCalibration(env, f, out)
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&out, "out", "", "the calibration file to write (JSON)")
	fl.IntVar(&maxBatch, "max-batch", 0, "most sequences the server runs at once (default: the run's llama.cpp slots when it said, else the simulator's 256)")
	fl.IntVar(&maxBatched, "max-batched-tokens", 0, "the server's tokens per step (default: the simulator's 8192)")
	fl.StringVar(&format, "format", "table", "output: table or json")
	return cmd
}

// writeCalibration prints the fitted terms and each level's fit.
func writeCalibration(env Env, f *calibrate.File, out string) {
	c := f.Cost
	w := env.Stdout
	fmt.Fprintf(w, "calibrated %s from %s\n\n", f.Deployment, f.Run)
	fmt.Fprintf(w, "  memory efficiency (MBU)   %.1f%% of %.1f GB/s, reading %.1f MB a step and %.0f B per token of context\n",
		100*c.MBU, c.BandwidthBytesPerSec/1e9, c.WeightBytes/1e6, c.KVBytesPerToken)
	fmt.Fprintf(w, "  prefill (and decode) rate %.0f tokens/s of compute\n", c.PrefillTPS)
	fmt.Fprintf(w, "  overhead                  %.3f ms a step, %.3f ms a sequence\n", c.StepOverheadMs, c.SeqOverheadMs)
	if f.MaxBatch > 0 {
		fmt.Fprintf(w, "  engine                    at most %d sequences at once\n", f.MaxBatch)
	}
	fmt.Fprintf(w, "\n  %-6s %6s %6s  %-30s  %-30s\n", "load", "in", "out", "decode TPS p50 (measured → sim)", "TTFT p50 ms (measured → sim)")
	for _, p := range f.Fit.Levels {
		fmt.Fprintf(w, "  c=%-4d %6d %6d  %9.2f → %-9.2f (%+5.1f%%)  %9.1f → %-9.1f (%+5.1f%%)\n", p.Concurrency, p.InputTokens, p.OutputTokens,
			p.DecodeTPS.Measured, p.DecodeTPS.Simulated, p.DecodeTPS.ErrorPct, p.TTFTMs.Measured, p.TTFTMs.Simulated, p.TTFTMs.ErrorPct)
	}
	fmt.Fprintf(w, "\n  rms error %.1f%%; %s\nwrote %s (simulate --calibration, serve --calibration)\n", 100*f.Fit.RMSError, f.Fit.Note, out)
}

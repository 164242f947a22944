package cli

import (
	"fmt"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/tokbench/tokbench/report"
)

func newReportCmd(env Env) *cobra.Command {
	return &cobra.Command{
		Use:   "report DIR",
		Short: "Write DIR/report.html: one self-contained page with charts of a saved run",
		Long: `report reads a run directory (summary.json, and run.json and requests.jsonl
when present) and writes report.html into it: one self-contained file with
inline SVG charts (degradation curve with the physical ceiling when the
hardware is known, TTFT against load, per-level histograms, a timeline of
tokens/s and requests in flight for the level with the most requests), the
SLO verdicts with the capacity and knee, the run's metadata, warnings and
errors. It loads nothing from the network and has no script, so it opens
offline and prints.`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usagef("report: want one run directory, got %d arguments", len(args))
			}
			return nil
		},
		RunE: func(_ *cobra.Command, args []string) error {
			return runReport(env, args[0])
		},
	}
}

func runReport(env Env, dir string) error {
	if _, err := report.ReadRun(dir); err != nil {
		return usagef("%v", err)
	}
	if err := report.WriteHTMLFile(dir); err != nil {
		return err
	}
	fmt.Fprintf(env.Stdout, "wrote %s\n", filepath.Join(dir, "report.html"))
	return nil
}

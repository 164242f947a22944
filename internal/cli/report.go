package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/tokbench/tokbench/report"
	"github.com/tokbench/tokbench/results"
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
	if _, err := readPage(dir); err != nil {
		return usagef("%v", err)
	}
	if err := writeReportHTML(dir); err != nil {
		return err
	}
	fmt.Fprintf(env.Stdout, "wrote %s\n", filepath.Join(dir, "report.html"))
	return nil
}

// writeReportHTML renders dir/report.html from the run directory's files.
func writeReportHTML(dir string) error {
	page, err := readPage(dir)
	if err != nil {
		return err
	}
	var b bytes.Buffer
	if err := report.WriteHTML(&b, page); err != nil {
		return err
	}
	path := filepath.Join(dir, "report.html")
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b.Bytes(), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// readPage reads what a report shows from a run directory: summary.json is
// required; run.json and requests.jsonl are used when present.
func readPage(dir string) (report.Page, error) {
	var p report.Page
	s, err := results.ReadSummary(dir)
	if errors.Is(err, os.ErrNotExist) {
		// The run died before its summary (kill -9): rebuild it from the
		// records, and keep it, so that compare and merge can read the run.
		if s, err = results.Rebuild(dir); err == nil {
			if werr := results.WriteSummary(dir, s); werr != nil {
				p.Warnings = append(p.Warnings, "the rebuilt summary could not be written: "+werr.Error())
			}
		}
	}
	if err != nil {
		return p, fmt.Errorf("%s: %w", dir, err)
	}
	p.Summary = s
	if b, err := os.ReadFile(filepath.Join(dir, results.RunFile)); err == nil {
		var run results.Run
		if err := json.Unmarshal(b, &run); err != nil {
			return p, fmt.Errorf("%s: %w", filepath.Join(dir, results.RunFile), err)
		}
		p.Run = &run
	} else if !errors.Is(err, os.ErrNotExist) {
		return p, err
	}
	recs, warns, err := results.ReadRecords(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		p.Warnings = append(p.Warnings, "no "+results.RequestsFile+": histograms need the per-request records")
	case err != nil:
		return p, err
	}
	p.Records = recs
	p.Warnings = append(p.Warnings, warns...)
	return p, nil
}

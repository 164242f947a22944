package report

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"

	"github.com/tokbench/tokbench/results"
)

// SampleRecords is how many records of a level a report reads; a longer
// level's histograms show a uniform sample of that many.
const SampleRecords = 20_000

// WriteHTMLFile renders dir/report.html from the run directory's files,
// atomically (a temporary file renamed into place).
func WriteHTMLFile(dir string) error {
	page, err := ReadRun(dir)
	if err != nil {
		return err
	}
	var b bytes.Buffer
	if err := WriteHTML(&b, page); err != nil {
		return err
	}
	return results.WriteFile(filepath.Join(dir, "report.html"), b.Bytes())
}

// ReadRun reads what a report shows from a run directory: summary.json is
// required (rebuilt from requests.jsonl, and kept, when a killed run left
// none); run.json and requests.jsonl are used when present.
func ReadRun(dir string) (Page, error) {
	var p Page
	s, err := results.ReadSummary(dir)
	if errors.Is(err, os.ErrNotExist) {
		// The run died before its summary (kill -9): rebuild it from the
		// records, and keep it, so that compare and merge can read the run.
		if s, err = results.Rebuild(dir); err == nil && len(s.Levels) == 0 {
			return p, fmt.Errorf("%s holds no run: no %s, and no measured request in %s", dir, results.SummaryFile, results.RequestsFile)
		}
		if err == nil {
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
	sample, err := results.ReadSample(dir, SampleRecords)
	switch {
	case errors.Is(err, os.ErrNotExist):
		p.Warnings = append(p.Warnings, "no "+results.RequestsFile+": histograms need the per-request records")
		return p, nil
	case err != nil:
		return p, err
	}
	p.Records = sample.Records
	p.Warnings = append(p.Warnings, sample.Warnings...)
	for _, l := range slices.Sorted(maps.Keys(sample.Total)) {
		if n := sample.Total[l]; sample.Sampled(l) {
			p.Total = sample.Total
			p.Warnings = append(p.Warnings, fmt.Sprintf("level %d has %d requests: its histograms show a uniform sample of %d, its statistics are from all of them (summary.json)", l, n, SampleRecords))
		}
	}
	return p, nil
}

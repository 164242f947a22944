package results

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"

	"github.com/tokbench/tokbench/metrics"
)

// ReadRun reads run.json from a run directory.
func ReadRun(dir string) (Run, error) {
	var r Run
	b, err := os.ReadFile(filepath.Join(dir, RunFile))
	if err != nil {
		return r, err
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return r, fmt.Errorf("%s: %w", filepath.Join(dir, RunFile), err)
	}
	return r, nil
}

// Rebuild summarizes a run from requests.jsonl (and run.json's target, when
// present), for a run that died before writing summary.json. Levels follow
// the records' level index; each level's wall time spans its records. The
// summary is marked interrupted and says it was rebuilt.
func Rebuild(dir string) (metrics.Summary, error) {
	recs, warnings, err := ReadRecords(dir)
	if err != nil {
		return metrics.Summary{}, err
	}
	s := metrics.Summary{Schema: metrics.Schema, Interrupted: true, Warnings: warnings}
	if run, err := ReadRun(dir); err == nil {
		s.Target = run.Target
	} else if !errors.Is(err, fs.ErrNotExist) {
		return s, err
	}
	byLevel := map[int][]metrics.Record{}
	for _, r := range recs {
		byLevel[r.Level] = append(byLevel[r.Level], r)
	}
	idx := make([]int, 0, len(byLevel))
	for i := range byLevel {
		idx = append(idx, i)
	}
	sort.Ints(idx)
	for _, i := range idx {
		rs := byLevel[i]
		// Offsets are from each level's start, which the records share.
		s.Levels = append(s.Levels, metrics.Summarize(rs[0].Load, rs, 0))
	}
	s.Warnings = append(s.Warnings, fmt.Sprintf("summary rebuilt from %d records in %s: the run ended before writing summary.json", len(recs), RequestsFile))
	return s, nil
}

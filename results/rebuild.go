package results

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"

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
	// One accumulator a level, so that a day-long run's records are
	// folded, not held.
	byLevel := map[int]*metrics.Accumulator{}
	n := 0
	warnings, err := EachRecord(dir, func(r *metrics.Record) {
		a := byLevel[r.Level]
		if a == nil {
			a = metrics.NewAccumulator(r.Load, nil)
			byLevel[r.Level] = a
		}
		a.Add(r)
		n++
	})
	if err != nil {
		return metrics.Summary{}, err
	}
	s := metrics.Summary{Schema: metrics.Schema, Interrupted: true, Warnings: warnings}
	if run, err := ReadRun(dir); err == nil {
		s.Target = run.Target
	} else if !errors.Is(err, fs.ErrNotExist) {
		return s, err
	}
	for _, i := range slices.Sorted(maps.Keys(byLevel)) {
		// Offsets are from each level's start, which the records share.
		s.Levels = append(s.Levels, byLevel[i].Level(0))
	}
	s.Warnings = append(s.Warnings, fmt.Sprintf("summary rebuilt from %d records in %s: the run ended before writing summary.json", n, RequestsFile))
	return s, nil
}

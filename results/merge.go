package results

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/tokbench/tokbench/metrics"
)

// Merged is the union of several shard runs. Warnings name what the union
// lacks: a shard's torn last line, a partial shard merged on request.
type Merged struct {
	Run      Run
	Records  []metrics.Record
	Summary  metrics.Summary
	Warnings []string
}

// MergeOptions tune Merge. The zero value refuses partial shards.
type MergeOptions struct {
	// Partial merges a shard whose requests.jsonl holds fewer records
	// than its summary.json counts, and flags each level it is short in.
	Partial bool
}

// ErrPartialShard is the error (wrapped) of a shard whose requests.jsonl
// holds fewer records than its summary.json counts: the file was cut or
// lost, and a merge of it would report a run that did not happen.
var ErrPartialShard = errors.New("partial shard")

// configKeysPerShard are the configuration entries that legitimately differ
// between the shards of one run: the shard itself, and the prompts' seed
// each shard draws when --seed is not given.
var configKeysPerShard = map[string]bool{"shard": true, "prompt_seed": true}

// Merge reads shard run directories and combines them into what one client
// would have recorded: per level, the union of the records, with each
// record's offset re-measured from the level's earliest start across shards
// (aligned by the records' wall-clock start), loads added up, and the
// summary computed from that union — percentiles of all records, never
// averages of percentiles. Runs whose configuration differs in anything but
// the shard index are refused, naming the field; so is a shard with fewer
// records than its summary counts, unless opt.Partial.
func Merge(dirs []string, opt MergeOptions) (Merged, error) {
	var m Merged
	if len(dirs) < 2 {
		return m, fmt.Errorf("merge needs at least two run directories")
	}
	var runs []Run
	for _, d := range dirs {
		r, err := ReadRun(d)
		if err != nil {
			return m, fmt.Errorf("%s: %w", d, err)
		}
		runs = append(runs, r)
	}
	for i := 1; i < len(runs); i++ {
		if err := sameRun(runs[0], runs[i]); err != nil {
			return m, fmt.Errorf("%s and %s are not shards of one run: %w", dirs[0], dirs[i], err)
		}
	}
	type level struct {
		load  metrics.Load
		start time.Time
		recs  []metrics.Record
	}
	levels := map[int]*level{}
	interrupted := false
	short := map[int][]string{} // by level: the shards short in it
	for _, d := range dirs {
		recs, warnings, err := ReadRecords(d)
		if err != nil {
			return m, fmt.Errorf("%s: %w", d, err)
		}
		m.Warnings = append(m.Warnings, warnings...)
		s, err := ReadSummary(d)
		if err != nil || s.Interrupted {
			interrupted = true
		}
		if err == nil {
			held := map[int]int{}
			for i := range recs {
				held[recs[i].Level]++
			}
			for i := range s.Levels {
				lv := &s.Levels[i]
				if held[i] >= lv.Requests.Sent {
					continue
				}
				what := fmt.Sprintf("%s holds %d of the %d requests its %s counts at %s", d, held[i], lv.Requests.Sent, SummaryFile, lv.Load)
				if !opt.Partial {
					return m, fmt.Errorf("%w: %s (its %s was cut or lost); --partial merges what it holds", ErrPartialShard, what, RequestsFile)
				}
				short[i] = append(short[i], what)
				m.Warnings = append(m.Warnings, "partial shard merged: "+what)
			}
		}
		// One shard's part of a level: its load and its level start.
		parts := map[int]metrics.Load{}
		for _, r := range recs {
			lv := levels[r.Level]
			if lv == nil {
				lv = &level{}
				levels[r.Level] = lv
			}
			if _, seen := parts[r.Level]; !seen {
				parts[r.Level] = r.Load
				lv.load.Mode, lv.load.Arrival = r.Load.Mode, r.Load.Arrival
				lv.load.Concurrency += r.Load.Concurrency
				lv.load.RateRPS += r.Load.RateRPS
				lv.load.InputTokens = r.Load.InputTokens
			}
			st := r.Start.Add(-time.Duration(r.OffsetMs * float64(time.Millisecond)))
			if lv.start.IsZero() || st.Before(lv.start) {
				lv.start = st
			}
			lv.recs = append(lv.recs, r)
		}
	}
	idx := make([]int, 0, len(levels))
	for i := range levels {
		idx = append(idx, i)
	}
	sort.Ints(idx)
	m.Run = runs[0]
	m.Run.Config = cloneConfig(runs[0].Config)
	delete(m.Run.Config, "shard")
	delete(m.Run.Config, "prompt_seed")
	m.Run.Config["merged_from"] = len(dirs)
	m.Summary = metrics.Summary{Schema: metrics.Schema, Target: runs[0].Target, Interrupted: interrupted}
	id := 0
	for _, i := range idx {
		lv := levels[i]
		sort.SliceStable(lv.recs, func(a, b int) bool { return lv.recs[a].Start.Before(lv.recs[b].Start) })
		for k := range lv.recs {
			r := &lv.recs[k]
			id++
			r.ID = id
			r.OffsetMs = float64(r.Start.Sub(lv.start)) / float64(time.Millisecond)
			r.Load = lv.load
		}
		m.Records = append(m.Records, lv.recs...)
		sum := metrics.Summarize(lv.load, lv.recs, 0)
		for _, w := range short[i] {
			sum.Warnings = append(sum.Warnings, "partial shard merged (--partial): "+w+"; this level lacks its missing requests")
		}
		m.Summary.Levels = append(m.Summary.Levels, sum)
	}
	if len(short) > 0 {
		m.Run.Config["merged_partial"] = true
	}
	return m, nil
}

// sameRun compares two shards' configurations.
func sameRun(a, b Run) error {
	if a.Target != b.Target {
		return fmt.Errorf("target differs (%+v vs %+v)", a.Target, b.Target)
	}
	for k := range union(a.Meta, b.Meta) {
		if a.Meta[k] != b.Meta[k] {
			return fmt.Errorf("field meta.%s differs (%q vs %q)", k, a.Meta[k], b.Meta[k])
		}
	}
	keys := map[string]bool{}
	for k := range a.Config {
		keys[k] = true
	}
	for k := range b.Config {
		keys[k] = true
	}
	for k := range keys {
		if configKeysPerShard[k] {
			continue
		}
		ja, _ := json.Marshal(a.Config[k])
		jb, _ := json.Marshal(b.Config[k])
		if string(ja) != string(jb) {
			return fmt.Errorf("field config.%s differs (%s vs %s)", k, ja, jb)
		}
	}
	sa, _ := json.Marshal(a.Config["shard"])
	sb, _ := json.Marshal(b.Config["shard"])
	if string(sa) == string(sb) {
		return fmt.Errorf("both are shard %s", sa)
	}
	return nil
}

func union(a, b map[string]string) map[string]bool {
	u := map[string]bool{}
	for k := range a {
		u[k] = true
	}
	for k := range b {
		u[k] = true
	}
	return u
}

func cloneConfig(c map[string]any) map[string]any {
	out := make(map[string]any, len(c)+1)
	for k, v := range c {
		out[k] = v
	}
	return out
}

// WriteMerged writes a merged run to dir.
func WriteMerged(dir string, m Merged) error {
	w, err := Create(dir)
	if err != nil {
		return err
	}
	defer w.Close()
	if err := w.WriteRun(m.Run); err != nil {
		return err
	}
	for _, r := range m.Records {
		if err := w.Append(r); err != nil {
			return err
		}
	}
	return w.WriteSummary(m.Summary)
}

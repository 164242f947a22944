// Package results writes and reads the on-disk run format:
//
//	run.json        what was run: tool version, target, metadata, configuration
//	requests.jsonl  one JSON line per finished request, appended as it finishes
//	summary.json    the aggregate (metrics.Summary)
//
// requests.jsonl is written one whole line per write call on a file opened
// for appending, so the file stays valid line by line if the process dies at
// any moment. summary.json and run.json are replaced atomically (write to a
// temporary file, then rename).
package results

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/tokbench/tokbench/metrics"
)

// File names inside a run directory.
const (
	RunFile      = "run.json"
	RequestsFile = "requests.jsonl"
	SummaryFile  = "summary.json"
)

// RunSchema names the run.json format.
const RunSchema = "tokbench.run/v1"

// Run is run.json.
type Run struct {
	Schema    string         `json:"schema"`
	Tool      string         `json:"tool"`
	Version   string         `json:"version"`
	StartedAt time.Time      `json:"started_at"`
	Target    metrics.Target `json:"target"`
	// Meta is the like-for-like metadata: hardware, quant, engine, context, label…
	Meta map[string]string `json:"meta,omitempty"`
	// Config is the full effective configuration, secrets removed.
	Config map[string]any `json:"config"`
	// Transport is what the run measured with, written when it ends.
	Transport *Transport `json:"transport,omitempty"`
}

// Transport is what a run measured with: Client is "tokbench" (its own
// HTTP/1.1 connections, kernel receive stamps) or "net/http" (HTTP/2, a
// proxy); HTTP and TLS are the protocol versions the answers came over
// ("HTTP/1.1", "TLS 1.3"; several joined by commas); Connections is
// "warm" (opened before each level) or "cold" (opened by the requests,
// set-up in TTFT).
type Transport struct {
	Client      string `json:"client"`
	HTTP        string `json:"http,omitempty"`
	TLS         string `json:"tls,omitempty"`
	Connections string `json:"connections"`
}

// Writer writes one run directory. Its methods are safe for concurrent use.
type Writer struct {
	dir string
	mu  sync.Mutex
	req *os.File
	buf []byte
}

// Create makes dir (and parents) and opens requests.jsonl, failing early when
// the directory is not writable, before any load is sent.
func Create(dir string) (*Writer, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create output directory %s: %w", dir, err)
	}
	f, err := os.OpenFile(filepath.Join(dir, RequestsFile), os.O_CREATE|os.O_WRONLY|os.O_TRUNC|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", filepath.Join(dir, RequestsFile), err)
	}
	return &Writer{dir: dir, req: f}, nil
}

// Dir is the run directory.
func (w *Writer) Dir() string { return w.dir }

// WriteRun writes run.json.
func (w *Writer) WriteRun(r Run) error {
	if r.Schema == "" {
		r.Schema = RunSchema
	}
	return writeJSON(filepath.Join(w.dir, RunFile), r)
}

// Append writes one record as one line with a single write.
func (w *Writer) Append(rec metrics.Record) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	b, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("encode record %d: %w", rec.ID, err)
	}
	w.buf = append(append(w.buf[:0], b...), '\n')
	if _, err := w.req.Write(w.buf); err != nil {
		return fmt.Errorf("append %s: %w", RequestsFile, err)
	}
	return nil
}

// RenumberLevels rewrites requests.jsonl with every record's level index
// old replaced by newIndex[old] (see metrics.SortLevels), so the records
// keep pointing at their levels once summary.json stores the levels in
// another order. Records keep coming after it are appended as before.
func (w *Writer) RenumberLevels(newIndex []int) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	path := filepath.Join(w.dir, RequestsFile)
	if err := w.req.Sync(); err != nil {
		return fmt.Errorf("renumber %s: %w", RequestsFile, err)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("renumber %s: %w", RequestsFile, err)
	}
	var out []byte
	for line := range bytes.Lines(raw) {
		var rec metrics.Record
		if json.Unmarshal(line, &rec) != nil || rec.Level < 0 || rec.Level >= len(newIndex) {
			out = append(out, line...) // kept as it was: a torn last line, say
			continue
		}
		rec.Level = newIndex[rec.Level]
		b, err := json.Marshal(rec)
		if err != nil {
			return fmt.Errorf("renumber %s: %w", RequestsFile, err)
		}
		out = append(append(out, b...), '\n')
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, out, 0o644); err != nil {
		return fmt.Errorf("renumber %s: %w", RequestsFile, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("renumber %s: %w", RequestsFile, err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("renumber %s: %w", RequestsFile, err)
	}
	w.req.Close()
	w.req = f
	return nil
}

// WriteSummary writes dir's summary.json (a summary rebuilt from the
// records of a run that died before writing its own).
func WriteSummary(dir string, s metrics.Summary) error {
	return writeJSON(filepath.Join(dir, SummaryFile), s)
}

// WriteSummary writes summary.json.
func (w *Writer) WriteSummary(s metrics.Summary) error {
	return writeJSON(filepath.Join(w.dir, SummaryFile), s)
}

// Close closes requests.jsonl after syncing it.
func (w *Writer) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	err := w.req.Sync()
	if cerr := w.req.Close(); err == nil {
		err = cerr
	}
	return err
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encode %s: %w", filepath.Base(path), err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		os.Remove(tmp) // no empty .tmp left behind (a full disk)
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// ReadRecords reads requests.jsonl from a run directory. A torn last line
// (the process died mid-write) is skipped and reported in the returned
// warning; any other bad line is an error naming the line.
func ReadRecords(dir string) ([]metrics.Record, []string, error) {
	path := filepath.Join(dir, RequestsFile)
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	return readRecords(f, path)
}

func readRecords(r io.Reader, path string) ([]metrics.Record, []string, error) {
	var recs []metrics.Record
	warnings, err := eachRecord(r, path, func(rec *metrics.Record) { recs = append(recs, *rec) })
	if err != nil {
		return nil, nil, err
	}
	return recs, warnings, nil
}

// EachRecord reads requests.jsonl from a run directory one record at a
// time, as ReadRecords does, without holding them: f is given each.
func EachRecord(dir string, f func(*metrics.Record)) ([]string, error) {
	path := filepath.Join(dir, RequestsFile)
	file, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer file.Close()
	return eachRecord(file, path, f)
}

func eachRecord(r io.Reader, path string, f func(*metrics.Record)) ([]string, error) {
	br := bufio.NewReaderSize(r, 1<<20)
	var warnings []string
	for line := 1; ; line++ {
		b, err := br.ReadBytes('\n')
		if len(b) > 0 {
			complete := b[len(b)-1] == '\n'
			var rec metrics.Record
			if jerr := json.Unmarshal(b, &rec); jerr != nil {
				if !complete {
					warnings = append(warnings, fmt.Sprintf("%s:%d: incomplete last line skipped", path, line))
					break
				}
				return nil, fmt.Errorf("%s:%d: %w", path, line, jerr)
			}
			f(&rec)
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", path, err)
		}
	}
	return warnings, nil
}

// Sample is a uniform sample of a run's records, at most a given number
// per level (reservoir sampling, with a fixed seed): Records in file
// order within each level, Total the records each level has in all.
type Sample struct {
	Records  []metrics.Record
	Total    map[int]int
	Warnings []string
}

// Sampled reports whether level's records are a sample rather than all.
func (s *Sample) Sampled(level int) bool {
	n := 0
	for i := range s.Records {
		if s.Records[i].Level == level {
			n++
		}
	}
	return n < s.Total[level]
}

// ReadSample reads requests.jsonl keeping every record of a level with at
// most perLevel of them, and a uniform sample of perLevel of a longer
// one, so that reading a day-long run holds bounded memory.
func ReadSample(dir string, perLevel int) (*Sample, error) {
	rng := rand.New(rand.NewPCG(1, 2))
	kept := map[int][]metrics.Record{}
	out := &Sample{Total: map[int]int{}}
	var order []int
	warnings, err := EachRecord(dir, func(rec *metrics.Record) {
		l := rec.Level
		n := out.Total[l]
		out.Total[l] = n + 1
		switch {
		case n == 0:
			order = append(order, l)
			kept[l] = append(kept[l], *rec)
		case n < perLevel:
			kept[l] = append(kept[l], *rec)
		default:
			if j := rng.IntN(n + 1); j < perLevel {
				kept[l][j] = *rec
			}
		}
	})
	if err != nil {
		return nil, err
	}
	out.Warnings = warnings
	for _, l := range order {
		rs := kept[l]
		if len(rs) < out.Total[l] {
			slices.SortFunc(rs, func(a, b metrics.Record) int { return cmp.Compare(a.ID, b.ID) })
		}
		out.Records = append(out.Records, rs...)
	}
	return out, nil
}

// ReadSummary reads summary.json from a run directory.
func ReadSummary(dir string) (metrics.Summary, error) {
	var s metrics.Summary
	b, err := os.ReadFile(filepath.Join(dir, SummaryFile))
	if err != nil {
		return s, err
	}
	if err := json.Unmarshal(b, &s); err != nil {
		return s, fmt.Errorf("%s: %w", filepath.Join(dir, SummaryFile), err)
	}
	return s, nil
}

// ConfigMap turns a typed configuration into run.json's config object,
// through its JSON form, so runs of any origin (bench, merged shards,
// imports) read back the same way.
func ConfigMap(v any) map[string]any {
	b, err := json.Marshal(v)
	if err != nil {
		return map[string]any{"error": err.Error()}
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return map[string]any{"error": err.Error()}
	}
	return m
}

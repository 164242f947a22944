// Package results writes and reads the on-disk run format:
//
//	run.json        what was run: tool version, target, metadata, configuration
//	requests.jsonl  one JSON line per finished request, appended as it finishes
//	summary.json    the aggregate (metrics.Summary)
//
// requests.jsonl is written one whole line per write call on a file opened
// for appending, so the file stays valid line by line if the process dies at
// any moment. A writer told to rotate (Writer.Rotate: tokbench proxy on
// live traffic) renames a full requests.jsonl to requests-000001.jsonl,
// requests-000002.jsonl, … and starts a new one; readers read those in
// order, then requests.jsonl. summary.json and run.json are replaced atomically (write to a
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
	Config Config `json:"config"`
	// Transport is what the run measured with, written when it ends.
	Transport *Transport `json:"transport,omitempty"`
}

// Config is run.json's configuration object. Its numbers are json.Number,
// read and written as their digits: a float64 would round a 64-bit seed
// (15273817378005027001 read back as …027000), and a run could not be
// repeated from its own record.
type Config map[string]any

// UnmarshalJSON reads the object with its numbers as json.Number.
func (c *Config) UnmarshalJSON(b []byte) error {
	m, err := decodeNumbers(b)
	if err != nil {
		return err
	}
	*c = m
	return nil
}

func decodeNumbers(b []byte) (map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return nil, err
	}
	return m, nil
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

	rotateBytes int64         // start a new requests.jsonl past this size (0: never)
	rotateEvery time.Duration // or once it is this old (0: never)
	size        int64         // of the requests.jsonl being written
	opened      time.Time     // when it was started
	segments    int           // rotated files so far
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
	return &Writer{dir: dir, req: f, opened: time.Now()}, nil
}

// Rotate makes Append start a new requests.jsonl once the one being
// written holds maxBytes or more (0: no bound on size), or was started
// every ago or longer (0: no bound on age). The full file is renamed
// requests-NNNNNN.jsonl, numbered from 1.
func (w *Writer) Rotate(maxBytes int64, every time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.rotateBytes, w.rotateEvery = maxBytes, every
}

// segmentName is the name of the n-th rotated requests file.
func segmentName(n int) string { return fmt.Sprintf("requests-%06d.jsonl", n) }

// rotate renames the full requests.jsonl and opens a new one. w.mu is held.
func (w *Writer) rotate() error {
	if err := w.req.Close(); err != nil {
		return fmt.Errorf("rotate %s: %w", RequestsFile, err)
	}
	cur := filepath.Join(w.dir, RequestsFile)
	for {
		w.segments++
		next := filepath.Join(w.dir, segmentName(w.segments))
		if _, err := os.Stat(next); err == nil {
			continue // a segment of an earlier process: never written over
		}
		if err := os.Rename(cur, next); err != nil {
			return fmt.Errorf("rotate %s: %w", RequestsFile, err)
		}
		break
	}
	f, err := os.OpenFile(cur, os.O_CREATE|os.O_WRONLY|os.O_TRUNC|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("rotate %s: %w", RequestsFile, err)
	}
	w.req, w.size, w.opened = f, 0, time.Now()
	return nil
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
	full := w.size > 0 && (w.rotateBytes > 0 && w.size+int64(len(w.buf)) > w.rotateBytes ||
		w.rotateEvery > 0 && time.Since(w.opened) >= w.rotateEvery)
	if full {
		if err := w.rotate(); err != nil {
			return err
		}
	}
	n, err := w.req.Write(w.buf)
	w.size += int64(n)
	if err != nil {
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
	if err := WriteFile(path, out); err != nil {
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
	return WriteFile(path, append(b, '\n'))
}

// WriteFile writes path whole or not at all: to path.tmp, then renamed
// over path. On failure (a full disk) path is as it was and no .tmp is
// left behind; the error names path.
func WriteFile(path string, data []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		os.Remove(tmp)
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
	var recs []metrics.Record
	warnings, err := EachRecord(dir, func(rec *metrics.Record) { recs = append(recs, *rec) })
	if err != nil {
		return nil, nil, err
	}
	return recs, warnings, nil
}

// RecordFiles are the files holding a run directory's records, in the
// order they were written: rotated segments, then requests.jsonl. It
// fails as os.Open does when there are none.
func RecordFiles(dir string) ([]string, error) {
	segs, err := filepath.Glob(filepath.Join(dir, "requests-[0-9]*.jsonl"))
	if err != nil {
		return nil, err
	}
	slices.Sort(segs) // the numbers are zero-padded
	cur := filepath.Join(dir, RequestsFile)
	if _, err := os.Stat(cur); err != nil {
		if len(segs) == 0 {
			return nil, err
		}
		return segs, nil // the current file was lost: the segments stand
	}
	return append(segs, cur), nil
}

// EachRecord reads requests.jsonl from a run directory one record at a
// time, as ReadRecords does, without holding them: f is given each.
func EachRecord(dir string, f func(*metrics.Record)) ([]string, error) {
	paths, err := RecordFiles(dir)
	if err != nil {
		return nil, err
	}
	var warnings []string
	for _, path := range paths {
		w, err := eachFileRecord(path, f)
		if err != nil {
			return nil, err
		}
		warnings = append(warnings, w...)
	}
	return warnings, nil
}

func eachFileRecord(path string, f func(*metrics.Record)) ([]string, error) {
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
// imports) read back the same way; numbers stay exact (Config).
func ConfigMap(v any) Config {
	b, err := json.Marshal(v)
	if err != nil {
		return Config{"error": err.Error()}
	}
	m, err := decodeNumbers(b)
	if err != nil {
		return Config{"error": err.Error()}
	}
	return m
}

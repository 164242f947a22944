package results

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tokbench/tokbench/metrics"
)

func TestWriterAndTornLastLine(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	w, err := Create(dir)
	if err != nil {
		t.Fatal(err)
	}
	load := metrics.Load{Mode: "concurrency", Concurrency: 2}
	for i := 0; i < 5; i++ {
		rec := metrics.Record{ID: i, Level: i / 3, Load: load, OK: true, TTFTMs: float64(10 * (i + 1)), OutputTokens: 4,
			ChunkMs: []float64{float64(10 * (i + 1)), 50}, ChunkTokens: []int{1, 3}, DoneMs: 60}
		if err := w.Append(rec); err != nil {
			t.Fatal(err)
		}
	}
	w.Close()
	// A process killed mid-write leaves half a line.
	f, _ := os.OpenFile(filepath.Join(dir, RequestsFile), os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(`{"id":5,"level":1,"ok":tr`)
	f.Close()
	recs, warns, err := ReadRecords(dir)
	if err != nil || len(recs) != 5 || len(warns) != 1 || !strings.Contains(warns[0], ":6: incomplete last line") {
		t.Fatalf("ReadRecords: %d records, warnings %v, %v", len(recs), warns, err)
	}
	s, err := Rebuild(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !s.Interrupted || len(s.Levels) != 2 || s.Levels[0].Requests.Completed != 3 || s.Levels[1].Requests.Completed != 2 {
		t.Fatalf("rebuilt = %+v", s.Levels)
	}
	if s.Levels[0].TTFT.P50 != 20 || s.Levels[0].Load != load {
		t.Errorf("level 0 TTFT p50 %g load %+v", s.Levels[0].TTFT.P50, s.Levels[0].Load)
	}
	// A bad line that is not the last is an error naming the line.
	os.WriteFile(filepath.Join(dir, RequestsFile), []byte("{\"id\":1}\nnot json\n{\"id\":2}\n"), 0o644)
	if _, _, err := ReadRecords(dir); err == nil || !strings.Contains(err.Error(), ":2:") {
		t.Errorf("bad middle line: %v", err)
	}
}

func TestCreateUnwritable(t *testing.T) {
	file := filepath.Join(t.TempDir(), "f")
	os.WriteFile(file, nil, 0o644)
	if _, err := Create(filepath.Join(file, "run")); err == nil {
		t.Error("Create under a file succeeded")
	}
}

func TestReadSample(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	w, err := Create(dir)
	if err != nil {
		t.Fatal(err)
	}
	load := metrics.Load{Mode: "concurrency", Concurrency: 2}
	id := 0
	for level, n := range []int{10, 5000} {
		for range n {
			if err := w.Append(metrics.Record{ID: id, Level: level, Load: load, OK: true, TTFTMs: float64(id)}); err != nil {
				t.Fatal(err)
			}
			id++
		}
	}
	w.Close()
	s, err := ReadSample(dir, 100)
	if err != nil {
		t.Fatal(err)
	}
	if s.Total[0] != 10 || s.Total[1] != 5000 || len(s.Records) != 110 || s.Sampled(0) || !s.Sampled(1) {
		t.Fatalf("totals %v, %d records, sampled %v %v", s.Total, len(s.Records), s.Sampled(0), s.Sampled(1))
	}
	sum := 0.0
	for i, r := range s.Records[10:] {
		if r.Level != 1 || i > 0 && r.ID <= s.Records[10+i-1].ID {
			t.Fatalf("record %d: level %d id %d, not level 1 in order", i, r.Level, r.ID)
		}
		sum += r.TTFTMs
	}
	// Uniform over ids 10..5009: the mean of 100 draws is within 15% of
	// the middle (its standard error is 5.8%).
	if mean := sum / 100; mean < 0.85*2510 || mean > 1.15*2510 {
		t.Fatalf("sample mean id %g, want about 2510", mean)
	}
}

// TestRotate: a writer told to rotate starts a new requests.jsonl past its
// size bound or its age, numbering the full ones; every reader reads them
// all, in order, then the current one.
func TestRotate(t *testing.T) {
	dir := t.TempDir()
	w, err := Create(dir)
	if err != nil {
		t.Fatal(err)
	}
	line, _ := json.Marshal(metrics.Record{ID: 1})
	w.Rotate(int64(3*(len(line)+1)), 0) // three records of ID < 10 per file
	for id := 1; id <= 8; id++ {
		if err := w.Append(metrics.Record{ID: id}); err != nil {
			t.Fatal(err)
		}
	}
	w.Rotate(0, time.Nanosecond) // from now on, one record per file
	for id := 9; id <= 10; id++ {
		if err := w.Append(metrics.Record{ID: id}); err != nil {
			t.Fatal(err)
		}
	}
	w.Close()
	files, err := RecordFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range files {
		names = append(names, filepath.Base(f))
	}
	want := []string{"requests-000001.jsonl", "requests-000002.jsonl", "requests-000003.jsonl", "requests-000004.jsonl", RequestsFile}
	if !slices.Equal(names, want) {
		t.Fatalf("files %v, want %v", names, want)
	}
	recs, _, err := ReadRecords(dir)
	if err != nil {
		t.Fatal(err)
	}
	var ids []int
	for _, r := range recs {
		ids = append(ids, r.ID)
	}
	if !slices.Equal(ids, []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}) {
		t.Errorf("records %v, want 1…10 in order", ids)
	}
	if _, _, err := ReadRecords(t.TempDir()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("an empty directory: %v, want not-exist", err)
	}
}

package results

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tokbench/tokbench/metrics"
)

// writeShard writes shard i of 2 of a c=2-per-shard level of n requests,
// TTFT 10, 20, … ms, and returns its directory.
func writeShard(t *testing.T, i, n int) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), fmt.Sprintf("shard-%d", i))
	w, err := Create(dir)
	if err != nil {
		t.Fatal(err)
	}
	target := metrics.Target{URL: "http://127.0.0.1:1/v1", API: "openai-chat", Model: "m"}
	if err := w.WriteRun(Run{Tool: "tokbench", Target: target, Config: Config{"shard": fmt.Sprintf("%d/2", i)}}); err != nil {
		t.Fatal(err)
	}
	load := metrics.Load{Mode: "concurrency", Concurrency: 2}
	var recs []metrics.Record
	for k := range n {
		rec := metrics.Record{ID: k, Load: load, OK: true, Start: time.Unix(1000, 0).Add(time.Duration(k) * time.Second),
			OffsetMs: float64(k * 1000), TTFTMs: float64(10 * (k + 1)), OutputTokens: 2,
			ChunkMs: []float64{float64(10 * (k + 1)), float64(10*(k+1) + 5)}, ChunkTokens: []int{1, 1}, E2EMs: float64(10*(k+1) + 5), DoneMs: float64(10*(k+1) + 6)}
		recs = append(recs, rec)
		if err := w.Append(rec); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.WriteSummary(metrics.Summary{Schema: metrics.Schema, Target: target, Levels: []metrics.Level{metrics.Summarize(load, recs, 0)}}); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestMergeRefusesTruncatedShard is issue 34's case: a shard whose
// requests.jsonl was cut mid-line while its summary.json survived. Merge
// names the shard and the counts; with Partial it merges what the shards
// hold and flags the level.
func TestMergeRefusesTruncatedShard(t *testing.T) {
	a, b := writeShard(t, 0, 8), writeShard(t, 1, 8)
	if m, err := Merge([]string{a, b}, MergeOptions{}); err != nil || m.Summary.Levels[0].Requests.Sent != 16 || len(m.Warnings) != 0 {
		t.Fatalf("whole shards: %v, warnings %v", err, m.Warnings)
	}
	// Cut b's file in the middle of its sixth line: five records whole.
	path := filepath.Join(b, RequestsFile)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(string(data), "\n")
	cut := strings.Join(lines[:5], "") + lines[5][:len(lines[5])/2]
	if err := os.WriteFile(path, []byte(cut), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = Merge([]string{a, b}, MergeOptions{})
	want := b + " holds 5 of the 8 requests its summary.json counts at c=2"
	if !errors.Is(err, ErrPartialShard) || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "--partial") {
		t.Errorf("truncated shard: err = %v, want ErrPartialShard naming %q", err, want)
	}
	m, err := Merge([]string{a, b}, MergeOptions{Partial: true})
	if err != nil {
		t.Fatal(err)
	}
	lv := m.Summary.Levels[0]
	if lv.Requests.Sent != 13 || len(lv.Warnings) != 1 || !strings.Contains(lv.Warnings[0], want) || m.Run.Config["merged_partial"] != true {
		t.Errorf("--partial: sent %d, level warnings %q, config %v; want 13 and the shard named", lv.Requests.Sent, lv.Warnings, m.Run.Config)
	}
	if len(m.Warnings) != 2 || !strings.Contains(m.Warnings[0], "incomplete last line") || !strings.Contains(m.Warnings[1], want) {
		t.Errorf("--partial: warnings %q, want the torn line and the partial shard", m.Warnings)
	}
}

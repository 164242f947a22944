package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tokbench/tokbench/internal/fakellm"
	"github.com/tokbench/tokbench/metrics"
	"github.com/tokbench/tokbench/results"
)

// TestShardsMergeExactly runs one load split into 4 shards (at once, as
// separate runs against one server) and checks the merged summary against
// the same records summarized independently: identical percentiles and totals.
func TestShardsMergeExactly(t *testing.T) {
	srv := fakellm.New(fakellm.Script{TTFT: 5 * time.Millisecond, Gap: 2 * time.Millisecond, Tokens: 12, Usage: true,
		GapPerInflight: 100 * time.Microsecond})
	defer srv.Close()
	dir := t.TempDir()
	// Two seconds ahead: far longer than a shard's set-up, so a shard that
	// did not wait would send before it.
	startAt := time.Now().Add(2 * time.Second)
	start := startAt.UTC().Format(time.RFC3339Nano)
	var dirs []string
	errs := make(chan error, 4)
	for i := 0; i < 4; i++ {
		d := filepath.Join(dir, fmt.Sprintf("shard-%d", i))
		dirs = append(dirs, d)
		go func() {
			code, _, stderr := runCLI(context.Background(), nil, "bench", "--url", srv.URL, "--model", "m",
				"--concurrency", "4,10", "--requests", "30", "--warmup", "0", "--input-tokens", "16",
				"--shard", fmt.Sprintf("%d/4", i), "--start-at", start, "--out", d)
			if code != 0 {
				errs <- fmt.Errorf("shard %d: exit %d: %s", i, code, stderr)
				return
			}
			errs <- nil
		}()
	}
	for range 4 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	out := filepath.Join(dir, "merged")
	code, stdout, stderr := runCLI(context.Background(), nil, append(append([]string{"merge"}, dirs...), "--out", out, "--format", "json")...)
	if code != 0 {
		t.Fatalf("merge: exit %d: %s", code, stderr)
	}
	var s metrics.Summary
	if err := json.Unmarshal([]byte(stdout), &s); err != nil {
		t.Fatal(err)
	}
	// The truth: every shard's records, pooled per level by this test.
	var pooled [2][]metrics.Record
	for _, d := range dirs {
		recs, _, err := results.ReadRecords(d)
		if err != nil {
			t.Fatal(err)
		}
		first := time.Time{}
		for _, r := range recs {
			pooled[r.Level] = append(pooled[r.Level], r)
			if first.IsZero() || r.Start.Before(first) {
				first = r.Start
			}
		}
		// --start-at holds every shard until the instant: none sends
		// before it.
		if first.Before(startAt) {
			t.Errorf("%s: first request sent at %s, before --start-at %s", d, first.Format(time.RFC3339Nano), start)
		}
		t.Logf("%s: first request %v after --start-at", filepath.Base(d), first.Sub(startAt))
	}
	for i, want := range []struct{ users, requests int }{{4, 30}, {10, 30}} {
		lv := s.Levels[i]
		if lv.Load.Concurrency != want.users || lv.Requests.Sent != want.requests || len(pooled[i]) != want.requests {
			t.Fatalf("level %d: load %+v, sent %d, pooled %d; want %d users, %d requests", i, lv.Load, lv.Requests.Sent, len(pooled[i]), want.users, want.requests)
		}
		var ttft, tps, itl []float64
		tokens := 0
		for j := range pooled[i] {
			r := &pooled[i][j]
			ttft = append(ttft, r.TTFTMs)
			if v, ok := r.DecodeTPS(); ok {
				tps = append(tps, v)
			}
			itl = r.AppendITL(itl)
			tokens += r.OutputTokens
		}
		if got, want := lv.TTFT, metrics.Describe(ttft); got != want {
			t.Errorf("level %d TTFT: merged %+v, pooled %+v", i, got, want)
		}
		if got, want := lv.DecodeTPS, metrics.Describe(tps); got != want {
			t.Errorf("level %d decode TPS differs", i)
		}
		if got, want := lv.ITL, metrics.Describe(itl); got != want {
			t.Errorf("level %d ITL differs", i)
		}
		if lv.OutputTokens != tokens || tokens != 12*want.requests {
			t.Errorf("level %d output tokens %d, pooled %d", i, lv.OutputTokens, tokens)
		}
		// The wall time spans the earliest start to the last end across shards.
		var first, last time.Time
		for _, r := range pooled[i] {
			st := r.Start.Add(-time.Duration(r.OffsetMs * float64(time.Millisecond)))
			end := r.Start.Add(time.Duration(r.DoneMs * float64(time.Millisecond)))
			if first.IsZero() || st.Before(first) {
				first = st
			}
			if end.After(last) {
				last = end
			}
		}
		if d := last.Sub(first).Seconds(); lv.DurationS < d-1e-6 || lv.DurationS > d+1e-6 {
			t.Errorf("level %d duration %.6f s, want %.6f", i, lv.DurationS, d)
		}
	}
	// Mismatched shards are refused, naming the field.
	other := filepath.Join(dir, "other")
	if code, _, stderr := runCLI(context.Background(), nil, "bench", "--url", srv.URL, "--model", "m", "--concurrency", "4,10",
		"--requests", "30", "--warmup", "0", "--input-tokens", "32", "--shard", "1/4", "--out", other); code != 0 {
		t.Fatalf("other shard: %s", stderr)
	}
	code, _, stderr = runCLI(context.Background(), nil, "merge", dirs[0], other, "--out", filepath.Join(dir, "bad"))
	if code != ExitUsage || !strings.Contains(stderr, "input_tokens") {
		t.Errorf("mismatched shards: exit %d, %q", code, stderr)
	}
	code, _, stderr = runCLI(context.Background(), nil, "merge", dirs[0], dirs[0], "--out", filepath.Join(dir, "dup"))
	if code != ExitUsage || !strings.Contains(stderr, "both are shard") {
		t.Errorf("same shard twice: exit %d, %q", code, stderr)
	}
}

// TestMergeTruncatedShard: merge refuses a shard whose requests.jsonl lost
// records its summary counts, in one line naming it (exit 2); --partial
// merges it and warns.
func TestMergeTruncatedShard(t *testing.T) {
	srv := fakellm.New(fakellm.Script{TTFT: time.Millisecond, Tokens: 2, Usage: true})
	defer srv.Close()
	dir := t.TempDir()
	var dirs []string
	for i := range 2 {
		d := filepath.Join(dir, fmt.Sprintf("shard-%d", i))
		dirs = append(dirs, d)
		if code, _, stderr := runCLI(context.Background(), nil, "bench", "--url", srv.URL, "--model", "m", "--concurrency", "4",
			"--requests", "16", "--warmup", "0", "--input-tokens", "8", "--output-tokens", "2", "--shard", fmt.Sprintf("%d/2", i), "--out", d); code != 0 {
			t.Fatalf("shard %d: exit %d: %s", i, code, stderr)
		}
	}
	path := filepath.Join(dirs[1], results.RequestsFile)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(string(data), "\n")
	if len(lines) < 8 {
		t.Fatalf("shard 1 holds %d lines, want 8", len(lines)-1)
	}
	os.WriteFile(path, []byte(strings.Join(lines[:4], "")+lines[4][:10]), 0o644) // 4 whole records of 8
	code, _, stderr := runCLI(context.Background(), nil, "merge", dirs[0], dirs[1], "--out", filepath.Join(dir, "m1"))
	want := dirs[1] + " holds 4 of the 8 requests its summary.json counts at c=2"
	if code != ExitUsage || !strings.Contains(stderr, want) || strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
		t.Errorf("merge: exit %d, stderr %q; want 2 and one line with %q", code, stderr, want)
	}
	code, stdout, stderr := runCLI(context.Background(), nil, "merge", dirs[0], dirs[1], "--partial", "--out", filepath.Join(dir, "m2"), "--format", "json")
	var s metrics.Summary
	if code != 0 || json.Unmarshal([]byte(stdout), &s) != nil || len(s.Levels) != 1 || s.Levels[0].Requests.Sent != 12 || !strings.Contains(stderr, "partial shard merged: "+want) {
		t.Errorf("merge --partial: exit %d, stderr %q, stdout %.200s; want 12 requests and a warning", code, stderr, stdout)
	}
}

// TestEveryShardWarmsUp: with the default --warmup 1, the last of 4 shards
// warms up too, so its users' starts are spread, not a lockstep burst.
func TestEveryShardWarmsUp(t *testing.T) {
	srv := fakellm.New(fakellm.Script{TTFT: time.Millisecond, Tokens: 2, Usage: true})
	defer srv.Close()
	code, stdout, stderr := runCLI(context.Background(), nil, "bench", "--url", srv.URL, "--model", "m", "--concurrency", "8",
		"--requests", "8", "--input-tokens", "8", "--output-tokens", "2", "--shard", "3/4", "--format", "json")
	var s metrics.Summary
	if code != 0 || json.Unmarshal([]byte(stdout), &s) != nil || len(s.Levels) != 1 {
		t.Fatalf("bench --shard 3/4: exit %d: %s", code, stderr)
	}
	if lv := s.Levels[0]; lv.Lockstep || strings.Contains(stderr, "lockstep") || lv.Requests.Sent != 2 {
		t.Errorf("shard 3/4: lockstep %v, %d requests, stderr %q; want a warm-up, 2 requests and no lockstep", lv.Lockstep, lv.Requests.Sent, stderr)
	}
	// The warm-up's request is sent, and not recorded: 3 bodies for 2 records.
	if n := len(srv.Bodies()); n != 3 {
		t.Errorf("shard 3/4 sent %d requests, want 2 and 1 warm-up", n)
	}
}

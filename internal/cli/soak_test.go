package cli

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tokbench/tokbench/results"
)

// TestSummaryEvery: a level run for a duration is summarized in windows
// too, each printed as it closes and kept in summary.json, adding up to
// the level.
func TestSummaryEvery(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the simulator in real time")
	}
	dir := filepath.Join(t.TempDir(), "soak")
	code, _, stderr := runCLI(context.Background(), nil, "bench", "--rate", "20", "--duration", "3s",
		"--summary-every", "1s", "--output-tokens", "8", "--input-tokens", "32", "--out", dir)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if n := strings.Count(stderr, "tokbench: 20 req/s poisson "); n < 2 {
		t.Fatalf("%d window lines on stderr, want 2 or more:\n%s", n, stderr)
	}
	s, err := results.ReadSummary(dir)
	if err != nil {
		t.Fatal(err)
	}
	lv := s.Levels[0]
	if len(lv.Windows) < 3 || len(lv.Windows) > 4 {
		t.Fatalf("%d windows for a 3 s level of 1 s windows", len(lv.Windows))
	}
	sent := 0
	for _, w := range lv.Windows {
		sent += w.Requests.Sent
		if w.Requests.Completed > 0 && w.TTFTSched == nil {
			t.Fatal("an open-loop window without TTFT from the schedule")
		}
	}
	if sent != lv.Requests.Sent || sent < 30 {
		t.Fatalf("windows hold %d requests, the level %d", sent, lv.Requests.Sent)
	}
	if lv.Precision != nil {
		t.Fatalf("a short level is approximate: %+v", lv.Precision)
	}
	code, _, stderr = runCLI(context.Background(), nil, "bench", "--summary-every", "10ms")
	if code != ExitUsage || !strings.HasPrefix(stderr, "tokbench: --summary-every:") {
		t.Fatalf("--summary-every 10ms: exit %d, %s", code, stderr)
	}
}

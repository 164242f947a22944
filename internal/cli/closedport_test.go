package cli

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestClosedPortLeavesNoRun: a server that cannot be reached fails the run
// (exit 1) and leaves no empty run directory behind; report refuses a
// directory that holds no run (exit 2, one line naming it).
func TestClosedPortLeavesNoRun(t *testing.T) {
	addr := closedAddr(t)
	dir := filepath.Join(t.TempDir(), "run")
	code, _, stderr := runCLI(context.Background(), nil, "bench", "--url", "http://"+addr+"/v1", "--api", "auto",
		"--concurrency", "1", "--requests", "1", "--out", dir)
	if code != 1 {
		t.Fatalf("bench against a closed port: exit %d, want 1: %s", code, stderr)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		entries, _ := os.ReadDir(dir)
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("bench left %s (%v, %q): %s", dir, err, names, stderr)
	}
	empty := t.TempDir()
	if err := os.WriteFile(filepath.Join(empty, "requests.jsonl"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, stderr = runCLI(context.Background(), nil, "report", empty)
	if code != 2 || !strings.Contains(stderr, empty+" holds no run") || strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
		t.Errorf("report of an empty run directory: exit %d, stderr %q; want 2 and one line saying it holds no run", code, stderr)
	}
}

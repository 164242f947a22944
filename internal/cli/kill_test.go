package cli

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tokbench/tokbench/internal/fakellm"
	"github.com/tokbench/tokbench/results"
)

// built is the binary the process-level tests run, compiled once.
var built struct {
	once     sync.Once
	dir, bin string
	err      error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if built.dir != "" {
		os.RemoveAll(built.dir)
	}
	os.Exit(code)
}

// buildBinary compiles tokbench once for the process-level tests.
func buildBinary(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the binary")
	}
	built.once.Do(func() {
		if built.dir, built.err = os.MkdirTemp("", "tokbench-bin-"); built.err != nil {
			return
		}
		built.bin = filepath.Join(built.dir, "tokbench")
		cmd := exec.Command("go", "build", "-o", built.bin, "github.com/tokbench/tokbench/cmd/tokbench")
		if out, err := cmd.CombinedOutput(); err != nil {
			built.err = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if built.err != nil {
		t.Fatal(built.err)
	}
	return built.bin
}

// waitForLines waits until path has at least n complete lines.
func waitForLines(t *testing.T, path string, n int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if f, err := os.Open(path); err == nil {
			sc := bufio.NewScanner(f)
			sc.Buffer(nil, 1<<20)
			lines := 0
			for sc.Scan() {
				lines++
			}
			f.Close()
			if lines >= n {
				return
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%s never reached %d lines", path, n)
}

// startBench runs the built binary against a fake server with users
// concurrent streams for up to a minute, writing to a fresh run directory,
// and returns once requests.jsonl holds at least lines records.
func startBench(t *testing.T, users, lines int) (*exec.Cmd, string) {
	t.Helper()
	bin := buildBinary(t)
	srv := fakellm.New(fakellm.Script{TTFT: 2 * time.Millisecond, Gap: 2 * time.Millisecond, Tokens: 8, Usage: true})
	t.Cleanup(srv.Close)
	dir := filepath.Join(t.TempDir(), "run")
	cmd := exec.Command(bin, "bench", "--url", srv.URL, "--model", "m", "--concurrency", strconv.Itoa(users),
		"--duration", "60s", "--warmup", "0", "--input-tokens", "16", "--out", dir)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	waitForLines(t, filepath.Join(dir, results.RequestsFile), lines)
	return cmd, dir
}

// TestKill9KeepsEverythingMeasured kills the process mid-run with SIGKILL:
// requests.jsonl still parses line by line, and `tokbench report` renders
// what is there from it alone.
func TestKill9KeepsEverythingMeasured(t *testing.T) {
	cmd, dir := startBench(t, 4, 20)
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	recs, _, err := results.ReadRecords(dir)
	if err != nil || len(recs) < 20 {
		t.Fatalf("after kill -9: %d records, %v", len(recs), err)
	}
	if _, err := os.Stat(filepath.Join(dir, results.SummaryFile)); err == nil {
		t.Fatal("summary.json exists: the process was not killed mid-run")
	}
	var out, errb strings.Builder
	code := Run(context.Background(), []string{"report", dir}, Env{Stdout: &out, Stderr: &errb})
	if code != 0 {
		t.Fatalf("report after kill -9: exit %d: %s", code, errb.String())
	}
	html, err := os.ReadFile(filepath.Join(dir, "report.html"))
	if err != nil || !strings.Contains(string(html), "rebuilt from") {
		t.Errorf("report.html does not say it was rebuilt from the records (%v)", err)
	}
	// report kept the rebuilt summary, so compare can read the run.
	s, err := results.ReadSummary(dir)
	if err != nil || len(s.Levels) != 1 || s.Levels[0].Requests.Completed < 20 || s.Levels[0].Load.Concurrency != 4 {
		t.Errorf("summary.json after report: %+v, %v", s.Levels, err)
	}
	if code := Run(context.Background(), []string{"compare", dir, dir}, Env{Stdout: &out, Stderr: &errb}); code != 0 {
		t.Errorf("compare of the rebuilt run: exit %d: %s", code, errb.String())
	}
}

// TestSIGTERMWritesInterruptedSummary: SIGTERM is Ctrl-C: stop sending,
// finish what is in flight, write summary.json marked interrupted, exit 130.
func TestSIGTERMWritesInterruptedSummary(t *testing.T) {
	cmd, dir := startBench(t, 2, 10)
	cmd.Process.Signal(syscall.SIGTERM)
	err := cmd.Wait()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != ExitInterrupted {
		t.Fatalf("exit: %v, want 130", err)
	}
	s, err := results.ReadSummary(dir)
	if err != nil || !s.Interrupted || len(s.Levels) != 1 {
		t.Fatalf("summary interrupted=%v, %d levels, %v", s.Interrupted, len(s.Levels), err)
	}
	recs, _, _ := results.ReadRecords(dir)
	if s.Levels[0].Requests.Sent != len(recs) {
		t.Errorf("summary counts %d requests, requests.jsonl holds %d", s.Levels[0].Requests.Sent, len(recs))
	}
}

package cli

import (
	"bytes"
	"context"
	"io"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tokbench/tokbench/internal/fakellm"
)

func TestBenchTerminalCharts(t *testing.T) {
	srv := fakellm.New(fakellm.Script{TTFT: 5 * time.Millisecond, Gap: time.Millisecond, Tokens: 8, Usage: true})
	defer srv.Close()
	args := []string{"bench", "--url", srv.URL + "/v1", "--concurrency", "1,2", "--requests", "4", "--warmup", "0", "--output-tokens", "8"}
	run := func(terminal bool) string {
		var out, errb bytes.Buffer
		env := Env{Stdout: &out, Stderr: &errb, Getenv: func(k string) string {
			if k == "COLUMNS" {
				return "90"
			}
			return ""
		}, IsTerminal: func(w io.Writer) bool { return terminal && w == &out }}
		if code := Run(context.Background(), args, env); code != 0 {
			t.Fatalf("terminal %v: exit %d: %s", terminal, code, errb.String())
		}
		return out.String()
	}
	out := run(true)
	if !strings.Contains(out, "output tok/s (all users)") || !strings.Contains(out, "TTFT at c=2 (4 requests)") {
		t.Fatalf("terminal output lacks the charts:\n%s", out)
	}
	// The histogram counts every completed request of c=2 once, and every
	// TTFT is at least the server's 5 ms.
	bin := regexp.MustCompile(`(?m)^\s+([0-9.]+)(?:–[0-9.]+)? ms\s+[█▏▎▍▌▋▊▉ ]+\s(\d+)$`)
	total := 0
	for _, m := range bin.FindAllStringSubmatch(out, -1) {
		lo, _ := strconv.ParseFloat(m[1], 64)
		if lo < 5 {
			t.Errorf("histogram bin from %g ms, below the server's 5 ms TTFT", lo)
		}
		n, _ := strconv.Atoi(m[2])
		total += n
	}
	if total != 4 {
		t.Errorf("histogram counts %d requests, want 4:\n%s", total, out)
	}
	for i, line := range strings.Split(out, "\n") {
		if strings.ContainsRune(line, '█') && len([]rune(line)) > 90 {
			t.Errorf("chart line %d is %d columns wide with COLUMNS=90", i, len([]rune(line)))
		}
	}
	if out := run(false); strings.ContainsAny(out, "█▏▎▍▌▋▊▉") || strings.Contains(out, "TTFT at") {
		t.Errorf("charts written to a non-terminal:\n%s", out)
	}
}

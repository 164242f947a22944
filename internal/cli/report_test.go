package cli

import (
	"context"
	"encoding/csv"
	"strings"
	"testing"
	"time"

	"github.com/tokbench/tokbench/internal/fakellm"
)

func TestBenchFormatMarkdownCSV(t *testing.T) {
	srv := fakellm.New(fakellm.Script{TTFT: 5 * time.Millisecond, Gap: time.Millisecond, Tokens: 8, Usage: true})
	defer srv.Close()
	args := []string{"bench", "--url", srv.URL + "/v1", "--concurrency", "1,2", "--requests", "3", "--warmup", "0", "--output-tokens", "8"}

	code, stdout, stderr := runCLI(context.Background(), nil, append(args, "--format", "csv")...)
	if code != 0 {
		t.Fatalf("csv: exit %d: %s", code, stderr)
	}
	rows, err := csv.NewReader(strings.NewReader(stdout)).ReadAll()
	if err != nil || len(rows) != 3 {
		t.Fatalf("csv: %d rows, %v:\n%s", len(rows), err, stdout)
	}
	if rows[0][0] != "load" || rows[1][0] != "c=1" || rows[2][0] != "c=2" || rows[2][5] != "3" {
		t.Errorf("csv rows = %q", rows)
	}

	code, stdout, stderr = runCLI(context.Background(), nil, append(args, "--format", "markdown")...)
	if code != 0 {
		t.Fatalf("markdown: exit %d: %s", code, stderr)
	}
	if !strings.Contains(stdout, "| c=1 | 3 | 0 |") || !strings.Contains(stdout, "| c=2 | 3 | 0 |") {
		t.Errorf("markdown table lacks the level rows:\n%s", stdout)
	}
}

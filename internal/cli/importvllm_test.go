package cli

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tokbench/tokbench/results"
)

func TestImportVLLM(t *testing.T) {
	tmp := t.TempDir()
	a, b := filepath.Join(tmp, "a"), filepath.Join(tmp, "b")
	fixture := filepath.Join("..", "..", "compare", "testdata", "vllm-detailed.json")
	for _, dir := range []string{a, b} {
		code, stdout, stderr := runCLI(context.Background(), nil, "import-vllm", fixture, "--out", dir, "--hardware", "h100-sxm")
		if code != 0 || !strings.Contains(stdout, "4 requests (3 completed) at c=2") {
			t.Fatalf("import-vllm: exit %d, stdout %q, stderr %q", code, stdout, stderr)
		}
	}
	s, err := results.ReadSummary(a)
	if err != nil {
		t.Fatal(err)
	}
	if lv := s.Levels[0]; lv.TTFT.P50 != 200 || lv.DecodeTPS.P50 != 50 || lv.Requests.Failed != 1 {
		t.Errorf("summary level = TTFT p50 %v, decode p50 %v, failed %d; want 200, 50, 1", lv.TTFT.P50, lv.DecodeTPS.P50, lv.Requests.Failed)
	}
	recs, _, err := results.ReadRecords(a)
	if err != nil || len(recs) != 4 {
		t.Fatalf("requests.jsonl: %d records, %v", len(recs), err)
	}
	if _, err := os.Stat(filepath.Join(a, "report.html")); err != nil {
		t.Errorf("no report.html: %v", err)
	}
	code, stdout, stderr := runCLI(context.Background(), nil, "compare", a, b, "--fail-if", "ttft_p95>+10%")
	if code != 0 || !strings.Contains(stdout, "no significant change") || strings.Contains(stderr, "not like for like") {
		t.Errorf("compare of two imports: exit %d\n%s\n%s", code, stdout, stderr)
	}

	// Aggregates only: a summary, a warning, no requests.jsonl.
	agg := filepath.Join(tmp, "agg")
	code, stdout, stderr = runCLI(context.Background(), nil, "import-vllm", filepath.Join("..", "..", "compare", "testdata", "vllm-aggregate.json"), "--out", agg)
	if code != 0 || !strings.Contains(stdout, "aggregates at c=2") || !strings.Contains(stderr, "--save-detailed") {
		t.Fatalf("import-vllm aggregates: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	if _, err := os.Stat(filepath.Join(agg, results.RequestsFile)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("aggregates-only import wrote %s: %v", results.RequestsFile, err)
	}
	if s, err := results.ReadSummary(agg); err != nil || s.Levels[0].TTFT.P99 != 298 {
		t.Errorf("aggregates summary: %v, %+v", err, s.Levels)
	}
	code, stdout, stderr = runCLI(context.Background(), nil, "compare", a, agg)
	if code != 0 || !strings.Contains(stdout+stderr, "no requests.jsonl") && !strings.Contains(stdout+stderr, "no significance test") {
		t.Errorf("compare against aggregates: exit %d\n%s\n%s", code, stdout, stderr)
	}

	for _, c := range []struct {
		args []string
		name string
	}{
		{[]string{"import-vllm", fixture}, "--out"},
		{[]string{"import-vllm", filepath.Join(tmp, "missing.json"), "--out", filepath.Join(tmp, "x")}, "missing.json"},
		{[]string{"import-vllm", filepath.Join(a, "summary.json"), "--out", filepath.Join(tmp, "y")}, "summary.json"},
		{[]string{"import-vllm"}, "import-vllm"},
	} {
		code, _, stderr := runCLI(context.Background(), nil, c.args...)
		if code != ExitUsage || strings.Count(strings.TrimSpace(stderr), "\n") != 0 || !strings.Contains(stderr, c.name) {
			t.Errorf("%v: exit %d, stderr %q, want one line naming %s", c.args, code, stderr, c.name)
		}
	}
}

package cli

import (
	"context"
	"encoding/csv"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/tokbench/tokbench/internal/fakellm"
	"github.com/tokbench/tokbench/results"
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

func TestReportWritesSelfContainedHTML(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	code, _, stderr := runCLI(context.Background(), nil, "bench", "--concurrency", "1,2", "--requests", "4",
		"--input-tokens", "64", "--output-tokens", "16", "--hardware", "h100-sxm", "--slo", "ttft_p95<=1ms", "--out", dir)
	if code != 0 {
		t.Fatalf("bench: exit %d: %s", code, stderr)
	}
	code, stdout, stderr := runCLI(context.Background(), nil, "report", dir)
	if code != 0 || !strings.Contains(stdout, filepath.Join(dir, "report.html")) {
		t.Fatalf("report: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	b, err := os.ReadFile(filepath.Join(dir, "report.html"))
	if err != nil {
		t.Fatal(err)
	}
	s, err := results.ReadSummary(dir)
	if err != nil {
		t.Fatal(err)
	}
	html := string(b)
	// 3 curves + TTFT and decode histograms for each of the 2 levels + the
	// timeline's three charts (no failure to chart), and those three
	// zoomed; the request explorer's own charts aside.
	if n := strings.Count(html, "<svg") - strings.Count(html, `aria-label="tokens of request`); n != 3+2*2+3+3 {
		t.Errorf("%d SVG charts, want 13", n)
	}
	// The plotted decode p50 at c=2 is the summary's number.
	want := fmt.Sprintf("<title>c=2 decode p50: %s tok/s</title>", numFmt(s.Levels[1].DecodeTPS.P50))
	if !strings.Contains(html, want) {
		t.Errorf("report lacks %q", want)
	}
	// No simulated request gets its first token within 1 ms: both levels
	// fail the objective, with the measured TTFT p95 beside it.
	for i, lv := range s.Levels {
		want := fmt.Sprintf(`<td><code>ttft_p95&lt;=1ms</code></td><td class="n">%s</td><td class="broken">BROKEN</td>`, numFmt(lv.TTFT.P95))
		if lv.SLO == nil || lv.SLO.Met || !strings.Contains(html, want) {
			t.Errorf("level %d: SLO %+v; report lacks %q", i, lv.SLO, want)
		}
	}
	for _, want := range []string{"<th>hardware</th><td>h100-sxm</td>", "(simulated)", "4 requests</text>",
		"<h2>Timeline of c=2</h2>", `<td rowspan="1" class="fail">✗ FAIL</td>`} {
		if !strings.Contains(html, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	if m := regexp.MustCompile(`(?i)(src|href)\s*=\s*["']?\s*(https?:)?//|url\(|<script|<link`).FindString(html); m != "" {
		t.Errorf("report is not self-contained: %q", m)
	}
}

// numFmt is report's format: about four significant digits.
func numFmt(v float64) string {
	switch {
	case v >= 1000:
		return fmt.Sprintf("%.0f", v)
	case v >= 100:
		return fmt.Sprintf("%.1f", v)
	case v >= 10:
		return fmt.Sprintf("%.2f", v)
	}
	return fmt.Sprintf("%.3f", v)
}

func TestReportBadInput(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "nope")
	for _, c := range []struct {
		args []string
		name string
	}{{[]string{"report"}, "report"}, {[]string{"report", missing}, "nope"}} {
		code, _, stderr := runCLI(context.Background(), nil, c.args...)
		if code != ExitUsage || strings.Count(strings.TrimSpace(stderr), "\n") != 0 || !strings.Contains(stderr, c.name) {
			t.Errorf("%v: exit %d, stderr %q, want one line naming %s", c.args, code, stderr, c.name)
		}
	}
}

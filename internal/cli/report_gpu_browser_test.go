package cli

import (
	"context"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tokbench/tokbench/internal/fakellm"
	"github.com/tokbench/tokbench/results"
)

// TestReportDrawsGPUTimeline: a bench that samples a recorded DCGM
// exporter page (two H100s drawing 412.5 + 387.5 W, DRAM active 0.62 and
// 0.58) keeps its level's samples in summary.json, and its report.html,
// opened in headless Chromium, draws the power and memory-activity
// timeline under the tokens/s one: two charts laid out at size, lines
// drawn, their points reading 800 W and 60%.
func TestReportDrawsGPUTimeline(t *testing.T) {
	bin, err := exec.LookPath("chromium")
	if err != nil {
		t.Skip("no chromium on PATH: install Debian's chromium package (apt-get install -y --no-install-recommends chromium) to test report.html in a browser")
	}
	page, err := os.ReadFile(filepath.Join("..", "..", "telemetry", "testdata", "dcgm-h100x2.prom"))
	if err != nil {
		t.Fatal(err)
	}
	exporter := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write(page) }))
	t.Cleanup(exporter.Close)
	f := fakellm.New(fakellm.Script{TTFT: 5 * time.Millisecond, Gap: 2 * time.Millisecond, Tokens: 32, Usage: true})
	t.Cleanup(f.Close)
	dir := filepath.Join(t.TempDir(), "run")
	// 12 rounds of two users, ~70 ms each: several 100 ms samples.
	code, _, stderr := runCLI(context.Background(), nil, "bench", "--url", f.URL+"/v1", "--model", "m",
		"--hardware", "h100-sxm", "--params", "8", "--concurrency", "2", "--requests", "24", "--output-tokens", "32",
		"--gpu-telemetry", "dcgm="+exporter.URL+"/metrics", "--out", dir)
	if code != 0 {
		t.Fatalf("bench: exit %d: %s", code, stderr)
	}
	s, err := results.ReadSummary(dir)
	if err != nil {
		t.Fatal(err)
	}
	g := s.Levels[0].GPU
	if g == nil || len(g.Timeline) < 2 {
		t.Fatalf("level's GPU figures %+v: want a timeline of several samples", g)
	}
	for i, p := range g.Timeline {
		if p.PowerWatts != 800 || p.MemoryActivity == nil || math.Abs(*p.MemoryActivity-0.60) > 1e-12 ||
			p.AtMs < 0 || p.AtMs > 1000*s.Levels[0].DurationS+500 || (i > 0 && p.AtMs < g.Timeline[i-1].AtMs) {
			t.Errorf("timeline point %d: %+v (memory activity %v), level of %.2f s", i, p, deref(p.MemoryActivity), s.Levels[0].DurationS)
		}
	}

	facts, _, _, problems := inChromium(t, bin, filepath.Join(dir, "report.html"))
	if len(problems) > 0 {
		t.Errorf("the page logged errors or loaded other resources: %q", problems)
	}
	want := []string{"GPU power over time at c=2", "GPU memory activity over time at c=2"}
	if strings.Join(facts.GPUCharts, "|") != strings.Join(want, "|") || facts.GPUDrawn != 2 {
		t.Fatalf("GPU charts %q, %d drawn with a line; want %q, both drawn", facts.GPUCharts, facts.GPUDrawn, want)
	}
	if !strings.HasSuffix(facts.GPUTips[0], " s: 800.0 W") || !strings.HasSuffix(facts.GPUTips[1], " s: 60.00% of cycles the memory was busy") {
		t.Errorf("first points' tooltips %q", facts.GPUTips)
	}
}

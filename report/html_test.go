package report

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/tokbench/tokbench/metrics"
	"github.com/tokbench/tokbench/results"
)

func TestWriteHTML(t *testing.T) {
	s, recs := fixture()
	s.Levels[0].Physics = &metrics.Physics{DecodeTPSCeiling: 240, Deployment: "llama-3.1-8b bf16 on 1× h100-sxm"}
	s.Warnings = []string{"client CPU was busy <90%>"}
	recs[7].Error = "HTTP 429: slow down"
	run := &results.Run{Tool: "tokbench", Version: "9.9.9", StartedAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
		Target: s.Target, Meta: map[string]string{"hardware": "h100-sxm", "quant": "bf16"}, Config: map[string]any{"seed": 1}}
	var b bytes.Buffer
	if err := WriteHTML(&b, Page{Run: run, Summary: s, Records: recs}); err != nil {
		t.Fatal(err)
	}
	html := b.String()
	// Three curves against load, two histograms per level, and the
	// timeline's four charts (tokens streamed, in flight, TTFT of the
	// requests started, failures: c=4 has one).
	if n := strings.Count(html, "<svg") - strings.Count(html, `aria-label="tokens of request`); n != 3+2*2+4+4 {
		t.Errorf("%d SVG charts, want 15 (the timeline's four twice: zoomed too)", n)
	}
	if !strings.Contains(html, `<details class="zoom">`) || !strings.Contains(html, `width="2080"`) {
		t.Error("no zoomed timeline, four times wider")
	}
	// The explorer lists the busiest level's requests (c=4: 4), each with
	// its chunk timeline; the failed one's has no chunk to draw.
	if n := strings.Count(html, `<details class="req">`); n != 4 {
		t.Errorf("the explorer lists %d requests, want 4", n)
	}
	for _, want := range []string{
		// Points carry their exact values: decode p50/p5 at c=1 (100) and
		// c=4 (50), the ceiling, TTFT p50/p95, aggregate output TPS.
		"<title>c=1 decode p50: 100.0 tok/s</title>",
		"<title>c=4 decode p5 (slowest 5%): 50.00 tok/s</title>",
		"<title>c=1 single-stream ceiling: 240.0 tok/s</title>",
		"<title>c=1 TTFT p50: 250.0 ms</title>",
		"<title>c=1 TTFT p95: 385.0 ms</title>",
		"<title>c=4 TTFT p95: 1000 ms</title>",
		"<title>c=1 output tok/s: 22.00 tok/s</title>",
		// TTFT at c=1 is 100, 200, 300, 400 ms: four bins of one request
		// (sqrt(4)·2 = 4 bins of 75 ms).
		"<title>100.0–175.0 ms: 1</title>",
		"<title>325.0–400.0 ms: 1</title>",
		"4 requests</text>",
		// Metadata, warnings (escaped), errors.
		"<th>hardware</th><td>h100-sxm</td>", "<th>tool</th><td>tokbench 9.9.9</td>", "<th>config seed</th><td>1</td>",
		"client CPU was busy &lt;90%&gt;", "c=4: 1 failed: http_429 ×1", "http_429: HTTP 429: slow down",
		"<td class=\"n\">c=1</td><td class=\"n\">4</td><td class=\"n\">0</td><td class=\"n\">250.0</td>",
		"TTFT of the requests started over time at c=4", " failed</title>",
		"<h2>Requests of c=4</h2>", "all 4 of the level&#39;s requests", ": failed, http_429</summary>",
		// Use cases: voice wants TTFT p95 under 150 ms; c=1's is 385.
		"<h2>Use cases</h2>", "ttft_p95&lt;=150ms (was 385.0)",
	} {
		if !strings.Contains(html, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	// Self-contained: no script, no external resource of any kind.
	if m := regexp.MustCompile(`(?i)(src|href)\s*=\s*["']?\s*(https?:)?//|url\(\s*["']?(https?:)?//|<script|<link|@import`).FindString(html); m != "" {
		t.Errorf("report loads an external resource or script: %q", m)
	}
}

func TestNiceScale(t *testing.T) {
	for _, c := range []struct{ top, max, step float64 }{
		{0, 1, 0.2}, {22, 25, 5}, {100, 100, 20}, {385, 400, 100}, {1000, 1000, 200}, {7, 8, 2}, {0.9, 1, 0.2},
	} {
		if m, s := niceScale(c.top); m != c.max || s != c.step {
			t.Errorf("niceScale(%g) = %g, %g, want %g, %g", c.top, m, s, c.max, c.step)
		}
	}
}

// TestConfigValues: run.json's configuration reads as JSON in the report,
// never as Go's map[…] or <nil>, and unset values are left out.
func TestConfigValues(t *testing.T) {
	for _, c := range []struct {
		v    any
		want string
		ok   bool
	}{
		{nil, "", false}, {"", "", false}, {[]any{}, "", false}, {map[string]any{}, "", false},
		{"auto", "auto", true}, {float64(4), "4", true}, {true, "true", true},
		{[]any{float64(1), float64(4)}, "1, 4", true},
		{[]any{"X-A: [REDACTED]", "X-B: 1"}, "X-A: [REDACTED], X-B: 1", true},
		{[]any{map[string]any{"a": float64(1)}}, `[{"a":1}]`, true},
		{json.Number("15273817378005027001"), "15273817378005027001", true},
		{map[string]any{"slo": "ttft_p95<=1s", "repeat": float64(1)}, `{"repeat":1,"slo":"ttft_p95<=1s"}`, true},
	} {
		got, ok := configValue(c.v)
		if got != c.want || ok != c.ok {
			t.Errorf("configValue(%#v) = %q, %v; want %q, %v", c.v, got, ok, c.want, c.ok)
		}
		if strings.Contains(got, "map[") || strings.Contains(got, "<nil>") {
			t.Errorf("configValue(%#v) = %q: a Go value", c.v, got)
		}
	}
}

// TestReportWarningsFirstConfigFlat is issue 34's: the report's warnings
// come before the levels, not under a 30-row configuration table, and a
// nested configuration object ("load") reads as a row per value, not as
// raw JSON.
func TestReportWarningsFirstConfigFlat(t *testing.T) {
	s := metrics.Summary{Schema: metrics.Schema, Warnings: []string{"planted warning"},
		Levels: []metrics.Level{{Load: metrics.Load{Mode: metrics.ModeConcurrency, Concurrency: 1}}}}
	run := &results.Run{Tool: "tokbench", Config: map[string]any{
		"concurrency": []any{json.Number("1"), json.Number("4")},
		"load":        map[string]any{"slo": "ttft_p95<=1s", "repeat": json.Number("3"), "steps": map[string]any{"n": json.Number("5")}},
	}}
	var b bytes.Buffer
	if err := WriteHTML(&b, Page{Run: run, Summary: s}); err != nil {
		t.Fatal(err)
	}
	html := b.String()
	warn, levels, cfg := strings.Index(html, "planted warning"), strings.Index(html, "<h2>Levels</h2>"), strings.Index(html, "<h2>Run</h2>")
	if warn < 0 || levels < 0 || cfg < 0 || warn > levels || warn > cfg {
		t.Errorf("warning at %d, levels at %d, run table at %d: want the warning first", warn, levels, cfg)
	}
	for _, want := range []string{"<th>config concurrency</th><td>1, 4</td>", "<th>config load.repeat</th><td>3</td>",
		"<th>config load.slo</th><td>ttft_p95&lt;=1s</td>", "<th>config load.steps.n</th><td>5</td>"} {
		if !strings.Contains(html, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	if strings.Contains(html, "{&#34;") || strings.Contains(html, `{"`) {
		t.Errorf("report shows configuration as raw JSON")
	}
}

// TestCurvesInLoadOrder: a sweep's levels, run as 1, 2, 4, 8, 3, are drawn
// in load order, so the curves do not zig-zag.
func TestCurvesInLoadOrder(t *testing.T) {
	var s metrics.Summary
	for _, c := range []int{1, 2, 4, 8, 3} {
		s.Levels = append(s.Levels, metrics.Level{Load: metrics.Load{Mode: "concurrency", Concurrency: c}, OutputTPS: float64(100 * c)})
	}
	var b strings.Builder
	if err := WriteHTML(&b, Page{Summary: s}); err != nil {
		t.Fatal(err)
	}
	html := b.String()
	chart := html[strings.Index(html, "Aggregate output tokens/s vs load"):]
	last := -1
	for _, c := range []string{"c=1", "c=2", "c=3", "c=4", "c=8"} {
		i := strings.Index(chart, "<title>"+c+" output tok/s")
		if i < 0 || i < last {
			t.Fatalf("%s drawn at %d, after %d: not in load order", c, i, last)
		}
		last = i
	}
}

// TestLongRunReport: a level whose records are a sample says so in its
// histograms and draws no records timeline (its tokens would be a
// sample's); its periodic summaries are drawn window by window.
func TestLongRunReport(t *testing.T) {
	s, recs := fixture()
	lv := &s.Levels[len(s.Levels)-1]
	for i := range 30 {
		lv.Windows = append(lv.Windows, metrics.Window{StartS: float64(60 * i), EndS: float64(60 * (i + 1)), OutputTPS: 100 + float64(i),
			Requests: metrics.Requests{Sent: 10, Failed: i % 2}, TTFT: metrics.Stats{Count: 10, P50: 40, P99: 90 + float64(i)}})
	}
	total := map[int]int{}
	for _, r := range recs {
		total[r.Level]++
	}
	last := len(s.Levels) - 1
	total[last] *= 1000
	var b bytes.Buffer
	if err := WriteHTML(&b, Page{Summary: s, Records: recs, Total: total}); err != nil {
		t.Fatal(err)
	}
	html := b.String()
	for _, want := range []string{
		"Periodic summaries of " + lv.Load.String(),
		"<title>30:00 output tok/s: 129.0 tok/s</title>", "<title>30:00 p99: 119.0 ms</title>", "<title>2:00 failed: 1.000 requests</title>",
		fmt.Sprintf("(a uniform sample of %d of %d requests)", total[last]/1000, total[last]),
	} {
		if !strings.Contains(html, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	if strings.Contains(html, "<h2>Timeline of") {
		t.Error("a sampled level drew a records timeline")
	}
	if n := strings.Count(html, `text-anchor="middle" font-size="11">`); n > 3*12+40 {
		t.Errorf("%d axis labels: the window charts label every point", n)
	}
}

package cli

import (
	"bytes"
	"context"
	"fmt"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/tokbench/tokbench/metrics"
	"github.com/tokbench/tokbench/report"
	"github.com/tokbench/tokbench/results"
)

// pageFacts is what the browser reports about the rendered report.
type pageFacts struct {
	Title     string   `json:"title"`
	Headings  []string `json:"headings"`
	SVGs      int      `json:"svgs"`
	Drawn     int      `json:"drawn"` // SVGs laid out at least 200×100 px
	Points    int      `json:"points"`
	TLPoints  int      `json:"tlPoints"`  // the TTFT timeline's
	Hover     string   `json:"hover"`     // the tooltip of the first curve point
	Requests  int      `json:"requests"`  // in the request explorer
	ChunkTip  string   `json:"chunkTip"`  // the first opened request's first chunk's tooltip
	ZoomWidth int      `json:"zoomWidth"` // the opened zoomed timeline's scroll width (0: none, or it does not scroll)``
	Bars      int      `json:"bars"`
	SLOFail   int      `json:"sloFail"`
	Broken    int      `json:"broken"`
	PageWidth int      `json:"pageWidth"`
	// The GPU timeline's charts (bench --gpu-telemetry): their titles,
	// how many are laid out at size with a line drawn, and the tooltip
	// of each one's first point.
	GPUCharts []string `json:"gpuCharts"`
	GPUDrawn  int      `json:"gpuDrawn"`
	GPUTips   []string `json:"gpuTips"`
}

// TestReportInChromium opens the report.html of a real run against the
// simulator in headless Chromium (Debian's chromium package): the page must
// render its charts, log no console error, load nothing but itself, and
// give a screenshot, which is kept in a temporary directory for a person
// to look at.
func TestReportInChromium(t *testing.T) {
	bin, err := exec.LookPath("chromium")
	if err != nil {
		t.Skip("no chromium on PATH: install Debian's chromium package (apt-get install -y --no-install-recommends chromium) to test report.html in a browser")
	}
	dir := filepath.Join(t.TempDir(), "run")
	code, _, stderr := runCLI(context.Background(), nil, "bench", "--concurrency", "1,4", "--requests", "8",
		"--input-tokens", "64", "--output-tokens", "32", "--hardware", "h100-sxm", "--slo", "ttft_p95<=1ms,tps_p5>=10", "--out", dir)
	if code != 0 {
		t.Fatalf("bench: exit %d: %s", code, stderr)
	}

	facts, shot, pdf, problems := inChromium(t, bin, filepath.Join(dir, "report.html"))
	if len(problems) > 0 {
		t.Errorf("the page logged errors or loaded other resources: %q", problems)
	}
	if facts.Title != "tokbench: llama-3.1-8b" {
		t.Errorf("title = %q", facts.Title)
	}
	for _, h := range []string{"Levels", "Service-level objectives", "Degradation curve and latency", "Timeline of c=4", "Distributions per level", "Run"} {
		if !strings.Contains(strings.Join(facts.Headings, "|"), h) {
			t.Errorf("headings %q lack %q", facts.Headings, h)
		}
	}
	// 3 curves, 3 timeline charts (no failure to chart), TTFT and decode
	// histograms of 2 levels: all laid out at full size.
	if facts.SVGs != 10 || facts.Drawn != 10 {
		t.Errorf("%d SVGs, %d drawn at size, want 10 and 10", facts.SVGs, facts.Drawn)
	}
	if facts.TLPoints < 2 || !strings.Contains(facts.Hover, "c=1 ") {
		t.Errorf("%d TTFT timeline points; a point's hover value %q", facts.TLPoints, facts.Hover)
	}
	// The zoomed timeline, opened, scrolls sideways over 2,080 px.
	if facts.ZoomWidth < 2000 {
		t.Errorf("zoomed timeline scroll width %d px", facts.ZoomWidth)
	}
	// The explorer: c=4's 8 requests, one opened shows its chunks.
	if facts.Requests != 8 || !strings.HasPrefix(facts.ChunkTip, "chunk 1 at ") {
		t.Errorf("explorer: %d requests, an opened one's first chunk %q", facts.Requests, facts.ChunkTip)
	}
	// Points: output TPS, decode p50, p5 and the ceiling, TTFT p50 and p95
	// at 2 levels.
	if facts.Points != 6*2 {
		t.Errorf("%d plotted points, want 12", facts.Points)
	}
	if facts.Bars < 4 {
		t.Errorf("%d histogram and timeline bars, want many", facts.Bars)
	}
	// Nothing gets a first token within 1 ms: both levels fail that
	// objective and pass the decode one.
	if facts.SLOFail != 2 || facts.Broken != 2 {
		t.Errorf("SLO panel: %d failing levels, %d broken objectives, want 2 and 2", facts.SLOFail, facts.Broken)
	}
	if facts.PageWidth > 1200 {
		t.Errorf("page is %d px wide in a 1200 px window: it scrolls sideways", facts.PageWidth)
	}

	img, err := png.Decode(bytes.NewReader(shot))
	if err != nil {
		t.Fatalf("screenshot is not a PNG: %v", err)
	}
	b := img.Bounds()
	if b.Dx() < 1000 || b.Dy() < 2000 {
		t.Errorf("screenshot is %d×%d px, want the whole page", b.Dx(), b.Dy())
	}
	// The charts were painted: many pixels of the output-TPS green
	// (#2ca02c) and of the TTFT blue (#1f77b4).
	green, blue := 0, 0
	for y := b.Min.Y; y < b.Max.Y; y += 2 {
		for x := b.Min.X; x < b.Max.X; x += 2 {
			r, g, bl, _ := img.At(x, y).RGBA()
			switch {
			case near(r, 0x2c) && near(g, 0xa0) && near(bl, 0x2c):
				green++
			case near(r, 0x1f) && near(g, 0x77) && near(bl, 0xb4):
				blue++
			}
		}
	}
	if green < 500 || blue < 500 {
		t.Errorf("screenshot has %d green and %d blue sampled pixels: charts not painted", green, blue)
	}
	if !bytes.HasPrefix(pdf, []byte("%PDF-")) || len(pdf) < 10000 {
		t.Errorf("printing gave no PDF (%d bytes)", len(pdf))
	}
}

// inChromium opens the file at path in headless Chromium and returns what
// the page shows, a full screenshot, the page printed, and every console
// error or request to anything but the file itself.
func inChromium(t *testing.T, bin, path string) (facts pageFacts, shot, pdf []byte, problems []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(bin), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-component-update", true),
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1200, 900))
	actx, acancel := chromedp.NewExecAllocator(ctx, opts...)
	defer acancel()
	bctx, bcancel := chromedp.NewContext(actx)
	defer bcancel()

	var mu sync.Mutex
	pageURL := "file://" + path
	if err := chromedp.Listen(bctx, func(ev any) {
		mu.Lock()
		defer mu.Unlock()
		switch e := ev.(type) {
		case *runtime.EventConsoleAPICalled:
			if e.Type == runtime.ConsoleAPICalledTypeError || e.Type == runtime.ConsoleAPICalledTypeWarning || e.Type == runtime.ConsoleAPICalledTypeAssert {
				problems = append(problems, fmt.Sprintf("console.%s", e.Type))
			}
		case *runtime.EventExceptionThrown:
			problems = append(problems, "exception: "+e.ExceptionDetails.Text)
		case *log.EventEntryAdded:
			if e.Entry.Level == log.EntryLevelError || e.Entry.Level == log.EntryLevelWarning {
				problems = append(problems, fmt.Sprintf("log %s: %s (%s)", e.Entry.Level, e.Entry.Text, e.Entry.URL))
			}
		case *network.EventRequestWillBeSent:
			if u := e.Request.URL; u != pageURL && !strings.HasPrefix(u, "data:") {
				problems = append(problems, "request to "+u)
			}
		}
	}); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	if err := chromedp.Do(bctx, chromedp.Navigate(pageURL), chromedp.WaitVisible(chromedp.CSS("svg"))); err != nil {
		t.Fatalf("open %s: %v", pageURL, err)
	}
	facts, err := chromedp.Run(bctx, chromedp.Evaluate[pageFacts](`(() => {
		const svgs = [...document.querySelectorAll(".charts svg")];
		return {
			title: document.title,
			headings: [...document.querySelectorAll("h2")].map(h => h.textContent),
			svgs: svgs.length,
			drawn: svgs.filter(s => { const r = s.getBoundingClientRect(); return r.width >= 200 && r.height >= 100; }).length,
			points: document.querySelectorAll(".charts svg circle:not(.pt)").length,
			tlPoints: document.querySelectorAll(".charts svg circle.pt").length,
			hover: (document.querySelector(".charts svg circle:not(.pt) > title") || {}).textContent || "",
			requests: document.querySelectorAll("details.req").length,
			chunkTip: (() => { const d = document.querySelector("details.req"); if (!d) return ""; d.open = true;
				const c = d.querySelector("circle.ch"); const r = c ? c.getBoundingClientRect() : {width: 0};
				return r.width > 0 ? c.querySelector("title").textContent : ""; })(),
			bars: document.querySelectorAll("svg rect").length,
			sloFail: document.querySelectorAll("table.slo td.fail").length,
			broken: document.querySelectorAll("table.slo td.broken").length,
			pageWidth: document.documentElement.scrollWidth,
			gpuCharts: svgs.filter(s => (s.getAttribute("aria-label") || "").startsWith("GPU ")).map(s => s.getAttribute("aria-label")),
			gpuDrawn: svgs.filter(s => (s.getAttribute("aria-label") || "").startsWith("GPU ")).filter(s => {
				const r = s.getBoundingClientRect(), l = s.querySelector("polyline");
				return r.width >= 200 && r.height >= 100 && l && l.getBoundingClientRect().width > 100; }).length,
			gpuTips: svgs.filter(s => (s.getAttribute("aria-label") || "").startsWith("GPU ")).map(s =>
				(s.querySelector("circle.gpu > title") || {}).textContent || ""),
			zoomWidth: (() => { const z = document.querySelector("details.zoom"); if (!z) return 0; z.open = true;
				const d = z.querySelector("div"); const w = d.scrollWidth > d.clientWidth ? d.scrollWidth : 0; z.open = false; return w; })(),
		};
	})()`))
	if err != nil {
		t.Fatalf("inspect the page: %v", err)
	}
	if shot, err = chromedp.Run(bctx, chromedp.FullScreenshot(100)); err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	if pdf, err = chromedp.Run(bctx, chromedp.PrintToPDF()); err != nil {
		t.Fatalf("print: %v", err)
	}
	// Console messages may trail the last command a little.
	time.Sleep(200 * time.Millisecond)
	keep, err := os.MkdirTemp("", "tokbench-report-")
	if err != nil {
		t.Fatal(err)
	}
	shotPath := filepath.Join(keep, strings.TrimSuffix(filepath.Base(path), ".html")+".png")
	if err := os.WriteFile(shotPath, shot, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot of %s: %s", filepath.Base(path), shotPath)
	// And one of each section: its heading to the last element before the
	// next heading (or the page's end).
	n, err := chromedp.Run(bctx, chromedp.Evaluate[int](`(() => {
		const hs = [...document.querySelectorAll("h2")];
		hs.forEach((h, i) => {
			h.dataset.sec = i;
			let last = h;
			for (let e = h.nextElementSibling; e && e.tagName !== "H2"; e = e.nextElementSibling) last = e;
			last.dataset.sec = i;
		});
		return hs.length;
	})()`))
	if err != nil {
		t.Fatalf("find the sections: %v", err)
	}
	for i := range n {
		nodes, err := chromedp.Run(bctx, chromedp.Nodes(chromedp.CSSAll(fmt.Sprintf(`[data-sec="%d"]`, i))))
		if err != nil || len(nodes) == 0 {
			t.Fatalf("section %d: %v", i, err)
		}
		png, err := chromedp.Run(bctx, chromedp.ScreenshotNodes(nodes, 1))
		if err != nil {
			t.Fatalf("section %d screenshot: %v", i, err)
		}
		name := strings.Map(func(r rune) rune {
			if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
				return r
			}
			return '-'
		}, strings.ToLower(facts.Headings[i]))
		p := filepath.Join(keep, fmt.Sprintf("%s-%02d-%s.png", strings.TrimSuffix(filepath.Base(path), ".html"), i+1, name))
		if err := os.WriteFile(p, png, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("section %q: %s", facts.Headings[i], p)
	}
	mu.Lock()
	defer mu.Unlock()
	return facts, shot, pdf, slices.Clone(problems)
}

// TestCompareInChromium: compare --html of two runs renders in Chromium:
// the three curves overlaid (each run's points), the verdict table, no
// console error, nothing loaded, a hover value on the points.
func TestCompareInChromium(t *testing.T) {
	bin, err := exec.LookPath("chromium")
	if err != nil {
		t.Skip("no chromium on PATH: install Debian's chromium package to test compare --html in a browser")
	}
	dir := t.TempDir()
	for _, r := range []struct{ name, hw string }{{"a", "h100-sxm"}, {"b", "a100-80gb"}} {
		if code, _, stderr := runCLI(context.Background(), nil, "bench", "--concurrency", "1,4", "--requests", "8", "--warmup", "0",
			"--input-tokens", "64", "--output-tokens", "16", "--hardware", r.hw, "--out", filepath.Join(dir, r.name)); code != 0 {
			t.Fatalf("bench %s: exit %d: %s", r.name, code, stderr)
		}
	}
	page := filepath.Join(dir, "compare.html")
	if code, _, stderr := runCLI(context.Background(), nil, "compare", filepath.Join(dir, "a"), filepath.Join(dir, "b"), "--html", page); code != 0 && code != ExitFailure {
		t.Fatalf("compare: exit %d: %s", code, stderr)
	}
	facts, _, _, problems := inChromium(t, bin, page)
	if len(problems) > 0 {
		t.Errorf("the page logged errors or loaded other resources: %q", problems)
	}
	// Decode p50, TTFT p50 and p95, output TPS: 4 series of 2 points, two runs.
	if facts.SVGs != 3 || facts.Drawn != 3 || facts.Points != 4*2*2 || !strings.Contains(facts.Hover, "c=1 ") {
		t.Errorf("%d SVGs (%d drawn), %d points, hover %q; want 3, 3, 16 and a value", facts.SVGs, facts.Drawn, facts.Points, facts.Hover)
	}
	if len(facts.Headings) != 2 || !strings.Contains(facts.Headings[1], "against") {
		t.Errorf("headings %q", facts.Headings)
	}
}

// near says a 16-bit colour channel is within 8 of an 8-bit value.
func near(c uint32, v int) bool {
	d := int(c>>8) - v
	return d >= -8 && d <= 8
}

// TestLargeReportInChromium: the report of a 20,000-request level of a
// steady stream (200 users, each request 20 tokens 10 ms apart after a
// 50 ms TTFT, the next sent as the last ends) is one file of a few MB that
// renders in Chromium: its charts drawn, hover values, the explorer a
// pick of 60, and tokens/s over time flat (no saw-tooth: tokens are drawn
// when they arrived).
func TestLargeReportInChromium(t *testing.T) {
	bin, err := exec.LookPath("chromium")
	if err != nil {
		t.Skip("no chromium on PATH")
	}
	dir := filepath.Join(t.TempDir(), "large")
	w, err := results.Create(dir)
	if err != nil {
		t.Fatal(err)
	}
	const users, each = 200, 100
	load := metrics.Load{Mode: metrics.ModeConcurrency, Concurrency: users}
	acc := metrics.NewAccumulator(load, nil)
	base := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	chunks := make([]float64, 20)
	tokens := make([]int, 20)
	for i := range chunks {
		chunks[i], tokens[i] = 50+10*float64(i), 1
	}
	id := 0
	for u := range users {
		for k := range each {
			id++
			off := float64(u)*240/users + float64(k)*240 // a request lasts 240 ms
			rec := metrics.Record{ID: id, Load: load, OK: true, Start: base.Add(time.Duration(off * 1e6)), OffsetMs: off,
				TTFTMs: 50, E2EMs: 240, DoneMs: 240, InputTokens: 64, OutputTokens: 20, TokenSource: metrics.SourceUsage,
				ChunkMs: chunks, ChunkTokens: tokens}
			acc.Add(&rec)
			if err := w.Append(rec); err != nil {
				t.Fatal(err)
			}
		}
	}
	s := metrics.Summary{Schema: metrics.Schema, Target: metrics.Target{URL: "http://127.0.0.1:1/v1", API: "openai-chat", Model: "m"},
		Levels: []metrics.Level{acc.Level(0)}}
	if err := w.WriteRun(results.Run{Tool: "tokbench", Target: s.Target}); err != nil {
		t.Fatal(err)
	}
	if err := w.WriteSummary(s); err != nil {
		t.Fatal(err)
	}
	w.Close()
	if err := report.WriteHTMLFile(dir); err != nil {
		t.Fatal(err)
	}
	page := filepath.Join(dir, "report.html")
	st, err := os.Stat(page)
	if err != nil || st.Size() > 5<<20 {
		t.Fatalf("report.html: %v, %d bytes (want a few MB at most)", err, st.Size())
	}
	facts, _, _, problems := inChromium(t, bin, page)
	if len(problems) > 0 {
		t.Errorf("the page logged errors or loaded other resources: %q", problems)
	}
	if facts.Drawn != facts.SVGs || facts.SVGs < 8 || !strings.Contains(facts.Hover, "c=200 ") || facts.Requests != 60 {
		t.Errorf("%d SVGs (%d drawn), hover %q, %d requests in the explorer", facts.SVGs, facts.Drawn, facts.Hover, facts.Requests)
	}
	// Steady: 200 users × 20 tokens every 240 ms is 16,667 tok/s; every
	// bin away from the level's two ends within a tenth of it.
	html, _ := os.ReadFile(page)
	var bins []float64
	for _, m := range regexp.MustCompile(`<title>[0-9.]+–[0-9.]+ s: ([0-9.,]+) tok/s</title>`).FindAllSubmatch(html, -1) {
		v, _ := strconv.ParseFloat(strings.ReplaceAll(string(m[1]), ",", ""), 64)
		bins = append(bins, v)
	}
	if len(bins) < 60 {
		t.Fatalf("%d timeline bins", len(bins))
	}
	for i, v := range bins[2 : 60-2] {
		if v < 15000 || v > 18300 {
			t.Errorf("bin %d: %.0f tok/s, want about 16,667 (a steady stream)", i+2, v)
		}
	}
	t.Logf("report.html of 20,000 requests: %.2f MB", float64(st.Size())/(1<<20))
}

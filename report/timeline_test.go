package report

import (
	"bytes"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/tokbench/tokbench/metrics"
)

func TestNewTimeline(t *testing.T) {
	recs := []metrics.Record{
		// A: t0 at 0, chunks at 100, 200, 300 ms carrying 1, 2, 3 tokens, ends at 400.
		{Level: 0, OK: true, OffsetMs: 0, ChunkMs: []float64{100, 200, 300}, ChunkTokens: []int{1, 2, 3}, DoneMs: 400},
		// B: t0 at 200, chunks at 300 and 700 ms (level time), ends at 800.
		{Level: 0, OK: true, OffsetMs: 200, ChunkMs: []float64{100, 500}, ChunkTokens: []int{4, 4}, DoneMs: 600},
		// C failed: in flight 100–150 ms; its 5 tokens are not output.
		{Level: 0, OffsetMs: 100, ChunkMs: []float64{20}, ChunkTokens: []int{5}, DoneMs: 50},
		// E starts the instant A ends (400 ms): still two in flight, not three.
		{Level: 0, OK: true, OffsetMs: 400, DoneMs: 100},
		// Another level is ignored.
		{Level: 1, OK: true, OffsetMs: 0, ChunkMs: []float64{10}, ChunkTokens: []int{99}, DoneMs: 5000},
	}
	tl, ok := NewTimeline(recs, 0, 4)
	if !ok {
		t.Fatal("NewTimeline: no timeline")
	}
	if tl.EndMs != 800 || tl.BinMs != 200 {
		t.Errorf("EndMs, BinMs = %g, %g, want 800, 200", tl.EndMs, tl.BinMs)
	}
	// Bins of 200 ms: 1 token, 2+3+4, none, 4 → per second ×5.
	if want := []float64{5, 45, 0, 20}; !reflect.DeepEqual(tl.TokensPerSec, want) {
		t.Errorf("TokensPerSec = %v, want %v", tl.TokensPerSec, want)
	}
	want := []Step{{0, 1}, {100, 2}, {150, 1}, {200, 2}, {400, 2}, {500, 1}, {800, 0}}
	if !reflect.DeepEqual(tl.InFlight, want) {
		t.Errorf("InFlight = %v, want %v", tl.InFlight, want)
	}
	if tl.MaxInFlight != 2 {
		t.Errorf("MaxInFlight = %d, want 2", tl.MaxInFlight)
	}
	if _, ok := NewTimeline(recs, 2, 4); ok {
		t.Error("NewTimeline of a level without records: ok")
	}
}

func TestTimelineLevel(t *testing.T) {
	lv := func(sent int) metrics.Level { return metrics.Level{Requests: metrics.Requests{Sent: sent}} }
	for _, c := range []struct {
		sent []int
		want int
	}{{nil, -1}, {[]int{4}, 0}, {[]int{4, 16, 8}, 1}, {[]int{16, 16}, 1}} {
		s := metrics.Summary{}
		for _, n := range c.sent {
			s.Levels = append(s.Levels, lv(n))
		}
		if got := TimelineLevel(s); got != c.want {
			t.Errorf("TimelineLevel(%v) = %d, want %d", c.sent, got, c.want)
		}
	}
}

func TestWriteHTMLSLOPanelAndTimeline(t *testing.T) {
	s, recs := fixture()
	s.SLOs = []string{"ttft_p95<=500ms", "tps_p5>=60"}
	s.Levels[0].SLO = &metrics.SLOResult{Met: true, Checks: []metrics.SLOCheck{{Expr: "ttft_p95<=500ms", Value: 385, Met: true}, {Expr: "tps_p5>=60", Value: 100, Met: true}}}
	s.Levels[1].SLO = &metrics.SLOResult{Met: false, Checks: []metrics.SLOCheck{{Expr: "ttft_p95<=500ms", Value: 1000, Met: false}, {Expr: "tps_p5>=60", Value: 50, Met: false}}}
	s.Capacity = &metrics.Capacity{Statement: "holds 1 user at ttft_p95<=500ms and tps_p5>=60"}
	s.Knee = &metrics.Knee{Statement: "knee at 1 user: 22 tok/s aggregate"}
	var b bytes.Buffer
	if err := WriteHTML(&b, Page{Summary: s, Records: recs}); err != nil {
		t.Fatal(err)
	}
	html := b.String()
	for _, want := range []string{
		"<h2>Service-level objectives</h2>",
		"<code>ttft_p95&lt;=500ms</code>, <code>tps_p5&gt;=60</code>",
		"Capacity: holds 1 user at ttft_p95&lt;=500ms and tps_p5&gt;=60",
		"Knee: knee at 1 user: 22 tok/s aggregate",
		`<td rowspan="2">c=1</td><td rowspan="2" class="pass">✓ PASS</td><td><code>ttft_p95&lt;=500ms</code></td><td class="n">385.0</td><td class="ok">met</td>`,
		`<td rowspan="2">c=4</td><td rowspan="2" class="fail">✗ FAIL</td><td><code>ttft_p95&lt;=500ms</code></td><td class="n">1000</td><td class="broken">BROKEN</td>`,
		`<td><code>tps_p5&gt;=60</code></td><td class="n">50.00</td><td class="broken">BROKEN</td>`,
		// Both levels sent 4 requests: the timeline is of the last, c=4.
		"<h2>Timeline of c=4</h2>",
		"Output tokens/s over time at c=4", "Requests in flight over time at c=4",
		// Three completed requests overlap from 60 ms on; the 429 ended at 3 ms.
		"<title>at most 3 requests in flight</title>",
		"@media print{",
	} {
		if !strings.Contains(html, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	// The timeline's bars add up to the level's output tokens: 3 × 11.
	tl, _ := NewTimeline(recs, 1, timelineBins(4))
	total := 0.0
	for _, v := range tl.TokensPerSec {
		total += v * tl.BinMs / 1000
	}
	if d := total - float64(s.Levels[1].OutputTokens); d > 1e-9 || d < -1e-9 || s.Levels[1].OutputTokens != 33 {
		t.Errorf("timeline tokens = %g, level output tokens = %d, want 33", total, s.Levels[1].OutputTokens)
	}
}

// TestTimelineTTFTAndErrors: the TTFT of the requests started in each
// bin, and the failures by the bin they ended in.
func TestTimelineTTFTAndErrors(t *testing.T) {
	recs := []metrics.Record{
		{OK: true, OffsetMs: 0, TTFTMs: 10, DoneMs: 100, ChunkMs: []float64{10}, ChunkTokens: []int{1}},
		{OK: true, OffsetMs: 50, TTFTMs: 30, DoneMs: 100, ChunkMs: []float64{30}, ChunkTokens: []int{1}},
		{OK: true, OffsetMs: 50, TTFTMs: 20, DoneMs: 100, ChunkMs: []float64{20}, ChunkTokens: []int{1}},
		{OK: false, OffsetMs: 300, DoneMs: 100, ErrorClass: "timeout"},
	}
	tl, ok := NewTimeline(recs, 0, 4) // 4 bins of 100 ms
	if !ok || tl.BinMs != 100 {
		t.Fatalf("timeline %+v", tl)
	}
	if tl.TTFTP50[0] != 20 || tl.TTFTMax[0] != 30 || !math.IsNaN(tl.TTFTP50[1]) {
		t.Errorf("TTFT by start bin: p50 %v max %v", tl.TTFTP50, tl.TTFTMax)
	}
	if tl.Errors[3] != 1 || tl.Errors[0]+tl.Errors[1]+tl.Errors[2] != 0 {
		t.Errorf("errors by bin %v, want the one in the last", tl.Errors)
	}
}

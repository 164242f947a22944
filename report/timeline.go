package report

import (
	"fmt"
	"html/template"
	"math"
	"sort"
	"strings"

	"github.com/tokbench/tokbench/metrics"
)

// Timeline is one level seen over time: output tokens per second in equal
// bins and the number of requests in flight, from the per-request records.
type Timeline struct {
	Level int // index of the level in the summary
	// EndMs is the end of the level: the last response's end, from the
	// level's start.
	EndMs float64
	// BinMs is the width of every bin of TokensPerSec.
	BinMs float64
	// TokensPerSec[i] is the output tokens of completed requests whose
	// chunks arrived in [i·BinMs, (i+1)·BinMs), per second.
	TokensPerSec []float64
	// InFlight is a step function: InFlight[i].N requests were in flight
	// from InFlight[i].AtMs until the next step. A request is in flight
	// from its t0 to the end of its response, failed or not.
	InFlight []Step
	// MaxInFlight is the highest count of requests in flight.
	MaxInFlight int
	// TTFTP50[i] and TTFTMax[i] are the TTFT of the completed requests
	// that started in bin i (NaN: none started); Errors[i] the failed
	// requests that ended in it.
	TTFTP50, TTFTMax []float64
	Errors           []int
}

// Step is one step of a step function.
type Step struct {
	AtMs float64
	N    int
}

// TimelineLevel picks the level a timeline shows: the one with the most
// requests sent, the last of those on a tie (usually the heaviest load).
// It returns -1 when there are no levels.
func TimelineLevel(s metrics.Summary) int {
	best := -1
	for i, lv := range s.Levels {
		if best < 0 || lv.Requests.Sent >= s.Levels[best].Requests.Sent {
			best = i
		}
	}
	return best
}

// NewTimeline computes the timeline of level from records (records of other
// levels are ignored) in at most bins bins. ok is false when the level has
// no records.
func NewTimeline(recs []metrics.Record, level, bins int) (tl Timeline, ok bool) {
	tl.Level = level
	type event struct {
		at    float64
		delta int
	}
	var events []event
	for i := range recs {
		r := &recs[i]
		if r.Level != level {
			continue
		}
		tl.EndMs = max(tl.EndMs, r.OffsetMs+r.DoneMs)
		events = append(events, event{r.OffsetMs, +1}, event{r.OffsetMs + r.DoneMs, -1})
	}
	if len(events) == 0 || tl.EndMs <= 0 || bins < 1 {
		return tl, false
	}
	tl.BinMs = tl.EndMs / float64(bins)
	tokens := make([]float64, bins)
	for i := range recs {
		r := &recs[i]
		if r.Level != level || !r.OK {
			continue
		}
		for j, t := range r.ChunkMs {
			b := min(int((r.OffsetMs+t)/tl.BinMs), bins-1)
			tokens[max(b, 0)] += float64(r.ChunkTokens[j])
		}
	}
	tl.TokensPerSec = make([]float64, bins)
	for i, n := range tokens {
		tl.TokensPerSec[i] = n / (tl.BinMs / 1000)
	}
	bin := func(ms float64) int { return max(min(int(ms/tl.BinMs), bins-1), 0) }
	started := make([][]float64, bins)
	tl.Errors = make([]int, bins)
	for i := range recs {
		r := &recs[i]
		switch {
		case r.Level != level:
		case r.OK:
			b := bin(r.OffsetMs)
			started[b] = append(started[b], r.TTFTMs)
		default:
			tl.Errors[bin(r.OffsetMs+r.DoneMs)]++
		}
	}
	tl.TTFTP50, tl.TTFTMax = make([]float64, bins), make([]float64, bins)
	for i, v := range started {
		tl.TTFTP50[i], tl.TTFTMax[i] = math.NaN(), math.NaN()
		if len(v) > 0 {
			sort.Float64s(v)
			tl.TTFTP50[i], tl.TTFTMax[i] = metrics.Percentile(v, 50), v[len(v)-1]
		}
	}
	// Ends before starts at the same instant: a closed-loop user's next
	// request starts as the previous one ends, and that is one in flight,
	// not two.
	sort.Slice(events, func(a, b int) bool {
		if events[a].at != events[b].at {
			return events[a].at < events[b].at
		}
		return events[a].delta < events[b].delta
	})
	n := 0
	tl.InFlight = append(tl.InFlight, Step{0, 0})
	for _, e := range events {
		n += e.delta
		tl.MaxInFlight = max(tl.MaxInFlight, n)
		if last := &tl.InFlight[len(tl.InFlight)-1]; last.AtMs == e.at {
			last.N = n
		} else {
			tl.InFlight = append(tl.InFlight, Step{e.at, n})
		}
	}
	return tl, true
}

// timeCharts draws a timeline over the level's time in seconds, charts w
// wide: tokens/s per bin as bars, requests in flight as a step line, the
// TTFT of the requests started per bin, and failures when there were any.
func timeCharts(tl Timeline, name string, w float64) []template.HTML {
	endS := tl.EndMs / 1000
	pw, ph := w-padL-padR, chartH-padT-padB
	x := func(ms float64) float64 { return padL + pw*ms/tl.EndMs }
	xAxis := func(b *strings.Builder) {
		_, step := niceScale(endS * chartW / w) // ticks as dense as at the normal width
		for v := 0.0; v <= endS+1e-9; v += step {
			fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="middle" font-size="11">%s</text>`, x(v*1000), padT+ph+16, trimNum(v))
		}
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="middle" font-size="11">seconds since the level started</text>`, padL+pw/2, padT+ph+32)
	}

	var tb strings.Builder
	top := 0.0
	for _, v := range tl.TokensPerSec {
		top = max(top, v)
	}
	ymax, step := niceScale(top)
	svgOpenW(&tb, "Output tokens/s over time at "+name, w)
	axesW(&tb, "tok/s", ymax, step, w)
	xAxis(&tb)
	for i, v := range tl.TokensPerSec {
		h := ph * v / ymax
		x0 := x(float64(i) * tl.BinMs)
		fmt.Fprintf(&tb, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="#2ca02c"><title>%s–%s s: %s tok/s</title></rect>`,
			x0, padT+ph-h, max(x(float64(i+1)*tl.BinMs)-x0-0.5, 0.5), h, trimNum(float64(i)*tl.BinMs/1000), trimNum(float64(i+1)*tl.BinMs/1000), num(v, 1))
	}
	tb.WriteString("</svg>")

	var fb strings.Builder
	ymax, step = niceScale(float64(tl.MaxInFlight))
	svgOpenW(&fb, "Requests in flight over time at "+name, w)
	axesW(&fb, "requests", ymax, step, w)
	xAxis(&fb)
	y := func(n int) float64 { return padT + ph*(1-float64(n)/ymax) }
	var pts []string
	for i, s := range tl.InFlight {
		if i > 0 {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(s.AtMs), y(tl.InFlight[i-1].N)))
		}
		pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(s.AtMs), y(s.N)))
	}
	pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(tl.EndMs), y(tl.InFlight[len(tl.InFlight)-1].N)))
	fmt.Fprintf(&fb, `<polyline fill="none" stroke="#1f77b4" stroke-width="1.5" points="%s"><title>at most %d requests in flight</title></polyline>`,
		strings.Join(pts, " "), tl.MaxInFlight)
	fb.WriteString("</svg>")
	charts := []template.HTML{template.HTML(tb.String()), template.HTML(fb.String())}

	// TTFT of the requests started in each bin: p50 and the slowest.
	var lb strings.Builder
	top = 0
	for _, v := range tl.TTFTMax {
		if !math.IsNaN(v) {
			top = max(top, v)
		}
	}
	if top > 0 {
		ymax, step = niceScale(top)
		svgOpenW(&lb, "TTFT of the requests started over time at "+name, w)
		axesW(&lb, "TTFT ms", ymax, step, w)
		xAxis(&lb)
		yv := func(v float64) float64 { return padT + ph*(1-v/ymax) }
		for _, line := range []struct {
			vals  []float64
			color string
			name  string
		}{{tl.TTFTMax, "#d62728", "slowest"}, {tl.TTFTP50, "#1f77b4", "p50"}} {
			var seg []string
			flush := func() {
				if len(seg) > 1 {
					fmt.Fprintf(&lb, `<polyline fill="none" stroke="%s" stroke-width="1.5" points="%s"/>`, line.color, strings.Join(seg, " "))
				}
				seg = nil
			}
			for i, v := range line.vals {
				if math.IsNaN(v) {
					flush()
					continue
				}
				cx := x((float64(i) + 0.5) * tl.BinMs)
				seg = append(seg, fmt.Sprintf("%.1f,%.1f", cx, yv(v)))
				fmt.Fprintf(&lb, `<circle class="pt" cx="%.1f" cy="%.1f" r="2.5" fill="%s"><title>started %s–%s s: TTFT %s %s ms</title></circle>`,
					cx, yv(v), line.color, trimNum(float64(i)*tl.BinMs/1000), trimNum(float64(i+1)*tl.BinMs/1000), line.name, num(v, 1))
			}
			flush()
		}
		lb.WriteString("</svg>")
		charts = append(charts, template.HTML(lb.String()))
	}

	// Errors by the bin they ended in, drawn when there were any.
	maxErr := 0
	for _, n := range tl.Errors {
		maxErr = max(maxErr, n)
	}
	if maxErr > 0 {
		var eb strings.Builder
		ymax, step = niceScale(float64(maxErr))
		svgOpenW(&eb, "Failed requests over time at "+name, w)
		axesW(&eb, "errors", ymax, step, w)
		xAxis(&eb)
		for i, n := range tl.Errors {
			h := ph * float64(n) / ymax
			x0 := x(float64(i) * tl.BinMs)
			fmt.Fprintf(&eb, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="#d62728"><title>%s–%s s: %d failed</title></rect>`,
				x0, padT+ph-h, max(x(float64(i+1)*tl.BinMs)-x0-0.5, 0.5), h, trimNum(float64(i)*tl.BinMs/1000), trimNum(float64(i+1)*tl.BinMs/1000), n)
		}
		eb.WriteString("</svg>")
		charts = append(charts, template.HTML(eb.String()))
	}
	return charts
}

// timelineBins is how many bins a timeline of n requests gets: enough to
// see the shape, few enough that a bin holds several chunks.
func timelineBins(n int) int {
	return min(60, max(10, int(math.Sqrt(float64(n))*6)))
}

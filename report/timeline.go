package report

import (
	"fmt"
	"html/template"
	"math"
	"slices"
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
func timeCharts(tl Timeline, name string, w float64, gpu *metrics.GPU) []template.HTML {
	f := timeFrame{tl: tl, w: w, pw: w - padL - padR, ph: chartH - padT - padB}
	charts := []template.HTML{f.tokens(name)}
	charts = append(charts, f.gpu(name, gpu)...)
	charts = append(charts, f.inFlight(name))
	if c, ok := f.ttft(name); ok {
		charts = append(charts, c)
	}
	if c, ok := f.errors(name); ok {
		charts = append(charts, c)
	}
	return charts
}

// gpu draws the GPUs' power and, when the counters gave it, their memory
// activity over the level's first run (bench --gpu-telemetry), on the
// tokens/s chart's time axis: none without a GPU timeline.
func (f timeFrame) gpu(name string, g *metrics.GPU) []template.HTML {
	if g == nil || len(g.Timeline) == 0 {
		return nil
	}
	top, hasMem := 0.0, false
	for _, p := range g.Timeline {
		top = max(top, p.PowerWatts)
		hasMem = hasMem || p.MemoryActivity != nil
	}
	charts := []template.HTML{f.samples("GPU power over time at "+name, "W", top, "#ff7f0e", g.Timeline,
		func(p metrics.GPUSample) (float64, bool) { return p.PowerWatts, true },
		func(v float64) string { return num(v, 1) + " W" })}
	if hasMem {
		charts = append(charts, f.samples("GPU memory activity over time at "+name, "% busy", 100, "#9467bd", g.Timeline,
			func(p metrics.GPUSample) (float64, bool) {
				if p.MemoryActivity == nil {
					return 0, false
				}
				return 100 * *p.MemoryActivity, true
			},
			func(v float64) string { return num(v, 1) + "% of cycles the memory was busy" }))
	}
	return charts
}

// samples draws one value of each GPU sample within the level as a line
// through points, each with its value as a tooltip.
func (f timeFrame) samples(title, unit string, top float64, color string, pts []metrics.GPUSample,
	value func(metrics.GPUSample) (float64, bool), label func(float64) string) template.HTML {
	var b strings.Builder
	ymax := f.open(&b, title, unit, top)
	var line []string
	var dots strings.Builder
	for _, p := range pts {
		v, ok := value(p)
		if !ok || p.AtMs > f.tl.EndMs {
			continue
		}
		x, y := f.x(p.AtMs), padT+f.ph*(1-v/ymax)
		line = append(line, fmt.Sprintf("%.1f,%.1f", x, y))
		fmt.Fprintf(&dots, `<circle class="gpu" cx="%.1f" cy="%.1f" r="2" fill="%s"><title>%s s: %s</title></circle>`,
			x, y, color, trimNum(math.Round(p.AtMs)/1000), label(v))
	}
	if len(line) > 1 {
		fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="1.5" points="%s"/>`, color, strings.Join(line, " "))
	}
	b.WriteString(dots.String())
	b.WriteString("</svg>")
	return template.HTML(b.String())
}

// timeFrame is a timeline chart's frame: the level's time across w.
type timeFrame struct {
	tl     Timeline
	w      float64
	pw, ph float64 // the plot's size
}

func (f timeFrame) x(ms float64) float64 { return padL + f.pw*ms/f.tl.EndMs }

// open starts a chart of values up to top, with its axes, and returns its
// y scale's maximum.
func (f timeFrame) open(b *strings.Builder, title, unit string, top float64) float64 {
	ymax, step := niceScale(top)
	svgOpenW(b, title, f.w)
	axesW(b, unit, ymax, step, f.w)
	endS := f.tl.EndMs / 1000
	_, xstep := niceScale(endS * chartW / f.w) // ticks as dense as at the normal width
	for v := 0.0; v <= endS+1e-9; v += xstep {
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="middle" font-size="11">%s</text>`, f.x(v*1000), padT+f.ph+16, trimNum(v))
	}
	fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="middle" font-size="11">seconds since the level started</text>`, padL+f.pw/2, padT+f.ph+32)
	return ymax
}

// bin is bin i's span in seconds, as a label.
func (f timeFrame) bin(i int) string {
	return trimNum(float64(i)*f.tl.BinMs/1000) + "–" + trimNum(float64(i+1)*f.tl.BinMs/1000) + " s"
}

// bars draws one bar per bin, labelled by label.
func (f timeFrame) bars(b *strings.Builder, vals []float64, ymax float64, color string, label func(float64) string) {
	for i, v := range vals {
		h := f.ph * v / ymax
		x0 := f.x(float64(i) * f.tl.BinMs)
		fmt.Fprintf(b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"><title>%s: %s</title></rect>`,
			x0, padT+f.ph-h, max(f.x(float64(i+1)*f.tl.BinMs)-x0-0.5, 0.5), h, color, f.bin(i), label(v))
	}
}

func (f timeFrame) tokens(name string) template.HTML {
	var b strings.Builder
	ymax := f.open(&b, "Output tokens/s over time at "+name, "tok/s", slices.Max(append([]float64{0}, f.tl.TokensPerSec...)))
	f.bars(&b, f.tl.TokensPerSec, ymax, "#2ca02c", func(v float64) string { return num(v, 1) + " tok/s" })
	b.WriteString("</svg>")
	return template.HTML(b.String())
}

func (f timeFrame) inFlight(name string) template.HTML {
	var b strings.Builder
	tl := f.tl
	ymax := f.open(&b, "Requests in flight over time at "+name, "requests", float64(tl.MaxInFlight))
	y := func(n int) float64 { return padT + f.ph*(1-float64(n)/ymax) }
	var pts []string
	for i, s := range tl.InFlight {
		if i > 0 {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", f.x(s.AtMs), y(tl.InFlight[i-1].N)))
		}
		pts = append(pts, fmt.Sprintf("%.1f,%.1f", f.x(s.AtMs), y(s.N)))
	}
	pts = append(pts, fmt.Sprintf("%.1f,%.1f", f.x(tl.EndMs), y(tl.InFlight[len(tl.InFlight)-1].N)))
	fmt.Fprintf(&b, `<polyline fill="none" stroke="#1f77b4" stroke-width="1.5" points="%s"><title>at most %d requests in flight</title></polyline>`,
		strings.Join(pts, " "), tl.MaxInFlight)
	b.WriteString("</svg>")
	return template.HTML(b.String())
}

// ttft draws the TTFT of the requests started in each bin: p50 and the
// slowest (none when no request completed).
func (f timeFrame) ttft(name string) (template.HTML, bool) {
	top := 0.0
	for _, v := range f.tl.TTFTMax {
		if !math.IsNaN(v) {
			top = max(top, v)
		}
	}
	if top <= 0 {
		return "", false
	}
	var b strings.Builder
	ymax := f.open(&b, "TTFT of the requests started over time at "+name, "TTFT ms", top)
	yv := func(v float64) float64 { return padT + f.ph*(1-v/ymax) }
	for _, line := range []struct {
		vals        []float64
		color, name string
	}{{f.tl.TTFTMax, "#d62728", "slowest"}, {f.tl.TTFTP50, "#1f77b4", "p50"}} {
		var seg []string
		flush := func() {
			if len(seg) > 1 {
				fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="1.5" points="%s"/>`, line.color, strings.Join(seg, " "))
			}
			seg = nil
		}
		for i, v := range line.vals {
			if math.IsNaN(v) {
				flush()
				continue
			}
			cx := f.x((float64(i) + 0.5) * f.tl.BinMs)
			seg = append(seg, fmt.Sprintf("%.1f,%.1f", cx, yv(v)))
			fmt.Fprintf(&b, `<circle class="pt" cx="%.1f" cy="%.1f" r="2.5" fill="%s"><title>started %s: TTFT %s %s ms</title></circle>`,
				cx, yv(v), line.color, f.bin(i), line.name, num(v, 1))
		}
		flush()
	}
	b.WriteString("</svg>")
	return template.HTML(b.String()), true
}

// errors draws the failed requests by the bin they ended in (none when
// nothing failed).
func (f timeFrame) errors(name string) (template.HTML, bool) {
	vals := make([]float64, len(f.tl.Errors))
	top := 0.0
	for i, n := range f.tl.Errors {
		vals[i] = float64(n)
		top = max(top, vals[i])
	}
	if top == 0 {
		return "", false
	}
	var b strings.Builder
	ymax := f.open(&b, "Failed requests over time at "+name, "errors", top)
	f.bars(&b, vals, ymax, "#d62728", func(v float64) string { return fmt.Sprintf("%.0f failed", v) })
	b.WriteString("</svg>")
	return template.HTML(b.String()), true
}

// timelineBins is how many bins a timeline of n requests gets: enough to
// see the shape, few enough that a bin holds several chunks.
func timelineBins(n int) int {
	return min(60, max(10, int(math.Sqrt(float64(n))*6)))
}

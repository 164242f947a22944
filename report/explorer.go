package report

import (
	"cmp"
	"fmt"
	"html/template"
	"slices"
	"strings"

	"github.com/tokbench/tokbench/metrics"
)

// explored is one request of the explorer: a line to pick it by, and
// when opened its phases, tokens and chunk timeline.
type explored struct {
	Summary string
	Facts   [][2]string
	Chart   template.HTML
}

// explorerMax bounds the requests the explorer lists.
const explorerMax = 60

// explorer picks the requests of level to list: the slowest by TTFT,
// the slowest by decode rate, the failed, and an even spread of the rest,
// explorerMax at most, in the order they were sent. It says how many of
// the level's requests it lists.
func explorer(recs []metrics.Record, level, total int) ([]explored, string) {
	var of []*metrics.Record
	for i := range recs {
		if recs[i].Level == level {
			of = append(of, &recs[i])
		}
	}
	if len(of) == 0 {
		return nil, ""
	}
	pick := map[*metrics.Record]bool{}
	add := func(rs []*metrics.Record, n int) {
		for _, r := range rs {
			if n == 0 || len(pick) >= explorerMax {
				return
			}
			if !pick[r] {
				pick[r] = true
				n--
			}
		}
	}
	byTTFT := slices.Clone(of)
	slices.SortFunc(byTTFT, func(a, b *metrics.Record) int { return cmp.Compare(b.TTFTMs, a.TTFTMs) })
	add(slices.DeleteFunc(byTTFT, func(r *metrics.Record) bool { return !r.OK }), 10)
	byTPS := slices.Clone(of)
	tps := func(r *metrics.Record) float64 { v, _ := r.DecodeTPS(); return v }
	byTPS = slices.DeleteFunc(byTPS, func(r *metrics.Record) bool { _, ok := r.DecodeTPS(); return !ok })
	slices.SortFunc(byTPS, func(a, b *metrics.Record) int { return cmp.Compare(tps(a), tps(b)) })
	add(byTPS, 10)
	add(slices.DeleteFunc(slices.Clone(of), func(r *metrics.Record) bool { return r.OK }), 10)
	if n := explorerMax - len(pick); n > 0 {
		step := max(len(of)/n, 1)
		for off := 0; off < step && len(pick) < explorerMax; off += max(step/2, 1) {
			for i := off; i < len(of) && len(pick) < explorerMax; i += step {
				pick[of[i]] = true
			}
		}
	}
	list := make([]*metrics.Record, 0, len(pick))
	for r := range pick {
		list = append(list, r)
	}
	slices.SortFunc(list, func(a, b *metrics.Record) int {
		return cmp.Or(cmp.Compare(a.OffsetMs, b.OffsetMs), cmp.Compare(a.ID, b.ID))
	})
	out := make([]explored, len(list))
	for i, r := range list {
		out[i] = exploredOf(r)
	}
	note := fmt.Sprintf("%d of the level's %d requests: the slowest to a first token, the slowest to decode, the failed, and an even spread of the rest", len(list), max(total, len(of)))
	if len(list) == len(of) {
		note = fmt.Sprintf("all %d of the level's requests", len(of))
	}
	return out, note
}

func exploredOf(r *metrics.Record) explored {
	e := explored{}
	if r.OK {
		tps := "—"
		if v, ok := r.DecodeTPS(); ok {
			tps = num(v, 1)
		}
		e.Summary = fmt.Sprintf("#%d at %s s: TTFT %s ms, %d tokens, decode %s tok/s, E2E %s ms", r.ID, trimNum(r.OffsetMs/1000),
			num(r.TTFTMs, 1), r.OutputTokens, tps, num(r.E2EMs, 1))
	} else {
		e.Summary = fmt.Sprintf("#%d at %s s: failed, %s", r.ID, trimNum(r.OffsetMs/1000), r.ErrorClass)
	}
	add := func(k, v string) { e.Facts = append(e.Facts, [2]string{k, v}) }
	add("tokens", fmt.Sprintf("%d in, %d out (%s), %d chunks", r.InputTokens, r.OutputTokens, cmp.Or(r.TokenSource, "?"), len(r.ChunkMs)))
	if r.ReasoningTokens > 0 {
		add("reasoning tokens", fmt.Sprint(r.ReasoningTokens))
	}
	if p := r.Phases; p != nil {
		add("phases", fmt.Sprintf("connection wait %s ms (reused %v), connect %s ms, TLS %s ms, write %s ms, first byte %s ms",
			num(p.ConnWaitMs, 1), p.Reused, num(p.ConnectMs, 1), num(p.TLSMs, 1), num(p.WriteMs, 1), num(p.FirstByteMs, 1)))
	}
	if r.QueueMs != 0 {
		add("sent late by", num(r.QueueMs, 1)+" ms (open loop)")
	}
	if r.Error != "" {
		add("error", r.Error)
	}
	if r.FinishReason != "" {
		add("finish", r.FinishReason)
	}
	e.Chart = chunkChart(r)
	return e
}

// chunkChart draws a request's tokens as they arrived: cumulative output
// tokens against milliseconds from its t0, a point per chunk.
func chunkChart(r *metrics.Record) template.HTML {
	if len(r.ChunkMs) == 0 {
		return ""
	}
	const w, h, pl, pb = 520.0, 160.0, 50.0, 28.0
	end := max(r.ChunkMs[len(r.ChunkMs)-1], 1)
	ymax, _ := niceScale(float64(max(r.OutputTokens, 1)))
	x := func(ms float64) float64 { return pl + (w-pl-10)*ms/end }
	y := func(n float64) float64 { return 10 + (h-10-pb)*(1-n/ymax) }
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" role="img" aria-label="tokens of request %d over time">`, w, h, w, h, r.ID)
	fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#888"/><line x1="%.1f" y1="10" x2="%.1f" y2="%.1f" stroke="#888"/>`,
		pl, h-pb, w-10, h-pb, pl, pl, h-pb)
	fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" font-size="11" text-anchor="middle">ms from the request's t0 (last chunk at %s)</text>`, (pl+w)/2, h-8, num(end, 1))
	fmt.Fprintf(&b, `<text x="%.1f" y="20" font-size="11" text-anchor="end">%s</text><text x="%.1f" y="%.1f" font-size="11" text-anchor="end">0</text>`, pl-4, trimNum(ymax), pl-4, h-pb)
	var pts []string
	n := 0
	for i, t := range r.ChunkMs {
		n += r.ChunkTokens[i]
		pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(t), y(float64(n))))
	}
	fmt.Fprintf(&b, `<polyline fill="none" stroke="#1f77b4" stroke-width="1.2" points="%s"/>`, strings.Join(pts, " "))
	n = 0
	for i, t := range r.ChunkMs {
		n += r.ChunkTokens[i]
		fmt.Fprintf(&b, `<circle class="ch" cx="%.1f" cy="%.1f" r="1.8" fill="#1f77b4"><title>chunk %d at %s ms: %d tokens (%d so far)</title></circle>`,
			x(t), y(float64(n)), i+1, num(t, 1), r.ChunkTokens[i], n)
	}
	b.WriteString("</svg>")
	return template.HTML(b.String())
}

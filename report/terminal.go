package report

import (
	"fmt"
	"io"
	"math"
	"strings"

	"github.com/tokbench/tokbench/metrics"
)

// TerminalCharts writes compact charts for a terminal of width columns,
// drawn with Unicode block characters: the degradation curve (aggregate
// output TPS and per-user decode TPS p50 at each level, as bars scaled to
// the highest value of their column) when there are two levels or more,
// and a histogram of TTFT at the level with the most requests
// (TimelineLevel) when recs holds its records. It writes nothing when
// there is nothing to draw.
func TerminalCharts(w io.Writer, s metrics.Summary, recs []metrics.Record, width int) error {
	width = max(width, 60)
	var b strings.Builder
	if len(s.Levels) >= 2 {
		degradation(&b, s, width)
	}
	if li := TimelineLevel(s); li >= 0 {
		var ttft []float64
		for i := range recs {
			if recs[i].Level == li && recs[i].OK {
				ttft = append(ttft, recs[i].TTFTMs)
			}
		}
		if len(ttft) > 0 {
			if b.Len() > 0 {
				b.WriteString("\n")
			}
			title := fmt.Sprintf("TTFT at %s (%d requests)", s.Levels[li].Load, len(ttft))
			if done := s.Levels[li].Requests.Completed; done > len(ttft) {
				title = fmt.Sprintf("TTFT at %s (a uniform sample of %d of %d requests)", s.Levels[li].Load, len(ttft), done)
			}
			termHistogram(&b, title, "ms", ttft, width)
		}
	}
	if b.Len() == 0 {
		return nil
	}
	_, err := io.WriteString(w, "\n"+b.String())
	return err
}

// degradation writes one row per level: the load, a bar and the value of
// aggregate output TPS, then of decode TPS p50.
func degradation(b *strings.Builder, s metrics.Summary, width int) {
	labelW, numW := len("load"), 6
	topOut, topDec := 0.0, 0.0
	for _, lv := range s.Levels {
		labelW = max(labelW, len([]rune(lv.Load.String())))
		topOut = max(topOut, lv.OutputTPS)
		numW = max(numW, len(num(lv.OutputTPS, 1)))
		if lv.DecodeTPS.Count > 0 {
			topDec = max(topDec, lv.DecodeTPS.P50)
			numW = max(numW, len(num(lv.DecodeTPS.P50, 1)))
		}
	}
	// label, two spaces, then per column: bar, space, number, three spaces.
	cells := max((width-labelW-2-2*(1+numW)-3)/2, 8)
	fmt.Fprintf(b, "%*s  %-*s   %s\n", labelW, "load", cells+1+numW, "output tok/s (all users)", "decode tok/s p50 (per user)")
	for _, lv := range s.Levels {
		dec := "-"
		decBar := strings.Repeat(" ", cells)
		if lv.DecodeTPS.Count > 0 {
			dec = num(lv.DecodeTPS.P50, 1)
			decBar = bar(lv.DecodeTPS.P50, topDec, cells)
		}
		fmt.Fprintf(b, "%*s  %s %*s   %s %*s\n", labelW, lv.Load, bar(lv.OutputTPS, topOut, cells), numW, num(lv.OutputTPS, 1), decBar, numW, dec)
	}
	for _, lv := range s.Levels {
		if ph := lv.Physics; ph != nil && ph.DecodeTPSCeiling > 0 {
			fmt.Fprintf(b, "%*s  single-stream ceiling %s tok/s (%s)\n", labelW, "", num(ph.DecodeTPSCeiling, 1), ph.Deployment)
			break
		}
	}
}

// termHistogram writes values in up to 10 equal bins, one row per bin:
// the bin's range, a bar and the count.
func termHistogram(b *strings.Builder, title, unit string, values []float64, width int) {
	lo, hi := values[0], values[0]
	for _, v := range values {
		lo, hi = min(lo, v), max(hi, v)
	}
	bins := min(10, max(1, int(math.Ceil(math.Sqrt(float64(len(values)))))))
	step := (hi - lo) / float64(bins)
	if step == 0 {
		bins, step = 1, 1
	}
	counts := make([]int, bins)
	top := 0
	for _, v := range values {
		i := min(int((v-lo)/step), bins-1)
		counts[i]++
		top = max(top, counts[i])
	}
	labels := make([]string, bins)
	labelW := 0
	for i := range counts {
		if bins == 1 && hi == lo {
			labels[i] = num(lo, 1)
		} else {
			labels[i] = num(lo+step*float64(i), 1) + "–" + num(lo+step*float64(i+1), 1)
		}
		labelW = max(labelW, len([]rune(labels[i])))
	}
	countW := len(fmt.Sprint(top))
	cells := max(width-2-labelW-1-len(unit)-2-1-countW, 8)
	fmt.Fprintf(b, "%s\n", title)
	for i, c := range counts {
		fmt.Fprintf(b, "  %*s %s  %s %*d\n", labelW, labels[i], unit, bar(float64(c), float64(top), cells), countW, c)
	}
}

// eighths are the partial blocks, from one eighth of a cell to seven.
var eighths = []rune("▏▎▍▌▋▊▉")

// bar draws v against top in cells character cells with a resolution of
// an eighth of a cell, padded with spaces to exactly cells cells. A value
// above zero shows at least an eighth.
func bar(v, top float64, cells int) string {
	n := 0
	if top > 0 && v > 0 {
		n = max(1, int(math.Round(min(v/top, 1)*float64(cells*8))))
	}
	var sb strings.Builder
	sb.WriteString(strings.Repeat("█", n/8))
	used := n / 8
	if r := n % 8; r > 0 {
		sb.WriteRune(eighths[r-1])
		used++
	}
	sb.WriteString(strings.Repeat(" ", cells-used))
	return sb.String()
}

package report

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/tokbench/tokbench/metrics"
)

// WindowLine is one periodic summary as one line of text, for a soak
// test's log: the window, its requests and failures by class, throughput
// and latency (from the scheduled instant first, for open-loop levels).
func WindowLine(l metrics.Load, w metrics.Window) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s–%s: %d requests", l, clock(w.StartS), clock(w.EndS), w.Requests.Sent)
	if w.Requests.Failed > 0 {
		var parts []string
		for _, cls := range slices.Sorted(maps.Keys(w.Requests.Errors)) {
			parts = append(parts, fmt.Sprintf("%s %d", cls, w.Requests.Errors[cls]))
		}
		fmt.Fprintf(&b, ", %d failed (%s)", w.Requests.Failed, strings.Join(parts, ", "))
	}
	fmt.Fprintf(&b, ", %s tok/s", metrics.Figure(w.OutputTPS))
	if w.TTFT.Count == 0 {
		return b.String()
	}
	if s := w.TTFTSched; s != nil {
		fmt.Fprintf(&b, ", TTFT from schedule p50 %s p99 %s ms", metrics.Figure(s.P50), metrics.Figure(s.P99))
	} else {
		fmt.Fprintf(&b, ", TTFT p50 %s p99 %s ms", metrics.Figure(w.TTFT.P50), metrics.Figure(w.TTFT.P99))
	}
	fmt.Fprintf(&b, ", TPOT p50 %s ms, E2E p99 %s ms", metrics.Figure(w.TPOT.P50), metrics.Figure(w.E2E.P99))
	return b.String()
}

// clock writes seconds from a level's start as h:mm:ss or m:ss.
func clock(s float64) string {
	d := time.Duration(s * float64(time.Second)).Round(time.Second)
	h, m, sec := int(d/time.Hour), int(d/time.Minute)%60, int(d/time.Second)%60
	if h > 0 {
		return fmt.Sprintf("%d:%02d:%02d", h, m, sec)
	}
	return fmt.Sprintf("%d:%02d", m, sec)
}

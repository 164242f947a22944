package report

import (
	"fmt"
	"math"
	"strings"

	"github.com/tokbench/tokbench/metrics"
)

// serverNote is one line per level that has server-reported timing: the
// server's own prefill and decode figures beside the client's, and the
// difference, which is network, proxy and client overhead.
func serverNote(lv metrics.Level) string {
	g := lv.ClientMinusServer
	if g == nil {
		return ""
	}
	var server, gap []string
	if s := lv.ServerTTFTMs; s != nil {
		server = append(server, fmt.Sprintf("TTFT p50 %s ms (load+prefill)", metrics.Figure(s.P50)))
	}
	if s := lv.ServerTPS; s != nil {
		if a := lv.ServerAlignedTPS; a != nil {
			server = append(server, fmt.Sprintf("decode p50 %s tok/s (%s counted as tokbench counts: the tokens after the first)", metrics.Figure(s.P50), metrics.Figure(a.P50)))
		} else {
			server = append(server, fmt.Sprintf("decode p50 %s tok/s", metrics.Figure(s.P50)))
		}
	}
	if s := g.TTFTMs; s != nil {
		if g.QueueDominates() {
			gap = append(gap, fmt.Sprintf("TTFT %s ms: server queue %s ms (%s; the server's prefill time leaves it out) and network, proxy, client %s ms (the level's smallest difference)",
				signed(s.P50), signed(g.QueueMs.P50), queueCause(lv), signed(g.NetworkMs)))
		} else {
			gap = append(gap, fmt.Sprintf("TTFT %s ms (network, proxy, client)", signed(s.P50)))
		}
	}
	if s := g.DecodeTPS; s != nil {
		gap = append(gap, fmt.Sprintf("decode %s tok/s", signed(s.P50)))
	}
	if s := g.E2EMs; s != nil {
		gap = append(gap, fmt.Sprintf("E2E %s ms", signed(s.P50)))
	}
	return fmt.Sprintf("%s: server-reported %s; client − server p50: %s; over %d requests",
		lv.Load, strings.Join(server, ", "), strings.Join(gap, ", "), g.Requests)
}

// signed is a difference with its sign, in plain notation at any size
// (never 1.196e+04).
func signed(v float64) string {
	a := math.Abs(v)
	switch {
	case a >= 100:
		return fmt.Sprintf("%+.0f", v)
	case a >= 10:
		return fmt.Sprintf("%+.1f", v)
	}
	return fmt.Sprintf("%+.2f", v)
}

// queueCause says what the level's server queue was, as far as the
// server's figures show.
func queueCause(lv metrics.Level) string {
	g := lv.ClientMinusServer
	switch g.QueueCause {
	case metrics.QueueSlotsFull:
		return fmt.Sprintf("slots full: %d users on the server's %d slots, the rest waiting for one", lv.Load.Concurrency, g.Slots)
	case metrics.QueueOthersPrefill:
		return fmt.Sprintf("the server busy with other requests' prefill in the same batch: %d users fit its %d slots, so none waited for a slot", lv.Load.Concurrency, g.Slots)
	case metrics.QueueSlotsOrPrefill:
		return "waiting for a free slot or for other requests' prefill: the server did not say its slots"
	case metrics.QueueUnexplained:
		return "unexplained by the server's figures: one user at a time, with nothing to wait for"
	}
	return "waiting inside the server: for a free slot or for other requests' prefill"
}

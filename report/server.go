package report

import (
	"fmt"
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
		server = append(server, fmt.Sprintf("TTFT p50 %.4g ms (load+prefill)", s.P50))
	}
	if s := lv.ServerTPS; s != nil {
		server = append(server, fmt.Sprintf("decode p50 %.4g tok/s", s.P50))
	}
	if s := g.TTFTMs; s != nil {
		gap = append(gap, fmt.Sprintf("TTFT %+.4g ms", s.P50))
	}
	if s := g.DecodeTPS; s != nil {
		gap = append(gap, fmt.Sprintf("decode %+.4g tok/s", s.P50))
	}
	if s := g.E2EMs; s != nil {
		gap = append(gap, fmt.Sprintf("E2E %+.4g ms", s.P50))
	}
	return fmt.Sprintf("%s: server-reported %s; client − server p50: %s (network, proxy, client) over %d requests",
		lv.Load, strings.Join(server, ", "), strings.Join(gap, ", "), g.Requests)
}

package cli

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tokbench/tokbench/internal/busy"
	"github.com/tokbench/tokbench/metrics"
)

// --server-metrics against the embedded simulator: the server's histograms
// count the level's requests and not its warm-up, its mean TTFT is the
// client's less what the network and client added (under 50 ms on
// loopback), its TPOT the client's to within scheduling jitter, and the
// table says so in one line.
func TestBenchServerMetrics(t *testing.T) {
	dir := t.TempDir()
	watch := busy.Start()
	code, stdout, stderr := runCLI(context.Background(), nil,
		"bench", "--server-metrics", "--concurrency", "2", "--requests", "6", "--warmup", "2",
		"--output-tokens", "16", "--ignore-eos", "--out", dir)
	lag := watch.Stop()
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	raw, err := os.ReadFile(filepath.Join(dir, "summary.json"))
	if err != nil {
		t.Fatal(err)
	}
	var s metrics.Summary
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatal(err)
	}
	lv := s.Levels[0]
	sm := lv.ServerMetrics
	if sm == nil || sm.Requests != 6 || sm.TTFTMsMean <= 0 || sm.TPOTMsMean <= 0 || sm.E2EMsMean <= 0 || sm.ClientMinus == nil {
		t.Fatalf("server_metrics %+v", sm)
	}
	g := sm.ClientMinus
	// The server stamps its own instants in this process: one kept off
	// the cores between its write and its stamp moves them past the
	// client's.
	if lag.Judge(t, "client − server means") && (g.TTFTMs < 0 || g.TTFTMs > 50 || g.E2EMs < 0 || g.E2EMs > 50 || math.Abs(g.TPOTMs) > 2) {
		t.Errorf("client − server means %+v (client TTFT %.3f, TPOT %.3f, E2E %.3f ms; server %+v)", g, lv.TTFT.Mean, lv.TPOT.Mean, lv.E2E.Mean, sm)
	}
	if math.Abs(lv.TTFT.Mean-sm.TTFTMsMean-g.TTFTMs) > 1e-9 {
		t.Errorf("TTFT gap %v is not client %v − server %v", g.TTFTMs, lv.TTFT.Mean, sm.TTFTMsMean)
	}
	if !strings.Contains(stdout, "c=2: server /metrics mean TTFT ") || !strings.Contains(stdout, "over 6 requests; client − server mean: TTFT +") {
		t.Errorf("table lacks the server /metrics line:\n%s", stdout)
	}
}

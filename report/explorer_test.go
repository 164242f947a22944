package report

import (
	"strings"
	"testing"

	"github.com/tokbench/tokbench/metrics"
)

// TestExplorerPicks: of a long level the explorer lists explorerMax
// requests, the slowest first token among them, and
// says they are a pick.
func TestExplorerPicks(t *testing.T) {
	var recs []metrics.Record
	for i := range 1000 {
		ttft := float64(100 + i%7)
		if i == 500 {
			ttft = 9000 // the slowest
		}
		recs = append(recs, metrics.Record{ID: i + 1, OK: true, OffsetMs: float64(i), TTFTMs: ttft, OutputTokens: 3,
			ChunkMs: []float64{ttft, ttft + 10, ttft + 20}, ChunkTokens: []int{1, 1, 1}})
	}
	list, note := explorer(recs, 0, 20000)
	if len(list) != explorerMax || !strings.HasPrefix(note, "60 of the level's 20000 requests") {
		t.Fatalf("%d listed, note %q", len(list), note)
	}
	found := false
	for _, e := range list {
		found = found || strings.HasPrefix(e.Summary, "#501 ")
	}
	if !found || !strings.Contains(string(list[0].Chart), "chunk 1 at") {
		t.Errorf("the slowest request is not listed, or a request has no chunk chart")
	}
}

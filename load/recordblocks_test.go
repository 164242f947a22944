package load

import (
	"testing"

	"github.com/tokbench/tokbench/metrics"
)

// TestRecordBlocksKeepOrder: records kept across several blocks come back
// in one slice, every one once, in the order they were kept.
func TestRecordBlocksKeepOrder(t *testing.T) {
	for _, n := range []int{0, 1, recordBlock, recordBlock + 1, 3*recordBlock + 7} {
		var k recordBlocks
		for i := range n {
			k.add(metrics.Record{ID: i})
		}
		all := k.all()
		if len(all) != n || k.n != n {
			t.Fatalf("%d kept: all() has %d, n %d", n, len(all), k.n)
		}
		for i, rec := range all {
			if rec.ID != i {
				t.Fatalf("%d kept: record %d has ID %d", n, i, rec.ID)
			}
		}
	}
}

package load

import "testing"

// TestRecentTTFT: the median of the latest 256 completed requests' TTFTs,
// the older ones forgotten; a new level starts with none.
func TestRecentTTFT(t *testing.T) {
	var p Progress
	if _, n := p.RecentTTFT(); n != 0 {
		t.Fatalf("%d TTFTs before any request", n)
	}
	for i := range 300 {
		p.addTTFT(float64(i)) // the latest 256 are 44…299
	}
	if v, n := p.RecentTTFT(); n != 256 || v != 171.5 {
		t.Errorf("recent TTFT p50 %g of %d, want 171.5 of 256", v, n)
	}
	p.reset()
	if _, n := p.RecentTTFT(); n != 0 {
		t.Errorf("%d TTFTs after a reset", n)
	}
}

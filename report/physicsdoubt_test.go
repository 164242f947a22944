package report

import (
	"bytes"
	"strings"
	"testing"

	"github.com/tokbench/tokbench/metrics"
)

// TestTableSaysADoubtfulCeiling: a level whose bandwidth is doubtful
// marks its ceiling and MBU so, and the notes say why, once.
func TestTableSaysADoubtfulCeiling(t *testing.T) {
	s, _ := fixture()
	for i := range s.Levels {
		s.Levels[i].Physics = &metrics.Physics{Deployment: "tiny bf16 on 1× local", DecodeTPSCeiling: 50, CeilingFraction: 2, MBU: 2,
			Source: "local: 8.0 GB/s measured now", Doubt: "local's bandwidth is doubtful: measured on a busy machine"}
	}
	var b bytes.Buffer
	if err := Table(&b, s); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	if n := strings.Count(out, "MBU 200% (DOUBTFUL: see below)"); n != 2 {
		t.Errorf("%d levels' MBU marked doubtful, want 2:\n%s", n, out)
	}
	if n := strings.Count(out, "DOUBTFUL ceiling and MBU: local's bandwidth is doubtful: measured on a busy machine"); n != 1 {
		t.Errorf("the doubt's reason said %d times, want once:\n%s", n, out)
	}
	s.Levels[0].Physics.Doubt, s.Levels[1].Physics.Doubt = "", ""
	b.Reset()
	if err := Table(&b, s); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "DOUBTFUL") {
		t.Errorf("a sure figure is marked doubtful:\n%s", b.String())
	}
}

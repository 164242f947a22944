package profile

import (
	"testing"

	"github.com/tokbench/tokbench/metrics"
)

func TestProfilesParse(t *testing.T) {
	for _, n := range Names() {
		p, err := Lookup(n)
		if err != nil {
			t.Fatal(err)
		}
		if p.InputTokens <= 0 || p.OutputTokens <= 0 {
			t.Errorf("%s: workload %d/%d", n, p.InputTokens, p.OutputTokens)
		}
		if p.SLOs != "" {
			if _, err := metrics.ParseSLOs(p.SLOs); err != nil {
				t.Errorf("%s: %v", n, err)
			}
		}
	}
	// The seed figures: voice needs TTFT under 150 ms and 60 tok/s.
	v, _ := Lookup("voice")
	slos, _ := metrics.ParseSLOs(v.SLOs)
	if slos[0].Metric.Name != "ttft" || slos[0].Value != 150 || slos[1].Value != 60 {
		t.Errorf("voice SLOs = %+v", slos)
	}
	if _, err := Lookup("gaming"); err == nil {
		t.Error("unknown profile accepted")
	}
}

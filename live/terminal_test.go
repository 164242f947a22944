package live

import (
	"strings"
	"testing"
	"time"

	"github.com/tokbench/tokbench/load"
	"github.com/tokbench/tokbench/metrics"
)

func TestProgressLine(t *testing.T) {
	var p load.Progress
	p.Start.Store(time.Now().Add(-2 * time.Second).UnixNano())
	p.Done.Store(5)
	p.Failed.Store(1)
	p.Tokens.Store(400)
	p.Retries.Store(2)
	lv := load.Level{Load: metrics.Load{Mode: metrics.ModeConcurrency, Concurrency: 4}, Requests: 16}
	got := progressLine(&p, lv)
	for _, want := range []string{"c=4", "5/16 done", "1 errors", "2 retries", "200 tok/s", "2s"} {
		if !strings.Contains(got, want) {
			t.Errorf("progress line %q lacks %q", got, want)
		}
	}
}

func TestRecorderRenumbers(t *testing.T) {
	var r load.Runner
	c := &Recorder{}
	c.Attach(&r)
	r.Sink(metrics.Record{Level: 0, OK: true, TTFTMs: 5})
	r.Sink(metrics.Record{Level: 1, OK: false})
	c.Renumber([]int{1, 0})
	recs := c.Records()
	if len(recs) != 2 || recs[0].Level != 1 || recs[1].Level != 0 || recs[0].TTFTMs != 5 {
		t.Errorf("records %+v", recs)
	}
	var none *Recorder
	none.Attach(&r) // a nil Recorder keeps nothing and does not panic
	if none.Records() != nil {
		t.Error("a nil Recorder returned records")
	}
}

func TestRecorderKeepsAUniformSample(t *testing.T) {
	c := &Recorder{}
	n := 3 * RecorderLimit
	for i := range n {
		c.add(metrics.Record{Level: 0, OK: true, TTFTMs: float64(i)})
	}
	c.add(metrics.Record{Level: 1, OK: true, TTFTMs: -1})
	recs := c.Records()
	if len(recs) != RecorderLimit+1 || recs[len(recs)-1].TTFTMs != -1 {
		t.Fatalf("%d records kept, want %d of level 0 and level 1's one", len(recs), RecorderLimit)
	}
	late, sum := 0, 0.0
	for _, r := range recs[:RecorderLimit] {
		sum += r.TTFTMs
		if r.TTFTMs >= float64(2*RecorderLimit) {
			late++
		}
	}
	// Uniform over all n: a third from the last third, mean n/2 (both
	// within 1% for 100,000 draws).
	if mean := sum / RecorderLimit; mean < 0.49*float64(n) || mean > 0.51*float64(n) {
		t.Errorf("mean kept TTFT %g, want about %d", mean, n/2)
	}
	if share := float64(late) / RecorderLimit; share < 0.32 || share > 0.35 {
		t.Errorf("%.3f of the kept records are from the last third, want about 0.333", share)
	}
}

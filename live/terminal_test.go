package live

import (
	"strings"
	"sync"
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
	p.CountError("http_429")
	p.Tokens.Store(400)
	p.DoneChunks.Store(100) // 4 tokens a chunk
	p.Chunks.Store(300)
	p.Retries.Store(2)
	// 300 chunks in 2 s at 4 tokens each.
	if got := p.StreamedTPS(0, 2*time.Second); got != 600 {
		t.Errorf("streamed %g tok/s, want 600", got)
	}
	lv := load.Level{Load: metrics.Load{Mode: metrics.ModeConcurrency, Concurrency: 4}, Requests: 16}
	p.LateTicks.Store(3)
	p.InFlight.Store(4)
	got := ProgressLine(&p, lv, 600)
	for _, want := range []string{"c=4", "2s of ~5s", "5/16 done", "4 in flight", "600 tok/s streaming", "1 errors (http_429 1)", "client late 3×", "2 retries"} {
		if !strings.Contains(got, want) {
			t.Errorf("progress line %q lacks %q", got, want)
		}
	}
	p.Warmup.Store(true)
	if got := ProgressLine(&p, lv, 0); !strings.HasPrefix(got, "c=4 warm-up") {
		t.Errorf("a warm-up's line %q is not labelled", got)
	}
}

// TestPlainProgress: off a terminal, a line as the level starts, one every
// period while it runs, and the last as it ends.
func TestPlainProgress(t *testing.T) {
	var r load.Runner
	r.Progress.Start.Store(time.Now().UnixNano())
	var out lockedWriter
	stop := Plain(&out, &r, load.Level{Load: metrics.Load{Mode: metrics.ModeConcurrency, Concurrency: 2}, Requests: 8}, 20*time.Millisecond)
	for deadline := time.Now().Add(5 * time.Second); strings.Count(out.String(), "\n") < 3 && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	stop()
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) < 4 || lines[0] != "tokbench: c=2 starting" || !strings.HasSuffix(lines[len(lines)-1], "(done)") || !strings.Contains(lines[1], "0/8 done") {
		t.Errorf("plain progress:\n%s", out.String())
	}
}

type lockedWriter struct {
	mu sync.Mutex
	b  strings.Builder
}

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *lockedWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
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

package live

import (
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/tokbench/tokbench/load"
	"github.com/tokbench/tokbench/metrics"
)

// Progress redraws one line on w (a terminal) every 250 ms while a level
// runs (see ProgressLine). The function it returns clears the line and
// stops.
func Progress(w io.Writer, r *load.Runner, lv load.Level) func() {
	return every(r, lv, 250*time.Millisecond,
		func(line string) { fmt.Fprint(w, "\r\033[K"+line) },
		func(string) { fmt.Fprint(w, "\r\033[K") })
}

// Plain writes one plain line on w (a log: CI, a file) as a level starts,
// every period while it runs, and as it ends, so a long level shows it is
// alive. The function it returns writes the last line and stops.
func Plain(w io.Writer, r *load.Runner, lv load.Level, period time.Duration) func() {
	fmt.Fprintf(w, "tokbench: %s starting\n", lv.Load)
	return every(r, lv, period,
		func(line string) { fmt.Fprintln(w, "tokbench: "+line) },
		func(line string) { fmt.Fprintln(w, "tokbench: "+line+" (done)") })
}

// every gives tick the level's ProgressLine each period, and last the
// line once the function it returns is called; that function waits for
// last to be done.
func every(r *load.Runner, lv load.Level, period time.Duration, tick, last func(line string)) func() {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(period)
		defer t.Stop()
		rate, warm := newRate(&r.Progress), r.Progress.Warmup.Load()
		for {
			select {
			case <-done:
				last(ProgressLine(&r.Progress, lv, rate.tps()))
				return
			case <-t.C:
				if w := r.Progress.Warmup.Load(); w != warm {
					rate, warm = newRate(&r.Progress), w // the level's rate is not the warm-up's
				}
				tick(ProgressLine(&r.Progress, lv, rate.tps()))
			}
		}
	})
	return func() { close(done); wg.Wait() }
}

// rate is the streamed tokens/s over the time since its last reading.
type rate struct {
	p      *load.Progress
	chunks int64
	at     time.Time
	last   float64
}

func newRate(p *load.Progress) *rate { return &rate{p: p, chunks: p.Chunks.Load(), at: time.Now()} }

func (r *rate) tps() float64 {
	now := time.Now()
	if d := now.Sub(r.at); d >= 200*time.Millisecond {
		r.last = r.p.StreamedTPS(r.chunks, d)
		r.chunks, r.at = r.p.Chunks.Load(), now
	}
	return r.last
}

// ProgressLine is a level's state: its load (or its warm-up), the time
// since it started of the time expected (its duration, or its requests at
// the pace so far), the requests done of the level's and in flight, the
// tokens/s streaming now (chunks as they arrive, not requests as they
// complete), the TTFT p50 of the latest completed requests, errors by
// class, the client self-check's state, retries and resends.
func ProgressLine(p *load.Progress, lv load.Level, streamed float64) string {
	el := 0.0 // before the level's clock starts
	if start := p.Start.Load(); start > 0 {
		el = max(time.Since(time.Unix(0, start)).Seconds(), 0)
	}
	if p.Warmup.Load() {
		return fmt.Sprintf("%s warm-up  %.0fs  %.0f tok/s streaming", lv.Load, el, streamed)
	}
	done, failed := p.Done.Load(), p.Failed.Load()
	total, expected := "?", ""
	switch {
	case lv.Duration > 0:
		expected = fmt.Sprintf(" of %.0fs", lv.Duration.Seconds())
	case lv.Requests > 0 && done+failed > 0:
		expected = fmt.Sprintf(" of ~%.0fs", el*float64(lv.Requests)/float64(done+failed))
	}
	if lv.Requests > 0 {
		total = fmt.Sprint(lv.Requests)
	}
	errs := fmt.Sprintf("%d errors", failed)
	if byClass := p.Errors(); len(byClass) > 0 {
		var parts []string
		for _, c := range slices.Sorted(maps.Keys(byClass)) {
			parts = append(parts, fmt.Sprintf("%s %d", c, byClass[c]))
		}
		errs += " (" + strings.Join(parts, ", ") + ")"
	}
	extra := "  client ok"
	if n := p.LateTicks.Load(); n > 0 {
		extra = fmt.Sprintf("  client late %d× (woke over %g ms late: busy, stamps may lag)", n, load.LagWarnMs)
	}
	if n := p.Retries.Load(); n > 0 {
		extra += fmt.Sprintf("  %d retries", n)
	}
	if n := p.Reconnects.Load(); n > 0 {
		extra += fmt.Sprintf("  %d resent on a new connection", n)
	}
	ttft := ""
	if v, n := p.RecentTTFT(); n > 0 {
		ttft = fmt.Sprintf("  TTFT p50 %s ms (last %d)", metrics.Figure(v), n)
	}
	return fmt.Sprintf("%s  %.0fs%s  %d/%s done  %d in flight  %.0f tok/s streaming%s  %s%s",
		lv.Load, el, expected, done, total, p.InFlight.Load(), streamed, ttft, errs, extra)
}

// Recorder keeps what terminal charts draw of each finished request (its
// level, outcome and TTFT) while a run goes: every request of a level up
// to RecorderLimit, then a uniform sample of that many (reservoir
// sampling), so a day-long level holds a few MB. A nil Recorder keeps
// nothing.
type Recorder struct {
	mu   sync.Mutex
	recs []metrics.Record
	seen map[int]int // requests seen per level
	at   map[int][]int
	rng  *rand.Rand
}

// RecorderLimit is how many requests of a level a Recorder keeps.
const RecorderLimit = 100_000

// Attach chains the recorder onto the runner's Sink; call it after the
// Sink is set.
func (c *Recorder) Attach(r *load.Runner) {
	if c == nil {
		return
	}
	next := r.Sink
	r.Sink = func(rec metrics.Record) {
		if next != nil {
			next(rec)
		}
		c.mu.Lock()
		c.add(metrics.Record{Level: rec.Level, OK: rec.OK, TTFTMs: rec.TTFTMs})
		c.mu.Unlock()
	}
}

// add keeps rec, or in place of a kept one of its level with the chance
// that keeps a uniform sample.
func (c *Recorder) add(rec metrics.Record) {
	if c.seen == nil {
		c.seen, c.at, c.rng = map[int]int{}, map[int][]int{}, rand.New(rand.NewPCG(1, 1))
	}
	n := c.seen[rec.Level]
	c.seen[rec.Level] = n + 1
	if n < RecorderLimit {
		c.at[rec.Level] = append(c.at[rec.Level], len(c.recs))
		c.recs = append(c.recs, rec)
		return
	}
	if j := c.rng.IntN(n + 1); j < RecorderLimit {
		c.recs[c.at[rec.Level][j]] = rec
	}
}

// Renumber follows the levels into their new places (metrics.SortLevels).
func (c *Recorder) Renumber(newIndex []int) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := range c.recs {
		if l := c.recs[i].Level; l >= 0 && l < len(newIndex) {
			c.recs[i].Level = newIndex[l]
		}
	}
}

// Records returns what was recorded.
func (c *Recorder) Records() []metrics.Record {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]metrics.Record(nil), c.recs...)
}

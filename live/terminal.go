package live

import (
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/tokbench/tokbench/load"
	"github.com/tokbench/tokbench/metrics"
)

// Progress redraws one line on w (a terminal) every 250 ms while a level
// runs: requests done of the level's, errors, retries, resends, output
// tokens/s and the time so far. The function it returns clears the line
// and stops.
func Progress(w io.Writer, r *load.Runner, lv load.Level) func() {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(250 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				fmt.Fprint(w, "\r\033[K")
				return
			case <-t.C:
				fmt.Fprint(w, "\r\033[K"+progressLine(&r.Progress, lv))
			}
		}
	})
	return func() { close(done); wg.Wait() }
}

func progressLine(p *load.Progress, lv load.Level) string {
	el := time.Since(time.Unix(0, p.Start.Load())).Seconds()
	tps := 0.0
	if el > 0 {
		tps = float64(p.Tokens.Load()) / el
	}
	total := "?"
	if lv.Requests > 0 {
		total = fmt.Sprint(lv.Requests)
	}
	extra := ""
	if n := p.Retries.Load(); n > 0 {
		extra += fmt.Sprintf("  %d retries", n)
	}
	if n := p.Reconnects.Load(); n > 0 {
		extra += fmt.Sprintf("  %d resent on a new connection", n)
	}
	return fmt.Sprintf("%s  %d/%s done  %d errors%s  %.0f tok/s  %.0fs",
		lv.Load, p.Done.Load(), total, p.Failed.Load(), extra, tps, el)
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

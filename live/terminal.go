package live

import (
	"fmt"
	"io"
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
// level, outcome and TTFT) while a run goes. A nil Recorder keeps nothing.
type Recorder struct {
	mu   sync.Mutex
	recs []metrics.Record
}

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
		c.recs = append(c.recs, metrics.Record{Level: rec.Level, OK: rec.OK, TTFTMs: rec.TTFTMs})
		c.mu.Unlock()
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

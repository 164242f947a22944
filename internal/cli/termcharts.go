package cli

import (
	"io"
	"strconv"
	"sync"

	"github.com/tokbench/tokbench/load"
	"github.com/tokbench/tokbench/metrics"
	"github.com/tokbench/tokbench/report"
)

// termCharts keeps what the terminal charts draw (each request's level,
// outcome and TTFT) while a bench runs, when stdout is a terminal.
type termCharts struct {
	width int
	mu    sync.Mutex
	recs  []metrics.Record
}

// newTermCharts returns nil unless stdout is a terminal; otherwise it
// chains onto the runner's sink to keep the records' TTFTs. Call it after
// the runner's Sink is set.
func newTermCharts(env Env, r *load.Runner) *termCharts {
	if !env.isTerminal(env.Stdout) {
		return nil
	}
	c := &termCharts{width: 100}
	if n, err := strconv.Atoi(env.Getenv("COLUMNS")); err == nil && n > 0 {
		c.width = min(n, 160)
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
	return c
}

// write draws the degradation curve and the TTFT histogram after the
// table; a nil termCharts writes nothing.
func (c *termCharts) write(w io.Writer, s metrics.Summary) error {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return report.TerminalCharts(w, s, c.recs, c.width)
}

// renumber follows the levels into their new places (metrics.SortLevels).
func (c *termCharts) renumber(newIndex []int) {
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

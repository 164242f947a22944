package benchmark

import (
	"context"
	"net/http"

	"github.com/tokbench/tokbench/load"
	"github.com/tokbench/tokbench/metrics"
	"github.com/tokbench/tokbench/probe"
)

// serverScrape scrapes the server's /metrics before and after each run of a
// level (--server-metrics) and adds up the histogram deltas over the
// level's repeats. The level's warm-up runs first, unrecorded (warmUp),
// so the deltas hold the measured requests only.
type serverScrape struct {
	client *http.Client
	base   string
	header http.Header
	delta  probe.MetricsSnapshot
	warn   *[]string // the summary's warnings: a failed scrape is said once
	failed bool
	none   bool            // said that the scrapes held no series tokbench reads
	hurry  <-chan struct{} // Hooks.Hurry: no scrape after it
}

// warmUp runs lv's warm-up requests with warmup and returns lv without
// them.
func warmUp(lv load.Level, warmup func()) load.Level {
	if lv.Warmup > 0 {
		warmup()
		lv.Warmup = 0
	}
	return lv
}

func (s *serverScrape) around(ctx context.Context, lv load.Level, run func(load.Level) (load.Result, error)) (load.Result, error) {
	before, err := probe.ScrapeMetrics(ctx, s.client, s.base, s.header)
	res, runErr := run(lv)
	if err == nil {
		var after probe.MetricsSnapshot
		// The scrape after an interrupt still runs, unless a second
		// signal hurries the run to its files.
		actx, cancel := untilHurry(ctx, s.hurry)
		after, err = probe.ScrapeMetrics(actx, s.client, s.base, s.header)
		cancel()
		if err == nil {
			s.delta.Add(after.Sub(before))
		}
	}
	if err != nil && !s.failed {
		s.failed = true
		*s.warn = append(*s.warn, "--server-metrics: "+err.Error())
	}
	return res, runErr
}

func (s *serverScrape) annotate(lv *metrics.Level) {
	if sm, ok := s.delta.ServerMetrics(); ok {
		lv.SetServerMetrics(sm)
	} else if !s.failed && !s.none {
		s.none = true
		*s.warn = append(*s.warn, "--server-metrics: the server's /metrics moved none of the series tokbench reads (vLLM's, SGLang's, TGI's, llama.cpp's): no server-side figures")
	}
	s.delta = probe.MetricsSnapshot{}
}

// untilHurry is a context that outlives ctx's end and ends when hurry
// closes (never, when nil); cancel frees it.
func untilHurry(ctx context.Context, hurry <-chan struct{}) (context.Context, context.CancelFunc) {
	c, cancel := context.WithCancel(context.WithoutCancel(ctx))
	if hurry != nil {
		go func() {
			select {
			case <-hurry:
				cancel()
			case <-c.Done():
			}
		}()
	}
	return c, cancel
}

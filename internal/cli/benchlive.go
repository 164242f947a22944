package cli

import (
	"context"
	"fmt"

	"github.com/tokbench/tokbench/live"
	"github.com/tokbench/tokbench/load"
	"github.com/tokbench/tokbench/metrics"
)

// startLive serves live Prometheus metrics of the run on --metrics-addr;
// nil when the flag is not set.
func startLive(ctx context.Context, env Env, addr string, runner *load.Runner, target metrics.Target) error {
	if addr == "" {
		return nil
	}
	e := live.New(func() float64 { return float64(runner.Progress.InFlight.Load()) })
	e.Defaults(target.Model, target.API)
	url, err := e.Serve(ctx, addr)
	if err != nil {
		return addrErr(fmt.Errorf("--metrics-addr: %w", err))
	}
	next := runner.Sink
	runner.Sink = func(rec metrics.Record) {
		if next != nil {
			next(rec)
		}
		e.Observe(rec)
	}
	fmt.Fprintf(env.Stderr, "tokbench: live metrics at %s\n", url)
	return nil
}

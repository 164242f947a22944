// Package live exposes a running benchmark as Prometheus metrics, so a long
// run can be watched in Grafana while it goes: requests by outcome, output
// tokens, TTFT, decode-rate and E2E histograms, and requests in flight.
//
// An Exporter is safe for concurrent use; it has its own registry and
// never touches the global one.
package live

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/tokbench/tokbench/metrics"
)

// Exporter turns finished requests into metrics.
type Exporter struct {
	reg      *prometheus.Registry
	requests *prometheus.CounterVec
	tokens   prometheus.Counter
	ttft     prometheus.Histogram
	tps      prometheus.Histogram
	e2e      prometheus.Histogram
	level    *prometheus.GaugeVec

	mu   sync.Mutex
	last metrics.Load
}

// New returns an exporter; inFlight reports requests in flight right now.
func New(inFlight func() float64) *Exporter {
	e := &Exporter{reg: prometheus.NewRegistry()}
	e.requests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tokbench_requests_total", Help: "Finished requests by outcome: ok, or the error class.",
	}, []string{"outcome"})
	e.tokens = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "tokbench_output_tokens_total", Help: "Output tokens of completed requests.",
	})
	e.ttft = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "tokbench_ttft_seconds", Help: "Time to first token of completed requests.",
		Buckets: prometheus.ExponentialBuckets(0.005, 2, 14),
	})
	e.tps = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "tokbench_decode_tokens_per_second", Help: "Per-request decode rate after the first token.",
		Buckets: prometheus.ExponentialBuckets(1, 1.5, 20),
	})
	e.e2e = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "tokbench_e2e_seconds", Help: "End-to-end latency to the last token of completed requests.",
		Buckets: prometheus.ExponentialBuckets(0.05, 2, 14),
	})
	e.level = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "tokbench_level", Help: "1 for the load level running now, labelled by its load.",
	}, []string{"load"})
	e.reg.MustRegister(e.requests, e.tokens, e.ttft, e.tps, e.e2e, e.level,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "tokbench_in_flight_requests", Help: "Requests sent and not yet finished.",
		}, inFlight))
	return e
}

// Observe counts one finished request (and marks its level as running).
func (e *Exporter) Observe(r metrics.Record) {
	e.mu.Lock()
	if r.Load != e.last && r.Load.Mode != "" {
		e.last = r.Load
		e.level.Reset()
		e.level.WithLabelValues(r.Load.String()).Set(1)
	}
	e.mu.Unlock()
	if !r.OK {
		e.requests.WithLabelValues(r.ErrorClass).Inc()
		return
	}
	e.requests.WithLabelValues("ok").Inc()
	e.tokens.Add(float64(r.OutputTokens))
	e.ttft.Observe(r.TTFTMs / 1000)
	e.e2e.Observe(r.E2EMs / 1000)
	if v, ok := r.DecodeTPS(); ok {
		e.tps.Observe(v)
	}
}

// Level marks the level now running.
func (e *Exporter) Level(l metrics.Load) {
	e.level.Reset()
	e.level.WithLabelValues(l.String()).Set(1)
}

// Handler serves the metrics in the Prometheus text format.
func (e *Exporter) Handler() http.Handler {
	return promhttp.HandlerFor(e.reg, promhttp.HandlerOpts{})
}

// Serve listens on addr and serves /metrics until ctx ends. It returns the
// URL of the metrics page once listening.
func (e *Exporter) Serve(ctx context.Context, addr string) (string, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", fmt.Errorf("listen %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", e.Handler())
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			_ = err // the run goes on without live metrics
		}
	}()
	context.AfterFunc(ctx, func() {
		sctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		srv.Shutdown(sctx)
	})
	return "http://" + ln.Addr().String() + "/metrics", nil
}

// Package live exposes a running benchmark as Prometheus metrics, so a long
// run can be watched in Grafana while it goes: requests by outcome, output
// tokens, TTFT, TPOT, ITL, decode-rate, E2E and output-token histograms by
// model, API and status, and requests in flight.
//
// An Exporter is safe for concurrent use; it has its own registry and
// never touches the global one.
package live

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log"
	"maps"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/tokbench/tokbench/metrics"
)

// Exporter turns finished requests into metrics. Requests and histograms
// are labelled by model, API and HTTP status: a record's own (tokbench
// proxy's live traffic) or the exporter's defaults (a bench run's target).
// At most maxModels model names get series of their own, the rest count
// as "other", so clients naming models at will cannot grow the registry.
type Exporter struct {
	// ErrorLog, when set before Serve, logs what the metrics server's
	// net/http logs (http.Server.ErrorLog; nil: the standard logger).
	ErrorLog *log.Logger

	reg      *prometheus.Registry
	requests *prometheus.CounterVec
	tokens   *prometheus.CounterVec
	ttft     *prometheus.HistogramVec
	tps      *prometheus.HistogramVec
	tpot     *prometheus.HistogramVec
	itl      *prometheus.HistogramVec
	e2e      *prometheus.HistogramVec
	outTok   *prometheus.HistogramVec
	level    *prometheus.GaugeVec
	// An embeddings request's figures: it has no token stream.
	embedLat    *prometheus.HistogramVec
	embedInputs *prometheus.CounterVec
	embedTokens *prometheus.CounterVec

	mu       sync.Mutex
	last     metrics.Load
	model    string // defaults for records without their own
	api      string
	models   map[string]bool
	itlBatch []float64
}

// maxModels bounds the model label's values.
const maxModels = 64

// labelNames are the request labels, in this order.
var labelNames = []string{"model", "api", "status"}

// New returns an exporter; inFlight reports requests in flight right now.
func New(inFlight func() float64) *Exporter {
	e := &Exporter{reg: prometheus.NewRegistry(), models: map[string]bool{}}
	e.requests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tokbench_requests_total", Help: "Finished requests by outcome (ok, or the error class), model, API and HTTP status.",
	}, append([]string{"outcome"}, labelNames...))
	e.tokens = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tokbench_output_tokens_total", Help: "Output tokens of completed requests.",
	}, labelNames)
	hist := func(name, help string, buckets []float64) *prometheus.HistogramVec {
		return prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets}, labelNames)
	}
	e.ttft = hist("tokbench_ttft_seconds", "Time to first token of completed requests.", prometheus.ExponentialBuckets(0.005, 2, 14))
	e.tps = hist("tokbench_decode_tokens_per_second", "Per-request decode rate after the first token.", prometheus.ExponentialBuckets(1, 1.5, 20))
	e.tpot = hist("tokbench_tpot_seconds", "Per-request time per output token after the first (1 / decode rate).", prometheus.ExponentialBuckets(0.0005, 1.5, 24))
	e.itl = hist("tokbench_itl_seconds", "Inter-token latency, per token (a chunk of k tokens counts k gaps of its gap / k).", prometheus.ExponentialBuckets(0.0005, 1.5, 24))
	e.e2e = hist("tokbench_e2e_seconds", "End-to-end latency to the last token of completed requests.", prometheus.ExponentialBuckets(0.05, 2, 14))
	e.outTok = hist("tokbench_output_tokens", "Output tokens per completed request.", prometheus.ExponentialBuckets(1, 2, 16))
	e.embedLat = hist("tokbench_embed_latency_seconds", "Latency of completed embeddings requests: t0 to the answer's last byte.", prometheus.ExponentialBuckets(0.002, 2, 14))
	e.embedInputs = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tokbench_embed_inputs_total", Help: "Inputs embedded by completed embeddings requests.",
	}, labelNames)
	e.embedTokens = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tokbench_embed_tokens_total", Help: "Tokens embedded by completed embeddings requests (the server's count, else the inputs').",
	}, labelNames)
	e.level = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "tokbench_level", Help: "1 for the load level running now, labelled by its load.",
	}, []string{"load"})
	e.reg.MustRegister(e.requests, e.tokens, e.ttft, e.tps, e.tpot, e.itl, e.e2e, e.outTok, e.level, e.embedLat, e.embedInputs, e.embedTokens,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "tokbench_in_flight_requests", Help: "Requests sent and not yet finished.",
		}, inFlight))
	return e
}

// Defaults sets the model and API of records that carry none.
func (e *Exporter) Defaults(model, api string) {
	e.mu.Lock()
	e.model, e.api = model, api
	e.mu.Unlock()
}

// labels are r's model, API and status label values. e.mu is held.
func (e *Exporter) labels(r *metrics.Record) prometheus.Labels {
	model, api := cmp.Or(r.Model, e.model), cmp.Or(r.API, e.api)
	if !e.models[model] {
		if len(e.models) < maxModels {
			e.models[model] = true
		} else {
			model = "other"
		}
	}
	status := "none" // no answer came
	if r.HTTPStatus > 0 {
		status = strconv.Itoa(r.HTTPStatus)
	}
	return prometheus.Labels{"model": model, "api": api, "status": status}
}

// Observe counts one finished request (and marks its level as running).
func (e *Exporter) Observe(r metrics.Record) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if r.Load != e.last && r.Load.Mode != "" {
		e.last = r.Load
		e.level.Reset()
		e.level.WithLabelValues(r.Load.String()).Set(1)
	}
	l := e.labels(&r)
	outcome := prometheus.Labels{"outcome": cmp.Or(r.ErrorClass, "ok")}
	maps.Copy(outcome, l)
	if !r.OK {
		e.requests.With(outcome).Inc()
		return
	}
	outcome["outcome"] = "ok"
	e.requests.With(outcome).Inc()
	if r.EmbedInputs > 0 {
		// No token stream: no TTFT, decode or output figures to observe.
		e.embedLat.With(l).Observe(r.DoneMs / 1000)
		e.embedInputs.With(l).Add(float64(r.EmbedInputs))
		e.embedTokens.With(l).Add(float64(r.InputTokens))
		return
	}
	e.tokens.With(l).Add(float64(r.OutputTokens))
	e.outTok.With(l).Observe(float64(r.OutputTokens))
	e.ttft.With(l).Observe(r.TTFTMs / 1000)
	e.e2e.With(l).Observe(r.E2EMs / 1000)
	if v, ok := r.DecodeTPS(); ok {
		e.tps.With(l).Observe(v)
		e.tpot.With(l).Observe(1 / v)
	}
	itl := e.itl.With(l)
	e.itlBatch = r.AppendITL(e.itlBatch[:0])
	for _, g := range e.itlBatch {
		itl.Observe(g / 1000)
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
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second, ErrorLog: e.ErrorLog}
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

package proxy

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/tokbench/tokbench/api"
	"github.com/tokbench/tokbench/live"
	"github.com/tokbench/tokbench/metrics"
	"github.com/tokbench/tokbench/report"
	"github.com/tokbench/tokbench/results"
	"github.com/tokbench/tokbench/wire"
)

// Recorder keeps what a proxy measured: each record appended to the run
// directory's requests.jsonl as its request ends, Prometheus histograms
// when asked, and the summary of all of them — one live level, in
// windows — folded as they come (metrics.Accumulator: past its exact
// limits memory grows only by the windows and 100 ms bins of the steady
// rate, a few MB a day).
type Recorder struct {
	mu       sync.Mutex
	w        *results.Writer
	acc      *metrics.Accumulator
	exporter *live.Exporter
	writeErr error
}

// NewRecorder records to w (nil: no files) in windows of every.
func NewRecorder(w *results.Writer, every time.Duration, exporter *live.Exporter) *Recorder {
	r := &Recorder{w: w, exporter: exporter, acc: metrics.NewAccumulator(metrics.Load{Mode: metrics.ModeLive}, nil)}
	r.acc.Every(every, nil)
	return r
}

// Add records one request; it is the proxy's Sink.
func (r *Recorder) Add(rec metrics.Record) {
	rec.Load = metrics.Load{Mode: metrics.ModeLive}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.acc.Add(&rec)
	if r.exporter != nil {
		r.exporter.Observe(rec)
	}
	if r.w != nil && r.writeErr == nil {
		r.writeErr = r.w.Append(rec)
	}
}

// Close summarizes what was recorded over durationS and writes
// summary.json and report.html.
func (r *Recorder) Close(target metrics.Target, durationS float64) (metrics.Summary, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := metrics.Summary{Schema: metrics.Schema, Target: target, Levels: []metrics.Level{r.acc.Level(durationS)}}
	if r.w == nil {
		return s, nil
	}
	err := r.writeErr
	if werr := r.w.WriteSummary(s); err == nil {
		err = werr
	}
	if err == nil {
		err = report.WriteHTMLFile(r.w.Dir())
	}
	return s, err
}

// Options run a proxy: where it listens, its upstream, where it keeps
// what it measured.
type Options struct {
	Listen      string
	Config      Config
	Out         *results.Writer // nil: no run directory
	MetricsAddr string          // "": no Prometheus endpoint
	Every       time.Duration   // window length of the summary (0: a minute)
	Grace       time.Duration   // how long streams in flight may finish at shutdown (0: none)
	Version     string
	// Ready, when set, is told the proxy's URL and the metrics URL ("" without).
	Ready func(proxyURL, metricsURL string)
	// Hurry, closed once ctx has ended, ends the grace at once: streams
	// still open are cut, and the summary is written. Nil: the grace runs.
	Hurry <-chan struct{}
}

// Run serves the proxy until ctx ends, then lets the streams in flight
// finish for Grace (or until Hurry closes) and writes the summary.
func Run(ctx context.Context, o Options) (metrics.Summary, error) {
	var exporter *live.Exporter
	var p *Proxy
	if o.MetricsAddr != "" {
		exporter = live.New(func() float64 { return float64(p.InFlight.Load()) })
	}
	rec := NewRecorder(o.Out, cmp.Or(o.Every, time.Minute), exporter)
	cfg := o.Config
	cfg.Sink = rec.Add
	p, err := New(cfg)
	if err != nil {
		return metrics.Summary{}, err
	}
	if exporter != nil {
		exporter.ErrorLog = p.ErrorLog() // its lines scrubbed as the proxy's are
	}
	ln, err := net.Listen("tcp", o.Listen)
	if err != nil {
		return metrics.Summary{}, fmt.Errorf("--listen: %w", err)
	}
	metricsURL := ""
	if exporter != nil {
		if metricsURL, err = exporter.Serve(ctx, o.MetricsAddr); err != nil {
			ln.Close()
			return metrics.Summary{}, fmt.Errorf("--metrics-addr: %w", err)
		}
	}
	target := metrics.Target{URL: api.RedactURL(cfg.Upstream.String()), API: "proxy"}
	if o.Out != nil {
		run := results.Run{Tool: "tokbench proxy", Version: o.Version, StartedAt: p.start.UTC(), Target: target,
			Meta: map[string]string{"listen": ln.Addr().String()}}
		if err := o.Out.WriteRun(run); err != nil {
			ln.Close()
			return metrics.Summary{}, fmt.Errorf("--out: %w", err)
		}
	}
	ln = wire.StampListener(ln)
	srv := &http.Server{Handler: p, ReadHeaderTimeout: 30 * time.Second, ConnContext: p.ConnContext, ErrorLog: p.ErrorLog()}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	if o.Ready != nil {
		o.Ready("http://"+ln.Addr().String(), metricsURL)
	}
	select {
	case <-ctx.Done():
	case err := <-served:
		if !errors.Is(err, http.ErrServerClosed) {
			return metrics.Summary{}, err
		}
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), o.Grace)
	defer cancel()
	if o.Hurry != nil {
		go func() {
			select {
			case <-o.Hurry:
				cancel()
			case <-sctx.Done():
			}
		}()
	}
	if err := srv.Shutdown(sctx); err != nil {
		srv.Close() // the grace is over: streams still open are cut
	}
	// Every handler records before the summary: a cut stream's record
	// says it was cut (its client's context ended with the server).
	p.handlers.Wait()
	return rec.Close(target, time.Since(p.start).Seconds())
}

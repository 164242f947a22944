package sim

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// latencyMetrics are vLLM's request latency histograms, under vLLM's names
// and in seconds, observed from the engine's schedule when a request
// finishes (before its last bytes are written, so a scrape right after a
// client's last request sees it): TTFT from arrival (see Server.arrival) to
// the first token,
// E2E from arrival to the last, decode time from the first token to the
// last, the request's own TPOT ((last − first) / (tokens − 1)), and
// inter-token latency per token (a step's gap divided among its tokens).
type latencyMetrics struct {
	ttft, e2e, decode, tpot, itl prometheus.Histogram
}

func newLatencyMetrics(reg *prometheus.Registry) *latencyMetrics {
	h := func(name, help string, buckets []float64) prometheus.Histogram {
		x := prometheus.NewHistogram(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets})
		reg.MustRegister(x)
		return x
	}
	// vLLM's bucket bounds.
	ttft := []float64{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80, 160, 640, 2560}
	tok := []float64{0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80}
	req := []float64{0.3, 0.5, 0.8, 1, 1.5, 2, 2.5, 5, 10, 15, 20, 30, 40, 50, 60, 120, 240, 480, 960, 1920, 7680}
	return &latencyMetrics{
		ttft:   h("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", ttft),
		e2e:    h("vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.", req),
		decode: h("vllm:request_decode_time_seconds", "Histogram of time spent in DECODE phase for request.", req),
		tpot:   h("vllm:request_time_per_output_token_seconds", "Histogram of time_per_output_token_seconds per request.", tok),
		itl:    h("vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", tok),
	}
}

// gap records the step gap before a chunk of tokens (not the first chunk).
func (m *latencyMetrics) gap(d time.Duration, tokens int) {
	per := d.Seconds() / float64(tokens)
	for range tokens {
		m.itl.Observe(per)
	}
}

// finished records a request of tokens output tokens that arrived, got its
// first token and its last at these engine times.
func (m *latencyMetrics) finished(arrival, first, last time.Duration, tokens int) {
	m.ttft.Observe((first - arrival).Seconds())
	m.e2e.Observe((last - arrival).Seconds())
	m.decode.Observe((last - first).Seconds())
	if tokens > 1 {
		m.tpot.Observe((last - first).Seconds() / float64(tokens-1))
	}
}

// arrival is when a request reached the server, in engine time: when its
// handler started, as vLLM stamps arrival in its frontend, so TTFT and E2E
// include the wait for the next step boundary (the engine takes new
// requests between steps). An engine running late says it arrived earlier.
func (s *Server) arrival(e *encoder, st *stream) time.Duration {
	return min(e.start.Sub(s.base), st.req.Arrival)
}

// latencyTrack follows one request's chunks for latencyMetrics.
type latencyTrack struct {
	first, last time.Duration
	tokens      int
}

// add records chunk c of a request that arrived at arrival (engine times).
func (t *latencyTrack) add(m *latencyMetrics, arrival time.Duration, c chunk) {
	if t.tokens == 0 {
		t.first = c.at
	} else {
		m.gap(c.at-t.last, c.tokens)
	}
	t.tokens += c.tokens
	t.last = c.at
	if c.finish != FinishNone {
		m.finished(arrival, t.first, c.at, t.tokens)
	}
}

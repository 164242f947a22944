package sim

import (
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// tokenRate is generated tokens per second over the last second of engine
// time.
type tokenRate struct {
	at     []time.Duration
	tokens []int
	sum    int
}

func (r *tokenRate) add(at time.Duration, n int) float64 {
	r.at = append(r.at, at)
	r.tokens = append(r.tokens, n)
	r.sum += n
	i := 0
	for i < len(r.at) && r.at[i] <= at-time.Second {
		r.sum -= r.tokens[i]
		i++
	}
	if i > 0 {
		r.at = append(r.at[:0], r.at[i:]...)
		r.tokens = append(r.tokens[:0], r.tokens[i:]...)
	}
	return float64(r.sum)
}

// serverMetrics are the Prometheus series, in their own registry. Names
// follow vLLM's where vLLM has the series, so dashboards and scrapers work
// against both.
type serverMetrics struct {
	reg                 *prometheus.Registry
	running, waiting    prometheus.Gauge
	kvUsage, tps        prometheus.Gauge
	batchTokens         prometheus.Gauge
	genTokens, prTokens prometheus.Counter
	preemptions, steps  prometheus.Counter
	cancelledReq        prometheus.Counter
	success             *prometheus.CounterVec
	kvCap               float64
	lat                 *latencyMetrics // latency.go
}

func newServerMetrics(kvCap int) *serverMetrics {
	m := &serverMetrics{reg: prometheus.NewRegistry(), kvCap: float64(kvCap)}
	g := func(name, help string) prometheus.Gauge {
		x := prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: help})
		m.reg.MustRegister(x)
		return x
	}
	c := func(name, help string) prometheus.Counter {
		x := prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
		m.reg.MustRegister(x)
		return x
	}
	m.running = g("vllm:num_requests_running", "Requests in the running batch.")
	m.waiting = g("vllm:num_requests_waiting", "Requests in the waiting queue.")
	m.kvUsage = g("vllm:kv_cache_usage_perc", "Fraction of the KV cache in use (0 to 1).")
	m.tps = g("tokbench_sim_generation_tokens_per_second", "Output tokens generated over the last second of engine time.")
	m.batchTokens = g("tokbench_sim_step_tokens", "Tokens (decode + prefill) in the last engine step.")
	m.genTokens = c("vllm:generation_tokens_total", "Output tokens generated.")
	m.prTokens = c("vllm:prompt_tokens_total", "Prompt tokens admitted.")
	m.preemptions = c("vllm:num_preemptions_total", "Sequences preempted because the KV cache was full.")
	m.steps = c("tokbench_sim_steps_total", "Engine iterations run.")
	m.cancelledReq = c("tokbench_sim_requests_cancelled_total", "Requests cancelled by their client.")
	m.success = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "vllm:request_success_total", Help: "Finished requests by finish reason.",
	}, []string{"finished_reason"})
	m.reg.MustRegister(m.success)
	m.lat = newLatencyMetrics(m.reg)
	return m
}

func (m *serverMetrics) step(res StepResult, generated int, tps float64) {
	m.running.Set(float64(res.Running))
	m.waiting.Set(float64(res.Waiting))
	m.kvUsage.Set(float64(res.KVUsedTokens) / m.kvCap)
	m.tps.Set(tps)
	m.batchTokens.Set(float64(res.Step.DecodeSeqs + res.Step.PrefillTokens))
	m.genTokens.Add(float64(generated))
	m.preemptions.Add(float64(res.Preempted))
	m.steps.Inc()
}

func (m *serverMetrics) idle() {
	m.running.Set(0)
	m.waiting.Set(0)
	m.kvUsage.Set(0)
	m.tps.Set(0)
	m.batchTokens.Set(0)
}

func (m *serverMetrics) prompt(n int)      { m.prTokens.Add(float64(n)) }
func (m *serverMetrics) cancelled()        { m.cancelledReq.Inc() }
func (m *serverMetrics) finished(f Finish) { m.success.WithLabelValues(f.String()).Inc() }
func (m *serverMetrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

package probe

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/tokbench/tokbench/api"
	"github.com/tokbench/tokbench/metrics"
)

// Histogram is the running _sum and _count of a Prometheus histogram (or
// summary), every label set (model_name, engine) added together, with its
// cumulative bucket counts by upper bound (a histogram's). A counter keeps
// its value in Sum, with Count 0.
type Histogram struct {
	Sum, Count float64
	Buckets    map[float64]float64
}

// Quantile is the q-th quantile (0 < q < 1) of the observations the
// histogram's buckets hold, interpolated linearly within the bucket it
// falls in, as Prometheus's histogram_quantile does; one that falls in the
// +Inf bucket is the highest finite bound. ok is false without buckets or
// observations.
func (h Histogram) Quantile(q float64) (v float64, ok bool) {
	bounds := make([]float64, 0, len(h.Buckets))
	for b := range h.Buckets {
		bounds = append(bounds, b)
	}
	slices.Sort(bounds)
	if len(bounds) == 0 {
		return 0, false
	}
	total := h.Buckets[bounds[len(bounds)-1]]
	if total <= 0 {
		return 0, false
	}
	rank := q * total
	lower, below := 0.0, 0.0
	for _, b := range bounds {
		c := h.Buckets[b]
		if c >= rank {
			if math.IsInf(b, 1) {
				return lower, true
			}
			if c == below {
				return b, true
			}
			return lower + (b-lower)*(rank-below)/(c-below), true
		}
		if !math.IsInf(b, 1) {
			lower = b
		}
		below = c
	}
	return lower, true
}

// MetricsSnapshot is one scrape of the series a server's /metrics holds
// that ServerMetrics reads, by name.
type MetricsSnapshot map[string]Histogram

// The histograms ServerMetrics reads, all in seconds, per engine: vLLM's
// (and tokbench's simulator's), SGLang's (the same names under sglang:)
// and TGI's. TPOT prefers the per-request series (one observation per
// finished request, as the client's TPOT), then the per-token ones:
// inter_token_latency (vLLM 0.11 on) and time_per_output_token (older vLLM;
// newer ones keep it as a deprecated alias).
type engineSeries struct {
	engine                            string
	ttft, e2e, queue, prefill, decode string
	tpot                              []string
}

var engines = []engineSeries{
	{engine: "vllm", ttft: "vllm:time_to_first_token_seconds", e2e: "vllm:e2e_request_latency_seconds",
		queue: "vllm:request_queue_time_seconds", prefill: "vllm:request_prefill_time_seconds", decode: "vllm:request_decode_time_seconds",
		tpot: []string{"vllm:request_time_per_output_token_seconds", "vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds"}},
	{engine: "sglang", ttft: "sglang:time_to_first_token_seconds", e2e: "sglang:e2e_request_latency_seconds",
		queue: "sglang:queue_time_seconds",
		tpot:  []string{"sglang:inter_token_latency_seconds", "sglang:time_per_output_token_seconds"}},
	{engine: "tgi", e2e: "tgi_request_duration", queue: "tgi_request_queue_duration", decode: "tgi_request_inference_duration",
		tpot: []string{"tgi_request_mean_time_per_token_duration"}},
}

// llama.cpp exports counters, no latency histograms: tokens and seconds of
// prompt processing and of generation, summed over its slots.
const (
	llamacppPromptTokens     = "llamacpp:prompt_tokens_total"
	llamacppPromptSeconds    = "llamacpp:prompt_seconds_total"
	llamacppPredictedTokens  = "llamacpp:tokens_predicted_total"
	llamacppPredictedSeconds = "llamacpp:tokens_predicted_seconds_total"
)

// The vLLM names, for tests and callers that name one series.
const (
	seriesTTFT = "vllm:time_to_first_token_seconds"
	seriesE2E  = "vllm:e2e_request_latency_seconds"
)

var tpotSeries = engines[0].tpot

// wanted reports whether a snapshot keeps the series name.
func wanted(name string) bool {
	switch name {
	case llamacppPromptTokens, llamacppPromptSeconds, llamacppPredictedTokens, llamacppPredictedSeconds:
		return true
	}
	for _, e := range engines {
		for _, s := range append([]string{e.ttft, e.e2e, e.queue, e.prefill, e.decode}, e.tpot...) {
			if s != "" && s == name {
				return true
			}
		}
	}
	return false
}

// MetricsURL is the server's /metrics beside the API root: base loses a
// trailing /v1 as vLLM serves /metrics at the host's root.
func MetricsURL(base string) (string, error) { return api.NativeURL(base, "/metrics") }

// ScrapeMetrics GETs base's /metrics (header goes with it) and returns the
// latency histograms it holds; a server without them answers an empty
// snapshot, an unreachable or failing one an error.
func ScrapeMetrics(ctx context.Context, c *http.Client, base string, header http.Header) (MetricsSnapshot, error) {
	endpoint, err := MetricsURL(base)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	resp, err := get(ctx, c, endpoint, header)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %s", api.RedactURL(endpoint), api.ClassifyTransport(ctx, err))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: HTTP %d", api.RedactURL(endpoint), resp.StatusCode)
	}
	snap, err := ParseMetrics(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", api.RedactURL(endpoint), err)
	}
	return snap, nil
}

// ParseMetrics reads the Prometheus text exposition format with
// prometheus/common's parser and keeps the series ServerMetrics uses:
// histograms' and summaries' _sum and _count, counters' values, every label
// set added together. A text it cannot read is an error naming the line.
func ParseMetrics(r io.Reader) (MetricsSnapshot, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(r)
	if err != nil {
		return nil, err
	}
	snap := MetricsSnapshot{}
	for name, f := range families {
		// A histogram exported without its # TYPE line parses as untyped
		// _sum and _count families.
		base, field := name, ""
		if f.GetType() == dto.MetricType_UNTYPED {
			if b, ok := strings.CutSuffix(name, "_sum"); ok && wanted(b) {
				base, field = b, "sum"
			} else if b, ok := strings.CutSuffix(name, "_count"); ok && wanted(b) {
				base, field = b, "count"
			}
		}
		if !wanted(base) {
			continue
		}
		h := snap[base]
		for _, m := range f.GetMetric() {
			switch {
			case m.GetHistogram() != nil:
				hist := m.GetHistogram()
				h.Sum += hist.GetSampleSum()
				for _, b := range hist.GetBucket() {
					if h.Buckets == nil {
						h.Buckets = map[float64]float64{}
					}
					c := b.GetCumulativeCountFloat()
					if c == 0 {
						c = float64(b.GetCumulativeCount())
					}
					h.Buckets[b.GetUpperBound()] += c
				}
				if c := hist.GetSampleCountFloat(); c > 0 {
					h.Count += c // a float histogram's count
				} else {
					h.Count += float64(hist.GetSampleCount())
				}
			case m.GetSummary() != nil:
				h.Sum += m.GetSummary().GetSampleSum()
				h.Count += float64(m.GetSummary().GetSampleCount())
			case m.GetCounter() != nil:
				h.Sum += m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				h.Sum += m.GetGauge().GetValue()
			case m.GetUntyped() != nil:
				if field == "count" {
					h.Count += m.GetUntyped().GetValue()
				} else {
					h.Sum += m.GetUntyped().GetValue()
				}
			}
		}
		if math.IsNaN(h.Sum) || math.IsInf(h.Sum, 0) || math.IsNaN(h.Count) || math.IsInf(h.Count, 0) {
			return nil, fmt.Errorf("%s: not a number", name)
		}
		snap[base] = h
	}
	return snap, nil
}

// Sub is the change from before to s, series by series. A series missing
// before counts from zero; one that went down (the server restarted) is
// left out.
func (s MetricsSnapshot) Sub(before MetricsSnapshot) MetricsSnapshot {
	d := MetricsSnapshot{}
	for k, a := range s {
		b := before[k]
		if a.Count < b.Count || a.Sum < b.Sum {
			continue
		}
		h := Histogram{Sum: a.Sum - b.Sum, Count: a.Count - b.Count}
		for ub, c := range a.Buckets {
			if h.Buckets == nil {
				h.Buckets = map[float64]float64{}
			}
			h.Buckets[ub] = max(0, c-b.Buckets[ub])
		}
		d[k] = h
	}
	return d
}

// Add adds o's series to s (deltas of repeated runs of a level).
func (s MetricsSnapshot) Add(o MetricsSnapshot) {
	for k, h := range o {
		x := s[k]
		sum := Histogram{Sum: x.Sum + h.Sum, Count: x.Count + h.Count}
		for ub, c := range x.Buckets {
			if sum.Buckets == nil {
				sum.Buckets = map[float64]float64{}
			}
			sum.Buckets[ub] += c
		}
		for ub, c := range h.Buckets {
			if sum.Buckets == nil {
				sum.Buckets = map[float64]float64{}
			}
			sum.Buckets[ub] += c
		}
		s[k] = sum
	}
}

// ServerMetrics turns a delta (see Sub) into the level's server-side
// figures: means in milliseconds of the first engine's histograms that
// moved (vLLM, SGLang, TGI), or llama.cpp's prompt and generation rates.
// ok is false when none moved: the server exports none of these series,
// or finished no request.
func (s MetricsSnapshot) ServerMetrics() (sm metrics.ServerMetrics, ok bool) {
	mean := func(name string) float64 {
		h := s[name]
		if name == "" || h.Count <= 0 {
			return 0
		}
		return h.Sum / h.Count * 1000
	}
	for _, e := range engines {
		n := s[e.e2e].Count
		if n <= 0 {
			n = s[e.ttft].Count
		}
		if n <= 0 {
			continue
		}
		sm = metrics.ServerMetrics{Engine: e.engine, Requests: int(n)}
		sm.TTFTMsMean, sm.E2EMsMean = mean(e.ttft), mean(e.e2e)
		quantile := func(name string, q float64) float64 {
			if v, ok := s[name].Quantile(q); ok && name != "" {
				return v * 1000
			}
			return 0
		}
		sm.TTFTMsP50, sm.TTFTMsP99 = quantile(e.ttft, 0.5), quantile(e.ttft, 0.99)
		sm.E2EMsP50, sm.E2EMsP99 = quantile(e.e2e, 0.5), quantile(e.e2e, 0.99)
		sm.QueueMsMean, sm.PrefillMsMean, sm.DecodeMsMean = mean(e.queue), mean(e.prefill), mean(e.decode)
		for _, name := range e.tpot {
			if v := mean(name); v > 0 {
				sm.TPOTMsMean, sm.TPOTSeries = v, name
				break
			}
		}
		return sm, true
	}
	rate := func(tokens, seconds string) float64 {
		if sec := s[seconds].Sum; sec > 0 {
			return s[tokens].Sum / sec
		}
		return 0
	}
	sm = metrics.ServerMetrics{Engine: "llamacpp",
		PromptTokensPerSecond:    rate(llamacppPromptTokens, llamacppPromptSeconds),
		PredictedTokensPerSecond: rate(llamacppPredictedTokens, llamacppPredictedSeconds),
		PromptTokens:             int(s[llamacppPromptTokens].Sum),
		PredictedTokens:          int(s[llamacppPredictedTokens].Sum),
	}
	if sm.PredictedTokens > 0 {
		return sm, true
	}
	return metrics.ServerMetrics{}, false
}

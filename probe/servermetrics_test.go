package probe

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/tokbench/tokbench/metrics"
)

// vllmMetrics renders a vLLM-style /metrics page: two label sets per
// histogram (model_name, engine), buckets, and series tokbench ignores.
func vllmMetrics(ttftSum, ttftCount, tpotSum, tpotCount, e2eSum, e2eCount float64, tpotName string) string {
	var b strings.Builder
	hist := func(name string, sum, count float64) {
		fmt.Fprintf(&b, "# HELP %s Histogram.\n# TYPE %s histogram\n", name, name)
		for i, part := range []float64{0.25, 0.75} {
			labels := fmt.Sprintf(`engine="%d",model_name="org/model {v2}, \"q\""`, i)
			fmt.Fprintf(&b, "%s_bucket{%s,le=\"0.1\"} %g\n", name, labels, count*part/2)
			fmt.Fprintf(&b, "%s_bucket{%s,le=\"+Inf\"} %g\n", name, labels, count*part)
			fmt.Fprintf(&b, "%s_sum{%s} %g\n", name, labels, sum*part)
			fmt.Fprintf(&b, "%s_count{%s} %g 1700000000000\n", name, labels, count*part)
		}
	}
	b.WriteString("vllm:num_requests_running{model_name=\"m\"} 3\nvllm:prompt_tokens_total 123\n")
	hist("vllm:time_to_first_token_seconds", ttftSum, ttftCount)
	hist(tpotName, tpotSum, tpotCount)
	hist("vllm:e2e_request_latency_seconds", e2eSum, e2eCount)
	hist("vllm:request_prompt_tokens", 1e6, 1e3) // a histogram that is not a latency
	return b.String()
}

// A server whose histograms move by known amounts between two scrapes:
// the level's means are the sum deltas over the count deltas.
func TestScrapeMetricsDelta(t *testing.T) {
	for _, tpot := range tpotSeries {
		t.Run(tpot, func(t *testing.T) {
			var scrapes atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != "/metrics" || r.Header.Get("Authorization") != "Bearer k" {
					http.NotFound(w, r)
					return
				}
				if scrapes.Add(1) == 1 {
					fmt.Fprint(w, vllmMetrics(10, 100, 2, 400, 50, 100, tpot))
					return
				}
				// 20 more requests: TTFT +2.5 s, 3200 more tokens at +64 s,
				// E2E +70 s.
				fmt.Fprint(w, vllmMetrics(12.5, 120, 66, 3600, 120, 120, tpot))
			}))
			defer srv.Close()
			h := http.Header{"Authorization": {"Bearer k"}}
			before, err := ScrapeMetrics(context.Background(), srv.Client(), srv.URL+"/v1", h)
			if err != nil {
				t.Fatal(err)
			}
			after, err := ScrapeMetrics(context.Background(), srv.Client(), srv.URL+"/v1", h)
			if err != nil {
				t.Fatal(err)
			}
			sm, ok := after.Sub(before).ServerMetrics()
			want := metrics.ServerMetrics{Requests: 20, TTFTMsMean: 125, TPOTMsMean: 20, E2EMsMean: 3500, TPOTSeries: tpot}
			if !ok || !nearServer(sm, want) {
				t.Errorf("ServerMetrics() = %+v, %v, want %+v", sm, ok, want)
			}
		})
	}
}

func nearServer(a, b metrics.ServerMetrics) bool {
	near := func(x, y float64) bool { return math.Abs(x-y) <= 1e-9*math.Max(1, math.Abs(y)) }
	return a.Requests == b.Requests && a.TPOTSeries == b.TPOTSeries && near(a.TTFTMsMean, b.TTFTMsMean) &&
		near(a.TPOTMsMean, b.TPOTMsMean) && near(a.E2EMsMean, b.E2EMsMean) && near(a.QueueMsMean, b.QueueMsMean) &&
		near(a.PrefillMsMean, b.PrefillMsMean) && near(a.DecodeMsMean, b.DecodeMsMean)
}

// The per-request TPOT series wins over the per-token ones; a counter that
// went down (a restart) is left out; nothing moving is not ok.
func TestServerMetricsChoices(t *testing.T) {
	d := MetricsSnapshot{
		"vllm:inter_token_latency_seconds":           {Sum: 1, Count: 100},
		"vllm:request_time_per_output_token_seconds": {Sum: 0.3, Count: 10},
		"vllm:time_to_first_token_seconds":           {Sum: 2, Count: 10},
	}
	sm, ok := d.ServerMetrics()
	if !ok || sm.Requests != 10 || math.Abs(sm.TPOTMsMean-30) > 1e-9 || sm.TPOTSeries != "vllm:request_time_per_output_token_seconds" || sm.E2EMsMean != 0 {
		t.Errorf("ServerMetrics() = %+v, %v", sm, ok)
	}
	after := MetricsSnapshot{seriesTTFT: {Sum: 1, Count: 5}, seriesE2E: {Sum: 9, Count: 7}}
	before := MetricsSnapshot{seriesTTFT: {Sum: 3, Count: 50}, seriesE2E: {Sum: 2, Count: 3}}
	if got := after.Sub(before); len(got) != 1 || got[seriesE2E].Sum != 7 || got[seriesE2E].Count != 4 {
		t.Errorf("Sub = %v", got)
	}
	if _, ok := (MetricsSnapshot{}).ServerMetrics(); ok {
		t.Error("an empty delta is ok")
	}
}

func TestParseMetrics(t *testing.T) {
	// llama.cpp's /metrics has counters and gauges, no latency histograms.
	raw, err := os.ReadFile("testdata/llamacpp-metrics.txt")
	if err != nil {
		t.Fatal(err)
	}
	snap, err := ParseMetrics(strings.NewReader(string(raw)))
	if err != nil || len(snap) != 4 || snap[llamacppPromptTokens].Sum != 29 || snap[llamacppPredictedSeconds].Sum != 0.134 {
		t.Errorf("llama.cpp capture: %v, %v", snap, err)
	}
	// Over a level: the counters' deltas give its prompt and generation rates.
	sm, ok := MetricsSnapshot{llamacppPromptTokens: {Sum: 2048}, llamacppPromptSeconds: {Sum: 4},
		llamacppPredictedTokens: {Sum: 512}, llamacppPredictedSeconds: {Sum: 8}}.ServerMetrics()
	if !ok || sm.Engine != "llamacpp" || sm.PromptTokensPerSecond != 512 || sm.PredictedTokensPerSecond != 64 || sm.PredictedTokens != 512 {
		t.Errorf("llama.cpp delta: %+v, %v", sm, ok)
	}
	for _, bad := range []string{
		"vllm:e2e_request_latency_seconds_sum{model_name=\"m\" 3\n",
		"vllm:e2e_request_latency_seconds_count{} many\n",
	} {
		if _, err := ParseMetrics(strings.NewReader(bad)); err == nil || !strings.Contains(err.Error(), "line 1") {
			t.Errorf("ParseMetrics(%q) error = %v, want one naming line 1", bad, err)
		}
	}
	if _, err := ParseMetrics(strings.NewReader("vllm:e2e_request_latency_seconds_sum NaN\n")); err == nil || !strings.Contains(err.Error(), "vllm:e2e_request_latency_seconds_sum") {
		t.Errorf("NaN sum: error %v, want one naming the series", err)
	}
}

// TestServerMetricsEngines: SGLang's and TGI's histograms are read as
// vLLM's are, and say whose they are.
func TestServerMetricsEngines(t *testing.T) {
	for _, c := range []struct {
		engine, e2e, tpot string
	}{{"sglang", "sglang:e2e_request_latency_seconds", "sglang:inter_token_latency_seconds"}, {"tgi", "tgi_request_duration", "tgi_request_mean_time_per_token_duration"}} {
		page := fmt.Sprintf("# TYPE %s histogram\n%s_bucket{le=\"+Inf\"} 4\n%s_sum 2\n%s_count 4\n# TYPE %s histogram\n%s_bucket{le=\"+Inf\"} 40\n%s_sum 0.8\n%s_count 40\n",
			c.e2e, c.e2e, c.e2e, c.e2e, c.tpot, c.tpot, c.tpot, c.tpot)
		snap, err := ParseMetrics(strings.NewReader(page))
		if err != nil {
			t.Fatal(err)
		}
		sm, ok := snap.ServerMetrics()
		if !ok || sm.Engine != c.engine || sm.Requests != 4 || sm.E2EMsMean != 500 || sm.TPOTMsMean != 20 || sm.TPOTSeries != c.tpot {
			t.Errorf("%s: %+v, %v", c.engine, sm, ok)
		}
	}
}

func FuzzParseMetrics(f *testing.F) {
	if raw, err := os.ReadFile("testdata/llamacpp-metrics.txt"); err == nil {
		f.Add(string(raw))
	}
	f.Add(vllmMetrics(1, 2, 3, 4, 5, 6, tpotSeries[0]))
	f.Fuzz(func(t *testing.T, s string) {
		snap, err := ParseMetrics(strings.NewReader(s))
		if err != nil {
			return
		}
		for k, h := range snap {
			if !wanted(k) || math.IsNaN(h.Sum) || math.IsNaN(h.Count) || math.IsInf(h.Sum, 0) {
				t.Fatalf("%q: %+v", k, h)
			}
		}
	})
}

// TestServerPercentiles: a level's server-side percentiles come from its
// histograms' bucket deltas, interpolated within the bucket as
// Prometheus's histogram_quantile does.
func TestServerPercentiles(t *testing.T) {
	page := func(b01, b02, b05, inf float64) string {
		return fmt.Sprintf("# TYPE vllm:time_to_first_token_seconds histogram\n"+
			"vllm:time_to_first_token_seconds_bucket{le=\"0.1\"} %g\nvllm:time_to_first_token_seconds_bucket{le=\"0.2\"} %g\n"+
			"vllm:time_to_first_token_seconds_bucket{le=\"0.5\"} %g\nvllm:time_to_first_token_seconds_bucket{le=\"+Inf\"} %g\n"+
			"vllm:time_to_first_token_seconds_sum %g\nvllm:time_to_first_token_seconds_count %g\n", b01, b02, b05, inf, inf*0.15, inf)
	}
	before, err := ParseMetrics(strings.NewReader(page(10, 10, 10, 10)))
	if err != nil {
		t.Fatal(err)
	}
	// 100 more: 20 under 0.1 s, 60 in (0.1, 0.2], 20 in (0.2, 0.5].
	after, err := ParseMetrics(strings.NewReader(page(30, 90, 110, 110)))
	if err != nil {
		t.Fatal(err)
	}
	sm, ok := after.Sub(before).ServerMetrics()
	// p50: rank 50 lies 30 into the 60 of (0.1, 0.2]: 150 ms. p99: rank 99
	// lies 19 into the 20 of (0.2, 0.5]: 485 ms.
	if !ok || math.Abs(sm.TTFTMsP50-150) > 1e-9 || math.Abs(sm.TTFTMsP99-485) > 1e-9 {
		t.Errorf("p50 %v p99 %v, want 150 and 485 ms", sm.TTFTMsP50, sm.TTFTMsP99)
	}
	// A quantile past the last finite bound is that bound.
	if v, ok := (Histogram{Buckets: map[float64]float64{0.1: 1, math.Inf(1): 10}}).Quantile(0.99); !ok || v != 0.1 {
		t.Errorf("quantile in +Inf = %v, %v; want 0.1", v, ok)
	}
}

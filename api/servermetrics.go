package api

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/tokbench/tokbench/metrics"
)

// Histogram is the running _sum and _count of a Prometheus histogram,
// every label set (model_name, engine) added together.
type Histogram struct {
	Sum, Count float64
}

// MetricsSnapshot is one scrape of a server's latency histograms, by name.
type MetricsSnapshot map[string]Histogram

// The vLLM histograms ServerMetrics reads, all in seconds. TPOT prefers the
// per-request series (one observation per finished request, as the client's
// TPOT), then the per-token ones: inter_token_latency (vLLM 0.11 on) and
// time_per_output_token (older vLLM; newer ones keep it as a deprecated
// alias).
const (
	seriesTTFT    = "vllm:time_to_first_token_seconds"
	seriesE2E     = "vllm:e2e_request_latency_seconds"
	seriesQueue   = "vllm:request_queue_time_seconds"
	seriesPrefill = "vllm:request_prefill_time_seconds"
	seriesDecode  = "vllm:request_decode_time_seconds"
)

var tpotSeries = []string{
	"vllm:request_time_per_output_token_seconds",
	"vllm:inter_token_latency_seconds",
	"vllm:time_per_output_token_seconds",
}

// latencySeries are the histograms a snapshot keeps.
var latencySeries = append([]string{seriesTTFT, seriesE2E, seriesQueue, seriesPrefill, seriesDecode}, tpotSeries...)

// MetricsURL is the server's /metrics beside the API root: base loses a
// trailing /v1 as vLLM serves /metrics at the host's root.
func MetricsURL(base string) (string, error) { return nativeURL(base, "/metrics") }

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
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, endpoint, nil)
	if err != nil {
		return nil, err
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %s", RedactURL(endpoint), classifyTransport(ctx, err))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: HTTP %d", RedactURL(endpoint), resp.StatusCode)
	}
	snap, err := ParseMetrics(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", RedactURL(endpoint), err)
	}
	return snap, nil
}

// ParseMetrics reads the Prometheus text exposition format and keeps the
// _sum and _count of the latency histograms ServerMetrics uses. Other
// series, comments and timestamps are skipped; a sample line it cannot
// read is an error naming the line.
func ParseMetrics(r io.Reader) (MetricsSnapshot, error) {
	snap := MetricsSnapshot{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		name, rest, ok := splitSample(line)
		if !ok {
			return nil, fmt.Errorf("line %d: not a sample: %.80q", n, line)
		}
		base, field := "", ""
		if b, ok := strings.CutSuffix(name, "_sum"); ok {
			base, field = b, "sum"
		} else if b, ok := strings.CutSuffix(name, "_count"); ok {
			base, field = b, "count"
		} else {
			continue
		}
		if !wanted(base) {
			continue
		}
		valStr, _, _ := strings.Cut(strings.TrimSpace(rest), " ")
		v, err := strconv.ParseFloat(valStr, 64)
		if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
			return nil, fmt.Errorf("line %d: %s: bad value %.40q", n, name, valStr)
		}
		h := snap[base]
		if field == "sum" {
			h.Sum += v
		} else {
			h.Count += v
		}
		snap[base] = h
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return snap, nil
}

func wanted(name string) bool {
	for _, s := range latencySeries {
		if s == name {
			return true
		}
	}
	return false
}

// splitSample splits `name{labels} value [timestamp]` into the name and what
// follows the labels. Label values may hold spaces, braces and escaped quotes.
func splitSample(line string) (name, rest string, ok bool) {
	i := strings.IndexAny(line, "{ \t")
	if i <= 0 {
		return "", "", false
	}
	name, rest = line[:i], line[i:]
	if rest[0] != '{' {
		return name, rest, true
	}
	quoted := false
	for j := 1; j < len(rest); j++ {
		switch c := rest[j]; {
		case quoted && c == '\\':
			j++
		case c == '"':
			quoted = !quoted
		case !quoted && c == '}':
			return name, rest[j+1:], true
		}
	}
	return "", "", false
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
		d[k] = Histogram{Sum: a.Sum - b.Sum, Count: a.Count - b.Count}
	}
	return d
}

// Add adds o's series to s (deltas of repeated runs of a level).
func (s MetricsSnapshot) Add(o MetricsSnapshot) {
	for k, h := range o {
		x := s[k]
		s[k] = Histogram{Sum: x.Sum + h.Sum, Count: x.Count + h.Count}
	}
}

// ServerMetrics turns a delta (see Sub) into the level's server-side means
// in milliseconds. ok is false when neither TTFT nor E2E moved: the server
// exports no such histograms, or finished no request.
func (s MetricsSnapshot) ServerMetrics() (sm metrics.ServerMetrics, ok bool) {
	mean := func(name string) float64 {
		h := s[name]
		if h.Count <= 0 {
			return 0
		}
		return h.Sum / h.Count * 1000
	}
	sm.TTFTMsMean, sm.E2EMsMean = mean(seriesTTFT), mean(seriesE2E)
	sm.QueueMsMean, sm.PrefillMsMean, sm.DecodeMsMean = mean(seriesQueue), mean(seriesPrefill), mean(seriesDecode)
	for _, name := range tpotSeries {
		if v := mean(name); v > 0 {
			sm.TPOTMsMean, sm.TPOTSeries = v, name
			break
		}
	}
	switch {
	case s[seriesE2E].Count > 0:
		sm.Requests = int(s[seriesE2E].Count)
	case s[seriesTTFT].Count > 0:
		sm.Requests = int(s[seriesTTFT].Count)
	default:
		return metrics.ServerMetrics{}, false
	}
	return sm, true
}

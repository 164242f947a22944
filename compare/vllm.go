package compare

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/tokbench/tokbench/metrics"
	"github.com/tokbench/tokbench/results"
)

// TokenSourceVLLM marks output token counts taken from a vLLM result file
// (vLLM's own count: server usage or its tokenizer).
const TokenSourceVLLM = "vllm"

// Imported is a run read from another tool's result file, in tokbench's
// shapes: what WriteRun, Append and WriteSummary of results.Writer take.
type Imported struct {
	Run     results.Run
	Records []metrics.Record // nil when the file has only aggregates
	Summary metrics.Summary
	// Detailed says the file had per-request lists (vLLM's --save-detailed)
	// and every statistic was recomputed from them with tokbench's
	// definitions; otherwise the summary holds only what the aggregates say.
	Detailed bool
}

// vllmResult is the part of a `vllm bench serve --save-result` JSON file
// tokbench reads. Times in the per-request lists are seconds; aggregates
// are milliseconds (mean_ttft_ms…) and per-second rates.
type vllmResult struct {
	Date          string          `json:"date"`
	Backend       string          `json:"backend"`
	EndpointType  string          `json:"endpoint_type"`
	Label         string          `json:"label"`
	ModelID       string          `json:"model_id"`
	NumPrompts    int             `json:"num_prompts"`
	RequestRate   json.RawMessage `json:"request_rate"` // a number or "inf"
	Burstiness    float64         `json:"burstiness"`
	MaxConcurrent *int            `json:"max_concurrency"`

	Duration          float64 `json:"duration"`
	Completed         int     `json:"completed"`
	Failed            *int    `json:"failed"`
	TotalInputTokens  int     `json:"total_input_tokens"`
	TotalOutputTokens int     `json:"total_output_tokens"`
	RequestThroughput float64 `json:"request_throughput"`
	OutputThroughput  float64 `json:"output_throughput"`

	InputLens  []int       `json:"input_lens"`
	OutputLens []int       `json:"output_lens"`
	TTFTs      []float64   `json:"ttfts"`
	ITLs       [][]float64 `json:"itls"`
	E2ELs      []float64   `json:"e2els"`
	StartTimes []float64   `json:"start_times"`
	Errors     []string    `json:"errors"`
	rest       map[string]any
}

// ReadVLLM reads the result JSON of `vllm bench serve` (also the older
// benchmarks/benchmark_serving.py) as one tokbench load level. With
// per-request lists (ttfts, itls, output_lens; written with
// --save-detailed) it rebuilds one record per request — chunk arrivals from
// the TTFT and the inter-token gaps, output tokens spread over the chunks —
// and summarizes them exactly as a tokbench run. Without them it fills the
// level from the aggregates (mean/median/pNN of TTFT, TPOT, ITL, E2E),
// leaves unknown statistics at zero and says so in the summary's warnings.
// name is used in errors and in run.json.
func ReadVLLM(r io.Reader, name string) (*Imported, error) {
	b, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	var v vllmResult
	if err := json.Unmarshal(b, &v); err != nil {
		return nil, fmt.Errorf("%s: not a vLLM result file: %w", name, err)
	}
	if err := json.Unmarshal(b, &v.rest); err != nil {
		return nil, fmt.Errorf("%s: not a vLLM result file: %w", name, err)
	}
	if v.Duration <= 0 || (v.Completed == 0 && len(v.TTFTs) == 0) {
		return nil, fmt.Errorf("%s: not a vLLM result file: no duration or completed requests", name)
	}
	load, err := v.load(name)
	if err != nil {
		return nil, err
	}
	api := "openai-completions"
	switch kind := v.Backend + v.EndpointType; {
	case strings.Contains(kind, "chat"):
		api = "openai-chat"
	case kind == "":
		api = "unknown"
	}
	imp := &Imported{}
	imp.Summary = metrics.Summary{Schema: metrics.Schema, Target: metrics.Target{API: api, Model: v.ModelID}}
	imp.Run = results.Run{Schema: results.RunSchema, Tool: "vllm bench serve", Version: "imported from " + name,
		Target: imp.Summary.Target, Meta: map[string]string{}, Config: map[string]any{"imported_from": name}}
	if t, err := time.ParseInLocation("20060102-150405", v.Date, time.Local); err == nil {
		imp.Run.StartedAt = t.UTC()
	}
	if v.Label != "" {
		imp.Run.Meta["label"] = v.Label
	}
	for _, k := range []string{"backend", "endpoint_type", "num_prompts", "request_rate", "burstiness", "max_concurrency"} {
		if x, ok := v.rest[k]; ok && x != nil {
			imp.Run.Config["vllm_"+k] = x
		}
	}

	if n := len(v.TTFTs); n > 0 {
		if len(v.ITLs) != n || len(v.OutputLens) != n {
			return nil, fmt.Errorf("%s: ttfts has %d entries, itls %d, output_lens %d: want one each per request", name, n, len(v.ITLs), len(v.OutputLens))
		}
		imp.Detailed = true
		imp.Records = v.records(load)
		lv := metrics.Summarize(load, imp.Records, v.Duration)
		imp.Summary.Levels = []metrics.Level{lv}
		in, out := 0.0, 0.0
		for _, r := range imp.Records {
			if r.OK {
				in += float64(r.InputTokens)
				out += float64(r.OutputTokens)
			}
		}
		if c := lv.Requests.Completed; c > 0 {
			imp.Run.Meta["input_tokens"] = strconv.Itoa(int(math.Round(in / float64(c))))
			imp.Run.Meta["output_tokens"] = strconv.Itoa(int(math.Round(out / float64(c))))
		}
		if len(v.StartTimes) != n {
			imp.Summary.Warnings = append(imp.Summary.Warnings,
				"imported from vLLM: the file has no per-request start times, so every request starts at 0 in requests.jsonl (no timeline; steady-state TPS unknown)")
		}
		return imp, nil
	}

	imp.Summary.Levels = []metrics.Level{v.aggregateLevel(load)}
	if c := v.Completed; c > 0 {
		imp.Run.Meta["input_tokens"] = strconv.Itoa(int(math.Round(float64(v.TotalInputTokens) / float64(c))))
		imp.Run.Meta["output_tokens"] = strconv.Itoa(int(math.Round(float64(v.TotalOutputTokens) / float64(c))))
	}
	imp.Summary.Warnings = append(imp.Summary.Warnings,
		"imported from vLLM aggregates only (the file has no per-request lists; rerun vllm bench serve with --save-detailed for them): "+
			"statistics the file does not give are 0, there is no requests.jsonl, and compare cannot test significance")
	return imp, nil
}

// load is the level's load: max_concurrency users when the rate is
// unlimited, else the request rate (burstiness 1 is a Poisson process,
// anything else gamma).
func (v *vllmResult) load(name string) (metrics.Load, error) {
	rate := math.Inf(1)
	if s := strings.Trim(string(v.RequestRate), `"`); s != "" && s != "inf" && s != "null" {
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return metrics.Load{}, fmt.Errorf("%s: request_rate %s: want a number or \"inf\"", name, v.RequestRate)
		}
		rate = f
	}
	if !math.IsInf(rate, 1) {
		arrival := "poisson"
		if v.Burstiness != 0 && v.Burstiness != 1 {
			arrival = "gamma"
		}
		return metrics.Load{Mode: metrics.ModeRate, RateRPS: rate, Arrival: metrics.Arrival(arrival)}, nil
	}
	c := v.NumPrompts
	if v.MaxConcurrent != nil && *v.MaxConcurrent > 0 {
		c = *v.MaxConcurrent
	}
	if c <= 0 {
		c = max(len(v.TTFTs), v.Completed)
	}
	return metrics.Load{Mode: metrics.ModeConcurrency, Concurrency: c}, nil
}

// records rebuilds one record per request: the first chunk arrives at the
// TTFT, each later one an inter-token gap after the previous; vLLM's
// output length is spread over the chunks. A request with an error, or
// without a first token, failed.
func (v *vllmResult) records(load metrics.Load) []metrics.Record {
	t0 := math.Inf(1)
	for _, s := range v.StartTimes {
		t0 = min(t0, s)
	}
	recs := make([]metrics.Record, len(v.TTFTs))
	for i, ttft := range v.TTFTs {
		r := metrics.Record{ID: i, Load: load, OutputTokens: v.OutputLens[i], TokenSource: TokenSourceVLLM}
		if i < len(v.InputLens) {
			r.InputTokens = v.InputLens[i]
		}
		if len(v.StartTimes) == len(v.TTFTs) {
			r.OffsetMs = (v.StartTimes[i] - t0) * 1000
		}
		errText := ""
		if i < len(v.Errors) {
			errText = v.Errors[i]
		}
		if errText != "" || ttft <= 0 || v.OutputLens[i] <= 0 {
			r.ErrorClass, r.Error = "vllm_error", errText
			if errText == "" {
				r.ErrorClass = "empty_response"
			}
			if i < len(v.E2ELs) {
				r.DoneMs = v.E2ELs[i] * 1000
			}
			recs[i] = r
			continue
		}
		r.OK = true
		r.TTFTMs, r.TTFVTMs = ttft*1000, ttft*1000
		at := ttft
		r.ChunkMs = append(r.ChunkMs, at*1000)
		for _, gap := range v.ITLs[i] {
			at += gap
			r.ChunkMs = append(r.ChunkMs, at*1000)
		}
		ones := make([]int, len(r.ChunkMs))
		for j := range ones {
			ones[j] = 1
		}
		r.ChunkTokens = metrics.AssignTokens(ones, r.OutputTokens)
		r.E2EMs = r.ChunkMs[len(r.ChunkMs)-1]
		r.DoneMs = r.E2EMs
		if i < len(v.E2ELs) && v.E2ELs[i]*1000 > r.DoneMs {
			r.DoneMs = v.E2ELs[i] * 1000
		}
		recs[i] = r
	}
	return recs
}

// aggregateLevel fills a level from the aggregate fields alone. Decode TPS
// percentiles come from TPOT's: TPS = 1000 / TPOT per request is monotone
// decreasing, so its q-th percentile is 1000 over TPOT's (100−q)-th.
func (v *vllmResult) aggregateLevel(load metrics.Load) metrics.Level {
	failed := 0
	if v.Failed != nil {
		failed = *v.Failed
	} else if v.NumPrompts > v.Completed {
		failed = v.NumPrompts - v.Completed
	}
	lv := metrics.Level{Load: load, DurationS: v.Duration,
		Requests:     metrics.Requests{Sent: v.Completed + failed, Completed: v.Completed, Failed: failed, Errors: map[string]int{}},
		InputTokens:  v.TotalInputTokens,
		OutputTokens: v.TotalOutputTokens, TokenSource: TokenSourceVLLM,
		OutputTPS: v.OutputThroughput, RequestRPS: v.RequestThroughput, GoodputRPS: v.RequestThroughput,
	}
	if failed > 0 {
		lv.Requests.Errors["vllm_error"] = failed
	}
	if lv.Requests.Sent > 0 {
		lv.ErrorRate = float64(failed) / float64(lv.Requests.Sent)
	}
	lv.TTFT = v.stats("ttft", v.Completed)
	lv.TPOT = v.stats("tpot", v.Completed)
	lv.ITL = v.stats("itl", 0)
	lv.E2E = v.stats("e2el", v.Completed)
	if lv.TPOT.Count > 0 {
		pct := v.percentiles("tpot")
		lv.DecodeTPS = metrics.Stats{Count: lv.TPOT.Count}
		for _, p := range []struct {
			q   float64
			dst *float64
		}{{5, &lv.DecodeTPS.P5}, {10, &lv.DecodeTPS.P10}, {25, &lv.DecodeTPS.P25}, {50, &lv.DecodeTPS.P50},
			{75, &lv.DecodeTPS.P75}, {90, &lv.DecodeTPS.P90}, {95, &lv.DecodeTPS.P95}, {99, &lv.DecodeTPS.P99}} {
			if t, ok := pct[100-p.q]; ok && t > 0 {
				*p.dst = 1000 / t
			}
		}
	}
	return lv
}

// percentiles returns the pNN_<metric>_ms values of the file by NN, with
// median as 50.
func (v *vllmResult) percentiles(metric string) map[float64]float64 {
	out := map[float64]float64{}
	suffix := "_" + metric + "_ms"
	for k, x := range v.rest {
		f, ok := x.(float64)
		if !ok || !strings.HasSuffix(k, suffix) {
			continue
		}
		switch p := strings.TrimSuffix(k, suffix); {
		case p == "median":
			out[50] = f
		case strings.HasPrefix(p, "p"):
			if q, err := strconv.ParseFloat(p[1:], 64); err == nil {
				out[q] = f
			}
		}
	}
	return out
}

// stats builds Stats from mean_, std_, median_ and pNN_ fields of a metric;
// count is the number of values (0 when unknown but present).
func (v *vllmResult) stats(metric string, count int) metrics.Stats {
	mean, ok := v.rest["mean_"+metric+"_ms"].(float64)
	if !ok {
		return metrics.Stats{}
	}
	s := metrics.Stats{Count: max(count, 1), Mean: mean}
	s.Stddev, _ = v.rest["std_"+metric+"_ms"].(float64)
	for q, x := range v.percentiles(metric) {
		switch q {
		case 5:
			s.P5 = x
		case 10:
			s.P10 = x
		case 25:
			s.P25 = x
		case 50:
			s.P50 = x
		case 75:
			s.P75 = x
		case 90:
			s.P90 = x
		case 95:
			s.P95 = x
		case 99:
			s.P99 = x
		}
	}
	return s
}

// WriteDir writes the import as a run directory: run.json, summary.json,
// and requests.jsonl when vLLM's per-request lists gave records (without
// them there is no requests.jsonl, rather than an empty one).
func (imp *Imported) WriteDir(dir string) error {
	w, err := results.Create(dir)
	if err != nil {
		return err
	}
	err = w.WriteRun(imp.Run)
	for i := 0; err == nil && i < len(imp.Records); i++ {
		err = w.Append(imp.Records[i])
	}
	if err == nil {
		err = w.WriteSummary(imp.Summary)
	}
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	if err == nil && !imp.Detailed {
		err = os.Remove(filepath.Join(dir, results.RequestsFile))
	}
	return err
}

package sim

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"maps"
	"math"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/tokbench/tokbench/metrics"
	"github.com/tokbench/tokbench/physics"
)

var update = flag.Bool("update", false, "rewrite the validation table in docs/simulator.md")

// A batching point of docs/measurements.md, and the workload
// the engine replays for it. Nothing here was tuned to the measured value:
// the engine has no free parameters of its own, the physics cost model
// was calibrated on single-stream points only (point 2 at concurrency 1
// among those below; see docs/physics.md), and the vLLM points run behind
// VLLMFrontEnd, whose costs are other publications' measurements.
type batchPoint struct {
	id, desc         string
	model, quant, hw string
	gpus             int
	engine           EngineConfig
	load             ClosedLoop
	metric           string // "output_tps", "tpot_p50_ms", "ttft_p50_ms", "request_rps"
	measured         float64
	heldOut          bool
	clientLimited    bool   // the measurement is not bound by the GPU (see docs)
	engineProfile    string // a physics engine calibration (tensorrt-llm), else the hardware's
	assumption       string
}

// chat-short (point 2): the prompt length is inferred from the measured
// TTFT at concurrency 1 (14.0 ms ≈ one 256-token prefill), outputs vary
// (geometric, mean 128), which keeps closed-loop users out of lockstep.
func chatShort(users int) (EngineConfig, ClosedLoop) {
	return EngineConfig{Seed: 1, MeanOutputTokens: 128, FrontEnd: VLLMFrontEnd},
		ClosedLoop{Users: users, Requests: 40 * users, PromptTokens: 256, MaxTokens: 1024}
}

// Point 7: 5000 ShareGPT-like prompts sent at once with max-num-seqs 256,
// which is a closed loop of 256 users; prompts 220 tokens, outputs
// geometric with mean 200 (ShareGPT's means in vLLM's benchmark).
func shareGPT() (EngineConfig, ClosedLoop) {
	return EngineConfig{Seed: 1, MaxNumSeqs: 256, MeanOutputTokens: 200, FrontEnd: VLLMFrontEnd},
		ClosedLoop{Users: 256, Requests: 2000, PromptTokens: 220, MaxTokens: 2048}
}

// Point 5: static batching of b requests (512 in / 64 out): the whole batch
// prefills in one step and decodes in lockstep, and the next batch starts
// when it is done, which a closed loop of b identical users reproduces.
func staticBatch(b int) (EngineConfig, ClosedLoop) {
	return EngineConfig{MaxNumSeqs: b, MaxBatchedTokens: b * 512},
		ClosedLoop{Users: b, Requests: 8 * b, PromptTokens: 512, MaxTokens: 64}
}

func batchPoints() []batchPoint {
	var pts []batchPoint
	p2 := map[int][3]float64{1: {122.2, 6.48, 13.98}, 4: {580.3, 6.59, 22.75}, 16: {1384.2, 10.94, 41.69}, 64: {1312.3, 46.91, 86.92}}
	for _, c := range []int{1, 4, 16, 64} {
		e, l := chatShort(c)
		m := p2[c]
		base := batchPoint{model: "llama-3.1-8b", quant: "fp16", hw: "h100-sxm", gpus: 1, engine: e, load: l,
			heldOut: c > 1, clientLimited: c == 64, assumption: "256 in, geometric outputs mean 128"}
		for i, metric := range []string{"output_tps", "tpot_p50_ms", "ttft_p50_ms"} {
			p := base
			p.id = fmt.Sprintf("2 c=%d", c)
			p.desc = "Llama-3.1-8B FP16, H100, vLLM, chat-short"
			p.metric, p.measured = metric, m[i]
			if c == 1 && metric != "tpot_p50_ms" {
				p.heldOut = true // only the c=1 TPOT entered the physics calibration
			}
			pts = append(pts, p)
		}
	}
	p5 := map[int]float64{1: 0.9, 4: 3.2, 8: 5.3, 16: 8.0, 32: 10.5, 64: 12.5}
	for _, b := range []int{1, 4, 8, 16, 32, 64} {
		e, l := staticBatch(b)
		pts = append(pts, batchPoint{id: fmt.Sprintf("5 b=%d", b), desc: "MPT-7B FP16, A100-40GB, FasterTransformer static batching",
			model: "mpt-7b", quant: "fp16", hw: "a100-40gb", gpus: 1, engine: e, load: l,
			metric: "request_rps", measured: p5[b], heldOut: true, assumption: "512 in / 64 out, A100-40GB assumed"})
	}
	for _, d := range []struct {
		name, model, quant string
		gpus               int
		tps, tpot          float64
	}{
		{"Llama-3.1-8B BF16, 1× H100", "llama-3.1-8b", "bf16", 1, 8088, 25.6},
		{"Llama-3.1-70B BF16, 4× H100", "llama-3.1-70b", "bf16", 4, 3543, 61.1},
		{"Llama-3.1-405B FP8, 8× H100", "llama-3.1-405b", "fp8", 8, 1714, 112.2},
	} {
		e, l := shareGPT()
		for _, m := range []struct {
			metric string
			v      float64
		}{{"output_tps", d.tps}, {"tpot_p50_ms", d.tpot}} {
			pts = append(pts, batchPoint{id: fmt.Sprintf("7 tp%d", d.gpus), desc: d.name + ", vLLM 0.6.0, max-num-seqs 256",
				model: d.model, quant: d.quant, hw: "h100-sxm", gpus: d.gpus, engine: e, load: l,
				metric: m.metric, measured: m.v, heldOut: true, assumption: "220 in, geometric outputs mean 200"})
		}
	}
	// Point 1: vLLM on one A100-40GB, 1024 in / 128 out at concurrency 1:
	// ~75 tok/s per request, taken as the decode rate.
	pts = append(pts, batchPoint{id: "1 c=1", desc: "Llama-3.1-8B BF16, A100-40GB, vLLM", model: "llama-3.1-8b", quant: "bf16",
		hw: "a100-40gb", gpus: 1, engine: EngineConfig{Seed: 1, FrontEnd: VLLMFrontEnd}, load: ClosedLoop{Users: 1, Requests: 8, PromptTokens: 1024, MaxTokens: 128},
		metric: "decode_tps_p50", measured: 75, heldOut: true, assumption: "the per-request 75 tok/s read as decode TPS"})
	// Points 3 and 4: TensorRT-LLM's batch-1 TTFT of a 512-token prompt
	// across tensor-parallel degrees. These fitted the tensorrt-llm
	// calibration's all-reduce (physics.md), so they are calibration.
	for _, d := range []struct {
		id, desc, model string
		gpus            int
		ttft            float64
	}{
		{"3 tp1", "MPT-7B FP16, 1× A100-40GB, TensorRT-LLM", "mpt-7b", 1, 46},
		{"3 tp2", "MPT-7B FP16, 2× A100-40GB, TensorRT-LLM", "mpt-7b", 2, 34},
		{"3 tp4", "MPT-7B FP16, 4× A100-40GB, TensorRT-LLM", "mpt-7b", 4, 26},
		{"4 tp4", "Llama-2-70B FP16, 4× A100-40GB, TensorRT-LLM", "llama-2-70b", 4, 154},
		{"4 tp8", "Llama-2-70B FP16, 8× A100-40GB, TensorRT-LLM", "llama-2-70b", 8, 114},
	} {
		pts = append(pts, batchPoint{id: d.id, desc: d.desc, model: d.model, quant: "fp16", hw: "a100-40gb", gpus: d.gpus,
			engineProfile: "tensorrt-llm", engine: EngineConfig{Seed: 1}, load: ClosedLoop{Users: 1, Requests: 4, PromptTokens: 512, MaxTokens: 8},
			metric: "ttft_p50_ms", measured: d.ttft, assumption: "batch 1, 512 in"})
	}
	return pts
}

// predict runs the point's load in virtual time and summarizes it with the
// metrics package, as `tokbench simulate` does.
func predict(t *testing.T, p batchPoint) float64 {
	t.Helper()
	d, err := Deployment(p.model, p.quant, p.hw, p.gpus)
	if err != nil {
		t.Fatal(err)
	}
	if p.engineProfile != "" {
		e, err := physics.LookupEngine(p.engineProfile)
		if err != nil {
			t.Fatal(err)
		}
		d.Hardware = e.Apply(d.Hardware)
	}
	cost := PhysicsCost{D: d}
	traces, err := RunClosedLoop(context.Background(), p.engine, cost, p.load)
	if err != nil {
		t.Fatal(err)
	}
	lv := metrics.Summarize(metrics.Load{Mode: "concurrency", Concurrency: p.load.Users}, Records(0, traces), 0)
	switch p.metric {
	case "output_tps":
		return lv.OutputTPS
	case "tpot_p50_ms":
		return lv.TPOT.P50
	case "ttft_p50_ms":
		return lv.TTFT.P50
	case "request_rps":
		return lv.RequestRPS
	case "decode_tps_p50":
		return lv.DecodeTPS.P50
	}
	t.Fatalf("unknown metric %q", p.metric)
	return 0
}

func median(x []float64) float64 {
	if len(x) == 0 {
		return math.NaN()
	}
	s := slices.Sorted(slices.Values(x))
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// TestValidation compares engine predictions with the measured batching
// points. The bound guards against regressions; docs/simulator.md explains
// each point's error.
func TestValidation(t *testing.T) {
	var tbl bytes.Buffer
	fmt.Fprintln(&tbl, "| point | deployment | metric | measured | predicted | error | set |")
	fmt.Fprintln(&tbl, "|---|---|---|---|---|---|---|")
	var held, heldGPU, heldNoTTFT, heldTTFT, calib []float64
	for _, p := range batchPoints() {
		got := predict(t, p)
		rel := (got - p.measured) / p.measured
		set := "calibration (physics)"
		switch {
		case p.heldOut && p.clientLimited:
			set = "held out; not GPU-bound †"
			held = append(held, math.Abs(rel))
		case p.heldOut:
			set = "held out"
			held = append(held, math.Abs(rel))
			heldGPU = append(heldGPU, math.Abs(rel))
			if p.metric != "ttft_p50_ms" {
				heldNoTTFT = append(heldNoTTFT, math.Abs(rel))
			} else {
				heldTTFT = append(heldTTFT, math.Abs(rel))
			}
		default:
			calib = append(calib, math.Abs(rel))
		}
		fmt.Fprintf(&tbl, "| %s | %s | %s | %.4g | %.4g | %+.0f%% | %s |\n", p.id, p.desc, p.metric, p.measured, got, 100*rel, set)
	}
	fmt.Fprintf(&tbl, "\nMedian absolute error: all held-out values %.0f%% (%d); held out without † %.0f%% (%d); "+
		"of those, throughput, TPOT and req/s only %.0f%% (%d); the calibration values %.0f%% (%d).\n",
		100*median(held), len(held), 100*median(heldGPU), len(heldGPU),
		100*median(heldNoTTFT), len(heldNoTTFT), 100*median(calib), len(calib))
	fmt.Fprintf(&tbl, "\nBy metric, held out without †: %s.\n", byMetric(batchPoints(), func(p batchPoint) float64 { return predict(t, p) }))
	t.Log("\n" + tbl.String())
	if *update {
		rewriteDoc(t, "../docs/simulator.md", tbl.String())
	}
	// The aim (issue 3: ≤ 20% held out), and a regression guard on
	// throughput and TPOT at what the model achieves today (14%).
	if m := median(heldGPU); m > 0.20 {
		t.Errorf("median held-out error without † = %.0f%%, want ≤ 20%%", 100*m)
	}
	if m := median(heldNoTTFT); m > 0.15 {
		t.Errorf("median held-out throughput/TPOT error = %.0f%%, was ≤ 15%%", 100*m)
	}
	// The front end's aim (issue 38: TTFT ≤ 25% held out; 16% with
	// VLLMFrontEnd, 57% without).
	if m := median(heldTTFT); m > 0.25 {
		t.Errorf("median held-out TTFT error = %.0f%%, want ≤ 25%%", 100*m)
	}
}

// byMetric is the median absolute held-out error (without †) of each
// metric, "ttft_p50_ms 57% (4), …" in metric order.
func byMetric(pts []batchPoint, predicted func(batchPoint) float64) string {
	errs := map[string][]float64{}
	for _, p := range pts {
		if p.heldOut && !p.clientLimited {
			errs[p.metric] = append(errs[p.metric], math.Abs(predicted(p)/p.measured-1))
		}
	}
	var parts []string
	for _, m := range slices.Sorted(maps.Keys(errs)) {
		parts = append(parts, fmt.Sprintf("%s %.0f%% (%d)", m, 100*median(errs[m]), len(errs[m])))
	}
	return strings.Join(parts, ", ")
}

func rewriteDoc(t *testing.T, path, table string) {
	t.Helper()
	const begin, end = "<!-- validation:begin -->\n", "<!-- validation:end -->"
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	i, j := strings.Index(s, begin), strings.Index(s, end)
	if i < 0 || j < i {
		t.Fatalf("%s: validation markers not found", path)
	}
	s = s[:i+len(begin)] + table + s[j:]
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

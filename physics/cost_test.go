package physics

import (
	"math"
	"testing"
	"time"
)

func mustDeploy(t *testing.T, model, quant, hardware string, gpus int) Deployment {
	t.Helper()
	m, err := LookupModel(model)
	if err != nil {
		t.Fatal(err)
	}
	p, err := LookupPrecision(quant)
	if err != nil {
		t.Fatal(err)
	}
	kv, err := LookupPrecision("bf16")
	if err != nil {
		t.Fatal(err)
	}
	h, err := LookupHardware(hardware)
	if err != nil {
		t.Fatal(err)
	}
	return Deployment{Model: m, Weights: p, KVCache: kv, Hardware: h, GPUs: gpus}
}

func near(got, want, relTol float64) bool {
	return math.Abs(got-want) <= relTol*math.Abs(want)
}

// The seeds' example: 70 GB of 8-bit weights over an H100's 3.35 TB/s caps
// one stream near 48 tokens per second.
func TestSeedExample48TPS(t *testing.T) {
	h, _ := LookupHardware("h100-sxm")
	int8, _ := LookupPrecision("int8")
	d := Deployment{Model: Model{Name: "dense-70b", TotalParams: 70e9}, Weights: int8, KVCache: int8, Hardware: h, GPUs: 1}
	if got, want := d.BytesPerToken(0), 70e9; got != want {
		t.Fatalf("BytesPerToken(0) = %g, want %g", got, want)
	}
	tps := h.BandwidthBytesPerSec / d.BytesPerToken(0) // MBU 100%
	if want := 3.35e12 / 70e9; !near(tps, want, 1e-12) || math.Round(tps) != 48 {
		t.Fatalf("ceiling = %.2f TPS, want %.2f ≈ 48", tps, want)
	}
}

func TestKVBytesPerToken(t *testing.T) {
	for _, tc := range []struct {
		model string
		want  float64
	}{
		{"llama-3.1-8b", 128 << 10},  // 2·32·8·128·2
		{"llama-3.1-70b", 320 << 10}, // 2·80·8·128·2
		{"llama-3.1-405b", 504 << 10},
		{"qwen3-235b-a22b", 188 << 10},
		{"gpt-oss-120b", 72 << 10},
		{"gemma-2-9b", 336 << 10},
		{"deepseek-v3", 61 * (512 + 64) * 2}, // MLA: 68.6 KiB
		{"llama-2-7b", 512 << 10},            // MHA: 2·32·32·128·2
	} {
		d := mustDeploy(t, tc.model, "bf16", "h100-sxm", 1)
		if got := d.KVBytesPerToken(); got != tc.want {
			t.Errorf("%s KVBytesPerToken = %g, want %g", tc.model, got, tc.want)
		}
	}
}

// Derived parameter counts must match the model cards.
func TestArchParamsMatchModelCards(t *testing.T) {
	for _, tc := range []struct {
		model         string
		total, active float64
	}{
		{"llama-3.1-8b", 8.03e9, 8.03e9},
		{"llama-3.1-70b", 70.6e9, 70.6e9},
		{"llama-3.1-405b", 405e9, 405e9},
		{"qwen3-235b-a22b", 235e9, 22e9},
		{"mixtral-8x7b", 46.7e9, 12.9e9},
		{"llama-4-scout", 109e9, 17e9},
		{"llama-4-maverick", 400e9, 17e9},
		{"gpt-oss-120b", 117e9, 5.1e9 + 0.58e9}, // card's active excludes the 0.58B input embedding
		{"gpt-oss-20b", 21e9, 3.6e9 + 0.58e9},
		{"mistral-7b", 7.24e9, 7.24e9},
		{"gemma-2-9b", 9.24e9, 9.24e9},
	} {
		m, err := LookupModel(tc.model)
		if err != nil {
			t.Fatal(err)
		}
		total, active := m.ArchParams()
		if !near(total, tc.total, 0.03) || !near(active, tc.active, 0.05) {
			t.Errorf("%s ArchParams = %.3gB / %.3gB, want %.3gB / %.3gB", tc.model, total/1e9, active/1e9, tc.total/1e9, tc.active/1e9)
		}
	}
	for _, tc := range []struct {
		model string
		total float64
	}{
		{"llama-2-7b", 6.74e9}, {"llama-2-13b", 13.0e9}, {"llama-2-70b", 68.98e9}, {"mpt-7b", 6.65e9},
	} {
		m, _ := LookupModel(tc.model)
		if !near(m.TotalParams, tc.total, 0.01) {
			t.Errorf("%s TotalParams = %.4gB, want %.4gB", tc.model, m.TotalParams/1e9, tc.total/1e9)
		}
	}
}

func TestBytesPerToken(t *testing.T) {
	// Llama 3.1 8B BF16: all weights but the 128256×4096 input embedding,
	// plus 1024 tokens of 128 KiB KV.
	d := mustDeploy(t, "llama-3.1-8b", "bf16", "h100-sxm", 1)
	want := (8.03e9-128256*4096)*2 + 1024*131072
	if got := d.BytesPerToken(1024); !near(got, want, 1e-12) {
		t.Errorf("BytesPerToken(1024) = %g, want %g", got, want)
	}
	// Tied embeddings are read in full as the output head.
	d = mustDeploy(t, "llama-3.2-1b", "bf16", "h100-sxm", 1)
	if got, want := d.BytesPerToken(0), 1.23e9*2; !near(got, want, 1e-12) {
		t.Errorf("tied BytesPerToken(0) = %g, want %g", got, want)
	}
	// Mixtral at batch 1 reads 2 of 8 experts: attention etc. + 2/8 of the experts.
	d = mustDeploy(t, "mixtral-8x7b", "bf16", "h100-sxm", 1)
	expert := 3.0 * 4096 * 14336
	common := 46.7e9 - 32000*4096 - 32*8*expert
	if got, want := d.BytesPerToken(0), (common+32*2*expert)*2; !near(got, want, 1e-12) {
		t.Errorf("mixtral BytesPerToken(0) = %g, want %g", got, want)
	}
}

func TestExpertsTouched(t *testing.T) {
	m, _ := LookupModel("mixtral-8x7b")
	for _, tc := range []struct {
		tokens int
		want   float64
	}{
		{1, 2}, {2, 8 * (1 - 0.75*0.75)}, {64, 8 * (1 - math.Pow(0.75, 64))},
	} {
		if got := m.ExpertsTouched(tc.tokens); !near(got, tc.want, 1e-12) {
			t.Errorf("ExpertsTouched(%d) = %g, want %g", tc.tokens, got, tc.want)
		}
	}
}

func TestSpecExpectedTokens(t *testing.T) {
	if got := SpecExpectedTokens(0.8, 4); !near(got, 3.3616, 1e-9) {
		t.Errorf("SpecExpectedTokens(0.8, 4) = %g, want 3.3616", got)
	}
	if got := SpecExpectedTokens(0, 4); got != 1 {
		t.Errorf("SpecExpectedTokens(0, 4) = %g, want 1", got)
	}
	if got := SpecExpectedTokens(1, 4); got != 5 {
		t.Errorf("SpecExpectedTokens(1, 4) = %g, want 5", got)
	}
}

func TestStepTimeTerms(t *testing.T) {
	h := Hardware{Name: "toy", BandwidthBytesPerSec: 1e12, BF16FLOPS: 100e12, MBU: 0.5, MFUDecode: 0.5, MFUPrefill: 0.25,
		StepOverhead: time.Millisecond, LayerOverhead: 10 * time.Microsecond}
	bf16, _ := LookupPrecision("bf16")
	m := Model{Name: "toy", TotalParams: 1e9, Layers: 10, Hidden: 1000, Heads: 10, KVHeads: 10, HeadDim: 100}
	d := Deployment{Model: m, Weights: bf16, KVCache: bf16, Hardware: h, GPUs: 1}
	// KV per token 2·10·10·100·2 = 40 kB.
	// Decode 4 seqs, 1000 tokens of KV: memory (2e9 + 4e7) / 0.5e12 = 4.08 ms;
	// compute (2e9·4 + 4·10·1000·1000) / 50e12 = 0.1608 ms.
	got := d.StepCost(Step{DecodeSeqs: 4, KVTokens: 1000})
	if want := 4080 * time.Microsecond; got.Memory != want {
		t.Errorf("memory term = %v, want %v", got.Memory, want)
	}
	if want := 160800 * time.Nanosecond; got.Compute != want {
		t.Errorf("compute term = %v, want %v", got.Compute, want)
	}
	if want := 4080*time.Microsecond + 1100*time.Microsecond; d.StepTime(Step{DecodeSeqs: 4, KVTokens: 1000}) != want {
		t.Errorf("StepTime = %v, want %v", d.StepTime(Step{DecodeSeqs: 4, KVTokens: 1000}), want)
	}
	// Prefill 1000 fresh tokens: compute (2e9·1000 + 4·10·1000·500·1000) / 25e12 = 80.8 ms.
	got = d.StepCost(Step{PrefillTokens: 1000, PrefillContextTokens: 1000})
	if want := 80800 * time.Microsecond; got.Compute != want {
		t.Errorf("prefill compute = %v, want %v", got.Compute, want)
	}
	// Four fresh prompts of 1000 tokens in one step attend per sequence,
	// 4·500k pairs: (2e9·4000 + 4·10·1000·2e6) / 25e12 = 323.2 ms, four
	// times one prompt (the sums taken as one prompt would give 332.8).
	got = d.StepCost(Step{PrefillTokens: 4000, PrefillContextTokens: 4000, PrefillAttentionPairs: 4 * 1000 * 1000 / 2})
	if want := 323200 * time.Microsecond; got.Compute != want {
		t.Errorf("four prompts' prefill compute = %v, want %v", got.Compute, want)
	}
	if d.StepTime(Step{}) != 0 {
		t.Errorf("empty step takes %v, want 0", d.StepTime(Step{}))
	}
}

func TestKVCapacityAndMBU(t *testing.T) {
	d := mustDeploy(t, "llama-3.1-8b", "bf16", "h100-sxm", 1)
	free, perToken := 80e9*0.9-8.03e9*2, 131072.0
	want := int(free / perToken)
	if got := d.KVCapacityTokens(); got != want {
		t.Errorf("KVCapacityTokens = %d, want %d", got, want)
	}
	// 154.3 TPS × 15.01 GB = 2.316 TB/s = 69.1% of 3.35 TB/s.
	if got, want := MBU(d, 154.3, 0), 154.3*(8.03e9-128256*4096)*2/3.35e12; !near(got, want, 1e-12) {
		t.Errorf("MBU = %g, want %g", got, want)
	}
	// 70B BF16 does not fit on one H100.
	if got := mustDeploy(t, "llama-3.1-70b", "bf16", "h100-sxm", 1).KVCapacityTokens(); got != 0 {
		t.Errorf("70B on one H100 KV capacity = %d, want 0", got)
	}
}

func TestLookupUnknownListsKnown(t *testing.T) {
	_, err := LookupHardware("h100-sxn")
	if err == nil || !contains(err.Error(), `"h100-sxn"`) || !contains(err.Error(), "h100-sxm") {
		t.Fatalf("LookupHardware(h100-sxn) error = %v, want it to name the value and list h100-sxm", err)
	}
	if _, err := LookupHardware("H100-SXM"); err != nil {
		t.Errorf("LookupHardware is case sensitive: %v", err)
	}
}

func TestTensorParallel(t *testing.T) {
	// DeepSeek-V3 FP8 on 8× H200: MLA's latent is replicated on every GPU.
	d := mustDeploy(t, "deepseek-v3", "fp8", "h200-sxm", 8)
	perToken := 61.0 * (512 + 64) * 2 // bf16 KV
	want := int((8*141e9*0.9 - 671e9) / (perToken * 8))
	if got := d.KVCapacityTokens(); got != want {
		t.Errorf("deepseek-v3 TP8 KVCapacityTokens = %d, want %d", got, want)
	}
	// All-reduce: 2 per layer, each latency + 2(g−1)/g × tokens × hidden × 2 bytes ÷ link.
	h := Hardware{Name: "toy", BandwidthBytesPerSec: 1e12, MBU: 1, AllReduceLatency: 10 * time.Microsecond, InterconnectBytesPerSec: 100e9}
	bf16, _ := LookupPrecision("bf16")
	m := Model{Name: "toy", TotalParams: 1e9, Layers: 10, Hidden: 1000, Heads: 10, KVHeads: 10, HeadDim: 100}
	tp := Deployment{Model: m, Weights: bf16, KVCache: bf16, Hardware: h, GPUs: 4}
	c := tp.StepCost(Step{DecodeSeqs: 100, KVTokens: 0})
	// message 100·1000·2 = 200 kB; 1.5 × 200 kB / 100 GB/s = 3 µs; (10 + 3) µs × 20.
	if want := 260 * time.Microsecond; c.AllReduce != want {
		t.Errorf("all-reduce = %v, want %v", c.AllReduce, want)
	}
	// Memory splits over 4 GPUs: 2e9 bytes / 4e12 B/s = 0.5 ms.
	if want := 500 * time.Microsecond; c.Memory != want {
		t.Errorf("TP4 memory term = %v, want %v", c.Memory, want)
	}
}

func TestAchievedMBU(t *testing.T) {
	d := Deployment{
		Model:    Model{Name: "dense", TotalParams: 10e9, ActiveParams: 10e9, Layers: 10, KVHeads: 1, HeadDim: 100},
		Weights:  Precision{Name: "int8", BitsPerWeight: 8},
		KVCache:  Precision{Name: "int8", BitsPerWeight: 8},
		Hardware: Hardware{Name: "x", BandwidthBytesPerSec: 1e12},
		GPUs:     1,
	}
	// KV per token: 2·10·1·100·1 = 2000 bytes.
	if got := d.KVBytesPerToken(); got != 2000 {
		t.Fatalf("KVBytesPerToken = %g, want 2000", got)
	}
	// Batch 1 at 1000 tokens of context, 50 tok/s: equals MBU.
	if a, b := d.AchievedMBU(50, 1, 1000), MBU(d, 50, 1000); math.Abs(a-b) > 1e-12 {
		t.Errorf("AchievedMBU(batch 1) = %g, MBU = %g", a, b)
	}
	// Batch 4: weights once plus 4 contexts: (ReadParams(4)·1 + 4·1000·2000) bytes per step.
	want := (d.Model.ReadParams(4) + 4*1000*2000) * 20 / 1e12
	if got := d.AchievedMBU(20, 4, 1000); math.Abs(got-want) > 1e-12 {
		t.Errorf("AchievedMBU(20, 4, 1000) = %g, want %g", got, want)
	}
}

// The all-reduce of vLLM's custom kernel on H100, as measured in sglang PR
// #2904 (vLLM kernel, no CUDA graph): 4 MB (1 Mi fp32 values) took 26.6,
// 40.2 and 45.0 µs at TP 2, 4 and 8, and 512 bytes ~9–10 µs. One all-reduce
// of the model's cost must land within 15% of each.
func TestAllReduceH100MatchesMeasured(t *testing.T) {
	h, err := LookupHardware("h100-sxm")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		gpus      int
		bytes     float64
		measuredU float64
	}{{2, 4 << 20, 26.6}, {4, 4 << 20, 40.2}, {8, 4 << 20, 45.0}, {2, 512, 9.5}, {4, 512, 9.1}, {8, 512, 10.1}} {
		// A model of one layer with hidden H moves tokens·H·2 bytes per
		// all-reduce, two per layer: choose H = bytes/2 and one token.
		m := Model{Name: "probe", TotalParams: 1, Layers: 1, Hidden: int(tc.bytes / activationBytes)}
		d := Deployment{Model: m, Hardware: h, GPUs: tc.gpus}
		got := float64(d.allReduceTime(1)) / 2 / float64(time.Microsecond)
		if math.Abs(got-tc.measuredU)/tc.measuredU > 0.15 {
			t.Errorf("TP%d all-reduce of %g bytes = %.1f µs, measured %.1f µs", tc.gpus, tc.bytes, got, tc.measuredU)
		}
	}
}

// TensorRT-LLM keeps the kernels' efficiencies of the hardware and changes
// only the all-reduce, to the figures fitted on #3.
func TestTensorRTLLMChangesOnlyAllReduce(t *testing.T) {
	h, _ := LookupHardware("h100-sxm")
	e, err := LookupEngine("tensorrt-llm")
	if err != nil {
		t.Fatal(err)
	}
	got := e.Apply(h)
	want := h
	want.AllReduceLatency, want.AllReduceEfficiency = 61*time.Microsecond, 44.0/300
	if got != want {
		t.Errorf("tensorrt-llm.Apply(h100-sxm) = %+v, want %+v", got, want)
	}
}

package physics

import "time"

// Bits per weight include block scales: a block of n weights with an s-bit
// scale costs s/n extra bits per weight. Block layouts are those of the
// formats' definitions (ggml-common.h for GGUF; the OCP MX spec for MXFP4);
// the K-quant mixes (_s/_m/_l) vary per model and are averages reported by
// llama.cpp's quantize tool for Llama-3-8B: approximate.
var builtinPrecisions = []Precision{
	{Name: "fp32", BitsPerWeight: 32, Source: "IEEE 754 single"},
	{Name: "bf16", BitsPerWeight: 16, Source: "bfloat16"},
	{Name: "fp16", BitsPerWeight: 16, Source: "IEEE 754 half"},
	{Name: "f16", BitsPerWeight: 16, Source: "GGUF F16"},
	{Name: "f32", BitsPerWeight: 32, Source: "GGUF F32"},
	{Name: "fp8", BitsPerWeight: 8, FP8Compute: true, Source: "FP8 E4M3, per-tensor or per-channel scales (negligible); W8A8 on FP8 tensor cores"},
	{Name: "int8", BitsPerWeight: 8, Source: "INT8 weight-only, per-channel scales (negligible); BF16 compute"},
	{Name: "int4", BitsPerWeight: 4.25, Source: "INT4 weight-only (AWQ/GPTQ style), groups of 128 with a 16-bit scale and 16-bit zero: 4 + 32/128"},
	{Name: "mxfp4", BitsPerWeight: 4.25, Source: "OCP MXFP4: blocks of 32 FP4 values with one 8-bit scale: 4 + 8/32"},
	{Name: "nvfp4", BitsPerWeight: 4.5, Source: "NVFP4: blocks of 16 FP4 values with one FP8 scale: 4 + 8/16"},
	{Name: "q8_0", BitsPerWeight: 8.5, Source: "GGUF Q8_0: 32 × int8 + fp16 scale = 34 bytes per 32 weights"},
	{Name: "q6_k", BitsPerWeight: 6.5625, Source: "GGUF Q6_K: 210 bytes per 256-weight super-block"},
	{Name: "q5_k", BitsPerWeight: 5.5, Source: "GGUF Q5_K: 176 bytes per 256-weight super-block"},
	{Name: "q5_k_s", BitsPerWeight: 5.57, Source: "GGUF Q5_K_S mix, llama.cpp quantize size for Llama-3-8B: approximate"},
	{Name: "q5_k_m", BitsPerWeight: 5.70, Source: "GGUF Q5_K_M mix, llama.cpp quantize size for Llama-3-8B: approximate"},
	{Name: "q5_0", BitsPerWeight: 5.5, Source: "GGUF Q5_0: 22 bytes per 32 weights"},
	{Name: "q5_1", BitsPerWeight: 6, Source: "GGUF Q5_1: 24 bytes per 32 weights"},
	{Name: "q4_k", BitsPerWeight: 4.5, Source: "GGUF Q4_K: 144 bytes per 256-weight super-block"},
	{Name: "q4_k_s", BitsPerWeight: 4.67, Source: "GGUF Q4_K_S mix, llama.cpp quantize size for Llama-3-8B: approximate"},
	{Name: "q4_k_m", BitsPerWeight: 4.89, Source: "GGUF Q4_K_M mix, llama.cpp quantize size for Llama-3-8B: approximate"},
	{Name: "q4_0", BitsPerWeight: 4.5, Source: "GGUF Q4_0: 16 bytes of nibbles + fp16 scale = 18 bytes per 32 weights"},
	{Name: "q4_1", BitsPerWeight: 5, Source: "GGUF Q4_1: 20 bytes per 32 weights"},
	{Name: "iq4_xs", BitsPerWeight: 4.25, Source: "GGUF IQ4_XS: 136 bytes per 256-weight super-block"},
	{Name: "q3_k", BitsPerWeight: 3.4375, Source: "GGUF Q3_K: 110 bytes per 256-weight super-block"},
	{Name: "q3_k_m", BitsPerWeight: 4.0, Source: "GGUF Q3_K_M mix, llama.cpp quantize size for Llama-3-8B: approximate"},
	{Name: "q2_k", BitsPerWeight: 2.625, Source: "GGUF Q2_K: 84 bytes per 256-weight super-block (the Q2_K file mix averages more)"},
}

// Engine profiles. The hardware's own calibration is vLLM's on datacenter
// GPUs and llama.cpp's elsewhere. TensorRT-LLM differs in its all-reduce
// (as Databricks measured it in 2023). llama.cpp on datacenter GPUs differs
// more: its quantised mat-vec kernels reach about half of HBM bandwidth. Fitted to llama.cpp discussion #15013 (Llama-2-7B Q4_0
// tg128 on H100 280.7 t/s and A100-80GB 200.9 t/s: two points, two unknowns
// MBU and overhead; pp512 11263 / 5286 t/s for MFU).
var builtinEngines = []Engine{
	{Name: "vllm", Source: "the hardware's own calibration (vLLM on datacenter GPUs, with vLLM's custom all-reduce)"},
	{Name: "tensorrt-llm", AllReduceByClass: map[string]AllReduce{ClassDatacenterGPU: trtAllReduce},
		Source: "the hardware's own kernels; all-reduce fitted to Databricks' TensorRT-LLM MPT-7B TTFT on 1/2/4 A100 (#3)"},
	{Name: "sglang", Source: "the hardware's own calibration (not measured separately)"},
	{Name: "llama.cpp", ByClass: map[string]Efficiency{
		ClassDatacenterGPU: {
			MBU: 0.51, MFUPrefill: 0.30, MFUDecode: 0.20,
			StepOverhead:     1350 * time.Microsecond,
			AllReduceLatency: 50 * time.Microsecond, AllReduceEfficiency: 44.0 / 300,
		},
	}, Source: "fitted to llama.cpp discussion #15013 (H100, A100-80GB); other classes keep their own llama.cpp calibration"},
}

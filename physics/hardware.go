package physics

import "time"

const (
	gb     = 1e9
	tbps   = 1e12 // bytes per second
	gbps   = 1e9  // bytes per second
	tflops = 1e12
)

// Calibrated efficiencies per hardware class. How they were chosen, and the
// errors they give on measured and held-out points, is in docs/physics.md
// (its table is written by TestValidationDoc).
var (
	// Datacenter GPUs in vLLM / TensorRT-LLM. MBU is set to 0.80 and the
	// overheads (400 µs per step + 15 µs per layer) are fitted to Llama-3.1-8B
	// on H100 in vLLM (TPOT 6.48 ms, docs/measurements.md #2). MFU decode is
	// inference-sim's hardware_config.json value. The all-reduce is vLLM's
	// custom all-reduce as measured on H100 (sglang PR #2904, vLLM kernel,
	// TP 2/4/8, no CUDA graph): ~9 µs for messages up to 32 KB and
	// 26.6/40.2/45.0 µs for 4 MB, that is ~210 GB/s of bus bandwidth over
	// the 9 µs, 0.47 of NVLink 4's 450 GB/s per direction. TensorRT-LLM's
	// all-reduce as Databricks measured it is slower: see the engine entry.
	effDatacenter = Efficiency{
		MBU: 0.80, MFUPrefill: 0.45, MFUDecode: 0.30,
		StepOverhead: 400 * time.Microsecond, LayerOverhead: 15 * time.Microsecond,
		AllReduceLatency: 9 * time.Microsecond, AllReduceEfficiency: 0.47,
	}
	// trtAllReduce is TensorRT-LLM's all-reduce in Databricks' 2023
	// measurements: latency 61 µs and 44 GB/s on A100 NVLink 3 (44/300 of the
	// link speed), fitted with A100's MFU prefill to MPT-7B TTFT on 1/2/4
	// A100s (#3).
	trtAllReduce = AllReduce{Latency: 61 * time.Microsecond, Efficiency: 44.0 / 300}
	// Consumer GPUs in llama.cpp (CUDA): MBU and overhead fitted to the RTX
	// 5090 and 4090 tg128 points (#8); MFU prefill is the 5090 pp512 rate
	// against its BF16 peak (llama.cpp runs quantised prefill on integer
	// tensor cores, so this is a fit, not a physical fraction).
	effConsumer = Efficiency{
		MBU: 0.83, MFUPrefill: 0.48, MFUDecode: 0.30,
		StepOverhead:     810 * time.Microsecond,
		AllReduceLatency: 61 * time.Microsecond,
	}
	// Apple silicon in llama.cpp (Metal): MBU and overhead fitted to M1 Max
	// F16 and Q4_0 (#10); the other Apple points are held out. No FLOPs
	// figure is in the reference, so the MFUs are unused placeholders.
	effApple = Efficiency{
		MBU: 0.877, MFUPrefill: 0.40, MFUDecode: 0.30,
		StepOverhead: 1000 * time.Microsecond, LayerOverhead: 148 * time.Microsecond,
	}
	// CPU sockets in llama.cpp: dual EPYC reaches ~74% of peak bandwidth on a
	// 70B F16 model (llama.cpp issue #11744).
	effCPU = Efficiency{
		MBU: 0.74, MFUPrefill: 0.40, MFUDecode: 0.30,
	}
	// On-chip SRAM systems: not calibrated (no measurement in the reference).
	effSRAM = Efficiency{MBU: 0.5, MFUPrefill: 0.4, MFUDecode: 0.3}
)

func hw(class string, eff Efficiency, h Hardware) Hardware {
	h.Class = class
	h = h.WithEfficiency(eff)
	return h
}

// allReduce sets the all-reduce figures of an efficiency.
func allReduce(e Efficiency, ar AllReduce) Efficiency {
	e.AllReduceLatency, e.AllReduceEfficiency = ar.Latency, ar.Efficiency
	return e
}

// mfu sets the MFU pair of an efficiency.
func mfu(e Efficiency, prefill, decode float64) Efficiency {
	e.MFUPrefill, e.MFUDecode = prefill, decode
	return e
}

// Peak figures are the vendors' (each entry's Source names it). Interconnect
// link speeds per direction are from NVIDIA's and AMD's specs: the fraction an all-reduce
// reaches is the efficiency's AllReduceEfficiency, measured on H100 NVLink
// only, so treat the others as uncertain.
var builtinHardware = []Hardware{
	hw(ClassDatacenterGPU, mfu(effDatacenter, 0.45, 0.30), Hardware{
		Name: "h100-sxm", MemoryBytes: 80 * gb, BandwidthBytesPerSec: 3.35 * tbps,
		BF16FLOPS: 989.4 * tflops, FP8FLOPS: 1978.9 * tflops, // FP8 3957.8 is with sparsity
		InterconnectBytesPerSec: 450 * gbps, // NVLink 4, per direction
		Source:                  "NVIDIA H100 datasheet; MFU 0.45/0.30 from inference-sim hardware_config.json",
	}),
	hw(ClassDatacenterGPU, mfu(effDatacenter, 0.45, 0.30), Hardware{
		Name: "h100-pcie", MemoryBytes: 80 * gb, BandwidthBytesPerSec: 2.0 * tbps,
		BF16FLOPS: 756 * tflops, FP8FLOPS: 1513 * tflops,
		InterconnectBytesPerSec: 64 * gbps, // PCIe 5.0 x16 (uncertain: NVLink bridge pairs reach 300 GB/s)
		Source:                  "llm-analysis h100-pcie-80gb.json; LLM-Viewer hardware_params.py; MFU as H100 SXM",
	}),
	hw(ClassDatacenterGPU, mfu(effDatacenter, 0.45, 0.30), Hardware{
		Name: "h200-sxm", MemoryBytes: 141 * gb, BandwidthBytesPerSec: 4.8 * tbps,
		BF16FLOPS: 989 * tflops, FP8FLOPS: 1979 * tflops,
		InterconnectBytesPerSec: 450 * gbps, // NVLink 4, per direction
		Source:                  "NVIDIA H200 (same compute as H100); MFU as H100",
	}),
	// A100: the only all-reduce measured on it is TensorRT-LLM's (#3);
	// vLLM's custom all-reduce was measured on H100 only, so A100 keeps the
	// slower figure.
	hw(ClassDatacenterGPU, allReduce(mfu(effDatacenter, 0.50, 0.18), trtAllReduce), Hardware{
		Name: "a100-80gb", MemoryBytes: 80 * gb, BandwidthBytesPerSec: 2.039 * tbps,
		BF16FLOPS:               312 * tflops,
		InterconnectBytesPerSec: 300 * gbps, // NVLink 3, per direction (600 GB/s bidirectional)
		Source:                  "NVIDIA A100 datasheet; GenZ system_configs.py; MFU 0.38/0.18 from inference-sim",
	}),
	hw(ClassDatacenterGPU, allReduce(mfu(effDatacenter, 0.50, 0.18), trtAllReduce), Hardware{
		Name: "a100-40gb", MemoryBytes: 40 * gb, BandwidthBytesPerSec: 1.555 * tbps,
		BF16FLOPS:               312 * tflops,
		InterconnectBytesPerSec: 300 * gbps, // NVLink 3, per direction (600 GB/s bidirectional)
		Source:                  "NVIDIA A100 datasheet (via glennklockwood.com); llm-analysis a100-sxm-40gb.json; MFU from inference-sim",
	}),
	hw(ClassDatacenterGPU, mfu(effDatacenter, 0.45, 0.30), Hardware{
		Name: "b200", MemoryBytes: 180 * gb, BandwidthBytesPerSec: 7.7 * tbps, // uncertain: sources say 180–192 GB, 7.7–8.0 TB/s; lower figures taken
		BF16FLOPS: 2250 * tflops, FP8FLOPS: 4500 * tflops,
		InterconnectBytesPerSec: 900 * gbps, // NVLink 5, per direction
		Source:                  "NVIDIA B200 figures (published figures disagree on memory and bandwidth: uncertain); efficiencies as H100 (not measured)",
	}),
	hw(ClassDatacenterGPU, mfu(effDatacenter, 0.45, 0.30), Hardware{
		Name: "gb200", MemoryBytes: 186 * gb, BandwidthBytesPerSec: 8.0 * tbps, // memory ~186–192 GB: uncertain
		BF16FLOPS: 2500 * tflops, FP8FLOPS: 5000 * tflops,
		InterconnectBytesPerSec: 900 * gbps, // NVLink 5, per direction
		Source:                  "NVIDIA GB200 figures, per GPU (memory uncertain); sustained 7.35 TB/s = 92% of peak measured (Azure ND GB200 v6)",
	}),
	hw(ClassDatacenterGPU, mfu(effDatacenter, 0.45, 0.30), Hardware{
		Name: "mi300x", MemoryBytes: 192 * gb, BandwidthBytesPerSec: 5.3 * tbps,
		BF16FLOPS: 1307.4 * tflops, FP8FLOPS: 2614.9 * tflops,
		InterconnectBytesPerSec: 448 * gbps, // Infinity Fabric, 7 links × 64 GB/s
		Source:                  "AMD datasheet (via GenZ); efficiencies as H100 (not measured)",
	}),
	hw(ClassDatacenterGPU, mfu(effDatacenter, 0.45, 0.30), Hardware{
		Name: "mi325x", MemoryBytes: 256 * gb, BandwidthBytesPerSec: 6.0 * tbps,
		BF16FLOPS: 1307.4 * tflops, FP8FLOPS: 2614.9 * tflops,
		InterconnectBytesPerSec: 448 * gbps, // Infinity Fabric, as mi300x
		Source:                  "AMD; efficiencies as H100 (not measured)",
	}),
	hw(ClassDatacenterGPU, mfu(effDatacenter, 0.32, 0.08), Hardware{
		Name: "l4", MemoryBytes: 24 * gb, BandwidthBytesPerSec: 0.300 * tbps,
		BF16FLOPS: 121 * tflops, FP8FLOPS: 242.5 * tflops, // dense = half of the sparse figure
		InterconnectBytesPerSec: 32 * gbps, // PCIe 4.0 x16 (uncertain: not in reference)
		Source:                  "NVIDIA L4; MFU as L40S (inference-sim)",
	}),
	hw(ClassDatacenterGPU, mfu(effDatacenter, 0.32, 0.08), Hardware{
		Name: "l40s", MemoryBytes: 48 * gb, BandwidthBytesPerSec: 0.864 * tbps,
		BF16FLOPS: 362 * tflops, FP8FLOPS: 733 * tflops,
		InterconnectBytesPerSec: 32 * gbps, // PCIe 4.0 x16 (uncertain: not in reference)
		Source:                  "NVIDIA L40S datasheet; MFU 0.32/0.08 from inference-sim",
	}),
	hw(ClassDatacenterGPU, mfu(effDatacenter, 0.32, 0.08), Hardware{
		Name: "a10g", MemoryBytes: 24 * gb, BandwidthBytesPerSec: 0.600 * tbps,
		BF16FLOPS:               70 * tflops, // uncertain FLOPs
		InterconnectBytesPerSec: 32 * gbps,   // PCIe 4.0 x16 (uncertain: not in reference)
		Source:                  "NVIDIA A10G (FLOPs uncertain); MFU as L40S",
	}),
	hw(ClassConsumerGPU, effConsumer, Hardware{
		Name: "rtx-4090", MemoryBytes: 24 * gb, BandwidthBytesPerSec: 1.008 * tbps,
		BF16FLOPS: 165.2 * tflops, FP8FLOPS: 330.3 * tflops,
		InterconnectBytesPerSec: 32 * gbps, // PCIe 4.0 x16 (uncertain: not in reference)
		Source:                  "NVIDIA Ada whitepaper",
	}),
	hw(ClassConsumerGPU, effConsumer, Hardware{
		Name: "rtx-5090", MemoryBytes: 32 * gb, BandwidthBytesPerSec: 1.792 * tbps,
		BF16FLOPS: 419 * tflops, FP8FLOPS: 838 * tflops, // derived from sparse figures: uncertain
		InterconnectBytesPerSec: 64 * gbps, // PCIe 5.0 x16 (uncertain: not in reference)
		Source:                  "NVIDIA RTX 5090 (dense FLOPs derived from sparse figures: uncertain)",
	}),
	hw(ClassApple, effApple, Hardware{
		Name: "m2-ultra", MemoryBytes: 192 * gb, BandwidthBytesPerSec: 0.800 * tbps,
		Source: "Apple (no FLOPs figure published: no compute term)",
	}),
	hw(ClassApple, effApple, Hardware{
		Name: "m3-max", MemoryBytes: 128 * gb, BandwidthBytesPerSec: 0.400 * tbps,
		Source: "Apple, 16-core CPU / 40-core GPU (the 14-core part has 0.300 TB/s)",
	}),
	hw(ClassApple, effApple, Hardware{
		Name: "m4-max", MemoryBytes: 128 * gb, BandwidthBytesPerSec: 0.546 * tbps,
		Source: "Apple, full part (the binned part has 0.410 TB/s)",
	}),
	hw(ClassApple, effApple, Hardware{
		Name: "m1-max", MemoryBytes: 64 * gb, BandwidthBytesPerSec: 0.400 * tbps,
		Source: "Apple M1 Max spec (400 GB/s, up to 64 GB); not cross-checked: uncertain",
	}),
	hw(ClassApple, effApple, Hardware{
		Name: "m3-ultra", MemoryBytes: 512 * gb, BandwidthBytesPerSec: 0.819 * tbps,
		Source: "Apple M3 Ultra spec (819 GB/s, up to 512 GB); not cross-checked: uncertain",
	}),
	hw(ClassApple, effApple, Hardware{
		Name: "m4-pro", MemoryBytes: 64 * gb, BandwidthBytesPerSec: 0.273 * tbps,
		Source: "Apple M4 Pro spec (273 GB/s, up to 64 GB); not cross-checked: uncertain",
	}),
	hw(ClassCPU, effCPU, Hardware{
		Name: "epyc-9004", MemoryBytes: 768 * gb, BandwidthBytesPerSec: 0.4608 * tbps,
		Source: "12 channels DDR5-4800 per socket; memory assumes 12 × 64 GB DIMMs (an assumption, not a spec)",
	}),
	hw(ClassCPU, effCPU, Hardware{
		Name: "epyc-9005-ddr5-6400", MemoryBytes: 512 * gb, BandwidthBytesPerSec: 0.4096 * tbps,
		Source: "one socket of llama.cpp issue #11744's 2× EPYC 9175F with 16× DDR5-6400 (819 GB/s for both); memory assumes 8 × 64 GB DIMMs (an assumption)",
	}),
	hw(ClassCPU, effCPU, Hardware{
		Name: "xeon-spr", MemoryBytes: 512 * gb, BandwidthBytesPerSec: 0.307 * tbps,
		Source: "8 channels DDR5-4800 per socket (derived); memory assumes 8 × 64 GB DIMMs (an assumption)",
	}),
	// Desktop and laptop memory: per-channel figures, the JEDEC transfer
	// rate times 8 bytes per 64-bit channel, two channels as most
	// desktops and laptops have (memory sizes are typical configurations,
	// an assumption). Measured machines reach 60–80% of these.
	hw(ClassCPU, effCPU, Hardware{
		Name: "ddr4-3200-2ch", MemoryBytes: 64 * gb, BandwidthBytesPerSec: 2 * 3200e6 * 8,
		Source: "2 channels DDR4-3200: 25.6 GB/s per channel (3200 MT/s × 8 B, JEDEC); memory assumes 64 GB",
	}),
	hw(ClassCPU, effCPU, Hardware{
		Name: "ddr5-4800-2ch", MemoryBytes: 64 * gb, BandwidthBytesPerSec: 2 * 4800e6 * 8,
		Source: "2 channels DDR5-4800: 38.4 GB/s per channel (4800 MT/s × 8 B, JEDEC); memory assumes 64 GB",
	}),
	hw(ClassCPU, effCPU, Hardware{
		Name: "ddr5-5600-2ch", MemoryBytes: 96 * gb, BandwidthBytesPerSec: 2 * 5600e6 * 8,
		Source: "2 channels DDR5-5600: 44.8 GB/s per channel (5600 MT/s × 8 B, JEDEC); memory assumes 96 GB",
	}),
	hw(ClassCPU, effCPU, Hardware{
		Name: "ddr5-6400-2ch", MemoryBytes: 96 * gb, BandwidthBytesPerSec: 2 * 6400e6 * 8,
		Source: "2 channels DDR5-6400: 51.2 GB/s per channel (6400 MT/s × 8 B, JEDEC); memory assumes 96 GB",
	}),
	hw(ClassCPU, effCPU, Hardware{
		Name: "lpddr5x-8533-128bit", MemoryBytes: 32 * gb, BandwidthBytesPerSec: 8533e6 * 16,
		Source: "a 128-bit LPDDR5X-8533 bus (laptops): 8533 MT/s × 16 B = 136.5 GB/s; memory assumes 32 GB",
	}),
	hw(ClassSRAM, effSRAM, Hardware{
		Name: "groq-lpu", MemoryBytes: 0.23 * gb, BandwidthBytesPerSec: 80 * tbps,
		BF16FLOPS: 188 * tflops, // FP16
		Source:    "Groq LPU figures: on-chip SRAM, many chips per model; efficiencies not calibrated",
	}),
	hw(ClassSRAM, effSRAM, Hardware{
		Name: "cerebras-wse-3", MemoryBytes: 44 * gb, BandwidthBytesPerSec: 21000 * tbps,
		Source: "Cerebras WSE-3 figures: on-chip SRAM; FLOPs not given; efficiencies not calibrated",
	}),
}

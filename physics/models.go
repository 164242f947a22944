package physics

// refModels cites the shared reference models.md, which copies each model's
// config.json (inference-sim model_configs/, GenZ Model_sets, the vendors'
// repositories and model cards).
const refModels = "reference models.md (config.json)"

// Models with TotalParams 0 get it from the architecture (Model.ArchParams);
// the Source says so. A parameter count written with a decimal comes from the
// model card.
var builtinModels = []Model{
	{Name: "llama-3.1-8b", TotalParams: 8.03e9,
		Layers: 32, Hidden: 4096, Heads: 32, KVHeads: 8, HeadDim: 128, Vocab: 128256, MaxContext: 131072, FFN: 14336,
		Source: refModels},
	{Name: "llama-3.1-70b", TotalParams: 70.6e9,
		Layers: 80, Hidden: 8192, Heads: 64, KVHeads: 8, HeadDim: 128, Vocab: 128256, MaxContext: 131072, FFN: 28672,
		Source: refModels},
	{Name: "llama-3.1-405b", TotalParams: 405e9,
		Layers: 126, Hidden: 16384, Heads: 128, KVHeads: 8, HeadDim: 128, Vocab: 128256, MaxContext: 131072, FFN: 53248,
		Source: refModels},
	{Name: "llama-3.2-1b", TotalParams: 1.23e9, TiedEmbeddings: true,
		Layers: 16, Hidden: 2048, Heads: 32, KVHeads: 8, HeadDim: 64, Vocab: 128256, MaxContext: 131072, FFN: 8192,
		Source: refModels},
	{Name: "llama-3.2-3b", TotalParams: 3.21e9, TiedEmbeddings: true,
		Layers: 28, Hidden: 3072, Heads: 24, KVHeads: 8, HeadDim: 128, Vocab: 128256, MaxContext: 131072, FFN: 8192,
		Source: refModels},
	{Name: "qwen2.5-7b", TotalParams: 7.6e9,
		Layers: 28, Hidden: 3584, Heads: 28, KVHeads: 4, HeadDim: 128, Vocab: 152064, MaxContext: 32768, FFN: 18944,
		Source: refModels},
	{Name: "qwen2.5-72b", TotalParams: 72.7e9,
		Layers: 80, Hidden: 8192, Heads: 64, KVHeads: 8, HeadDim: 128, Vocab: 152064, MaxContext: 32768, FFN: 29568,
		Source: refModels},
	{Name: "qwen3-8b", TotalParams: 8.2e9,
		Layers: 36, Hidden: 4096, Heads: 32, KVHeads: 8, HeadDim: 128, Vocab: 151936, MaxContext: 40960, FFN: 12288,
		Source: refModels},
	{Name: "qwen3-32b", TotalParams: 32.8e9,
		Layers: 64, Hidden: 5120, Heads: 64, KVHeads: 8, HeadDim: 128, Vocab: 151936, MaxContext: 40960, FFN: 25600,
		Source: refModels},
	{Name: "qwen3-235b-a22b", TotalParams: 235e9, ActiveParams: 22e9,
		Layers: 94, Hidden: 4096, Heads: 64, KVHeads: 4, HeadDim: 128, Vocab: 151936, MaxContext: 32768,
		Experts: 128, ExpertsPerToken: 8, ExpertFFN: 1536,
		Source: refModels},
	{Name: "mistral-7b", TotalParams: 7.2e9,
		Layers: 32, Hidden: 4096, Heads: 32, KVHeads: 8, HeadDim: 128, Vocab: 32000, MaxContext: 32768, FFN: 14336,
		Source: refModels + ", v0.2"},
	{Name: "mixtral-8x7b", TotalParams: 46.7e9, ActiveParams: 12.9e9,
		Layers: 32, Hidden: 4096, Heads: 32, KVHeads: 8, HeadDim: 128, Vocab: 32000, MaxContext: 32768,
		Experts: 8, ExpertsPerToken: 2, ExpertFFN: 14336,
		Source: refModels},
	{Name: "deepseek-v3", TotalParams: 671e9, ActiveParams: 37e9,
		Layers: 61, Hidden: 7168, Heads: 128, HeadDim: 128, Vocab: 129280, MaxContext: 131072,
		FFN:     18432, // dense FFN of the first 3 layers: intermediate_size in config_671B.json (not in the reference table)
		Experts: 256, ExpertsPerToken: 8, SharedExperts: 1, ExpertFFN: 2048, MoELayers: 58,
		KVLoraRank: 512, QKRopeHeadDim: 64,
		Source: refModels + "; deepseek-ai/DeepSeek-V3 inference/configs/config_671B.json; HeadDim is v_head_dim"},
	{Name: "llama-4-scout", TotalParams: 109e9, ActiveParams: 17e9,
		Layers: 48, Hidden: 5120, Heads: 40, KVHeads: 8, HeadDim: 128, Vocab: 202048, MaxContext: 10 << 20,
		Experts: 16, ExpertsPerToken: 1, SharedExperts: 1,
		ExpertFFN: 8192, // derived: the value that makes the architecture add up to 109B total / 17B active
		Source:    refModels + "; ExpertFFN derived from the parameter counts"},
	{Name: "llama-4-maverick", TotalParams: 400e9, ActiveParams: 17e9,
		Layers: 48, Hidden: 5120, Heads: 40, KVHeads: 8, HeadDim: 128, Vocab: 202048, MaxContext: 1 << 20,
		FFN:     16384, // dense layers; derived: makes the total add up to 400B
		Experts: 128, ExpertsPerToken: 1, SharedExperts: 1, MoELayers: 24,
		ExpertFFN: 8192, // derived: makes the architecture add up to 400B total / 17B active
		Source:    refModels + "; MoE every 2nd layer; FFN and ExpertFFN derived from the parameter counts"},
	{Name: "gpt-oss-120b", TotalParams: 117e9, ActiveParams: 5.1e9,
		Layers: 36, Hidden: 2880, Heads: 64, KVHeads: 8, HeadDim: 64, Vocab: 201088, MaxContext: 131072,
		Experts: 128, ExpertsPerToken: 4,
		ExpertFFN:     2880, // derived: makes the architecture add up to 117B (openai/gpt-oss model.py uses intermediate_size = hidden)
		SlidingWindow: 128, SlidingLayers: 18,
		Source: refModels + "; openai/gpt-oss README; active count excludes the input embedding; MXFP4 experts"},
	{Name: "gpt-oss-20b", TotalParams: 21e9, ActiveParams: 3.6e9,
		Layers: 24, Hidden: 2880, Heads: 64, KVHeads: 8, HeadDim: 64, Vocab: 201088, MaxContext: 131072,
		Experts: 32, ExpertsPerToken: 4, ExpertFFN: 2880, // derived as for gpt-oss-120b
		SlidingWindow: 128, SlidingLayers: 12,
		Source: refModels + "; openai/gpt-oss README"},
	{Name: "gemma-2-9b", TotalParams: 9.2e9, TiedEmbeddings: true,
		Layers: 42, Hidden: 3584, Heads: 16, KVHeads: 8, HeadDim: 256, Vocab: 256000, MaxContext: 8192, FFN: 14336,
		Source: refModels + "; embeddings tied (Gemma config, not in the reference table)"},
	{Name: "gemma-2-27b", TotalParams: 27.2e9, TiedEmbeddings: true,
		Layers: 46, Hidden: 4608, Heads: 32, KVHeads: 16, HeadDim: 128, Vocab: 256000, MaxContext: 8192, FFN: 36864,
		Source: refModels + "; embeddings tied (Gemma config, not in the reference table)"},
	{Name: "gemma-3-27b", TotalParams: 27e9, TiedEmbeddings: true,
		Layers: 62, Hidden: 5376, Heads: 32, KVHeads: 16, HeadDim: 128, Vocab: 262144, MaxContext: 131072, FFN: 21504,
		Source: refModels + "; embeddings tied (Gemma config, not in the reference table)"},

	// Older models named by the measurements (docs/measurements.md) but
	// not in models.md: architectures from their config.json files, parameter
	// counts derived from the architecture. Not in the shared reference:
	// uncertain until checked against the configs.
	{Name: "llama-2-7b",
		Layers: 32, Hidden: 4096, Heads: 32, KVHeads: 32, HeadDim: 128, Vocab: 32000, MaxContext: 4096, FFN: 11008,
		Source: "meta-llama/Llama-2-7b-hf config.json (not in the shared reference); params derived: 6.74B"},
	{Name: "llama-2-13b",
		Layers: 40, Hidden: 5120, Heads: 40, KVHeads: 40, HeadDim: 128, Vocab: 32000, MaxContext: 4096, FFN: 13824,
		Source: "meta-llama/Llama-2-13b-hf config.json (not in the shared reference); params derived: 13.0B"},
	{Name: "llama-2-70b",
		Layers: 80, Hidden: 8192, Heads: 64, KVHeads: 8, HeadDim: 128, Vocab: 32000, MaxContext: 4096, FFN: 28672,
		Source: "meta-llama/Llama-2-70b-hf config.json (not in the shared reference); params derived: 69.0B"},
	{Name: "llama-7b",
		Layers: 32, Hidden: 4096, Heads: 32, KVHeads: 32, HeadDim: 128, Vocab: 32000, MaxContext: 2048, FFN: 11008,
		Source: "LLaMA (v1) 7B, same shape as Llama 2 7B with 2048 context (not in the shared reference); params derived: 6.74B"},
	{Name: "mpt-7b", TiedEmbeddings: true, FFNMatrices: 2,
		Layers: 32, Hidden: 4096, Heads: 32, KVHeads: 32, HeadDim: 128, Vocab: 50432, MaxContext: 2048, FFN: 16384,
		Source: "mosaicml/mpt-7b config.json: d_model 4096, 32 layers, expansion_ratio 4, plain GELU MLP, output head tied to wte (not in the shared reference); params derived: 6.65B"},
}

// modelAliases are other names for catalog models: {alias, model}.
var modelAliases = [][2]string{
	{"deepseek-r1", "deepseek-v3"},
	{"mistral-7b-v0.2", "mistral-7b"},
}

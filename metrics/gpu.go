package metrics

// GPU is what the GPUs' own counters said during a level (bench
// --gpu-telemetry): the memory activity measured beside the MBU the
// physics computes, power, memory, and the energy of the level's output.
type GPU struct {
	// Source names the counters: "dcgm URL" (a DCGM exporter's /metrics)
	// or "nvidia-smi"; MemoryActivitySource the counter memory activity
	// came from (DCGM_FI_PROF_DRAM_ACTIVE, DCGM_FI_DEV_MEM_COPY_UTIL,
	// nvidia-smi's utilization.memory).
	Source               string `json:"source"`
	MemoryActivitySource string `json:"memory_activity_source,omitempty"`
	GPUs                 int    `json:"gpus"`
	Samples              int    `json:"samples"`
	// MemoryActivity and SMActivity are the mean fractions (0–1) of time
	// the memory interface and the SMs were busy, over the level's samples
	// and the GPUs; nil where the counters lack them.
	MemoryActivity *float64 `json:"memory_activity,omitempty"`
	SMActivity     *float64 `json:"sm_activity,omitempty"`
	// PowerWattsP50 and PowerWattsMax are over the samples of all GPUs'
	// power summed; MemoryUsedBytes the most used at once, all GPUs
	// summed; MemClockMHz the mean memory clock.
	PowerWattsP50   float64 `json:"power_w_p50"`
	PowerWattsMax   float64 `json:"power_w_max"`
	MemoryUsedBytes float64 `json:"memory_used_bytes,omitempty"`
	MemClockMHz     float64 `json:"mem_clock_mhz,omitempty"`
	// EnergyJoules is the mean power of each run of the level times its
	// duration, summed over its runs; JoulesPerOutputToken that over the
	// level's output tokens, and OutputTokensPerJoule its inverse.
	EnergyJoules         float64 `json:"energy_j"`
	JoulesPerOutputToken float64 `json:"j_per_output_token,omitempty"`
	OutputTokensPerJoule float64 `json:"output_tokens_per_j,omitempty"`
	// EnergyCostPerMillion is the energy of a million output tokens at
	// EnergyPricePerKWh (bench --energy-price).
	EnergyPricePerKWh    float64 `json:"energy_price_per_kwh,omitempty"`
	EnergyCostPerMillion float64 `json:"energy_cost_per_million_output_tokens,omitempty"`
	// Timeline is the level's first run as the counters saw it, at most
	// MaxGPUTimeline points (consecutive samples averaged when there were
	// more), for report.html's power and memory-activity timeline.
	Timeline []GPUSample `json:"timeline,omitempty"`
}

// MaxGPUTimeline bounds a level's GPU timeline.
const MaxGPUTimeline = 1200

// GPUSample is the counters at one instant of a level: AtMs from the
// start of its run, all GPUs' power summed, and their mean memory
// activity (0–1; nil where the counters lack it).
type GPUSample struct {
	AtMs           float64  `json:"at_ms"`
	PowerWatts     float64  `json:"power_w"`
	MemoryActivity *float64 `json:"memory_activity,omitempty"`
}

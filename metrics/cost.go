package metrics

// Prices turn token counts and GPU time into money. Zero fields are unknown.
type Prices struct {
	InputPerMillion  float64 // currency per million input tokens
	OutputPerMillion float64 // currency per million output tokens
	GPUHour          float64 // currency per GPU-hour
	GPUs             int
}

// Cost is what a level's traffic cost.
type Cost struct {
	// PerMillionOutput is the cost of a million output tokens at this
	// level: API prices include the input that came with them; GPU-hour
	// prices divide the hourly cost of the GPUs by the level's throughput.
	PerMillionOutput float64 `json:"per_million_output_tokens"`
	Basis            string  `json:"basis"` // "token prices" or "gpu-hour"
	// Total is what the level's requests cost.
	Total float64 `json:"total"`
}

// CostOf prices a level; nil when no price is known.
func CostOf(lv *Level, p Prices) *Cost {
	switch {
	case p.InputPerMillion > 0 || p.OutputPerMillion > 0:
		total := (float64(lv.InputTokens)*p.InputPerMillion + float64(lv.OutputTokens)*p.OutputPerMillion) / 1e6
		c := &Cost{Basis: "token prices", Total: total}
		if lv.OutputTokens > 0 {
			c.PerMillionOutput = total / float64(lv.OutputTokens) * 1e6
		}
		return c
	case p.GPUHour > 0:
		gpus := float64(max(p.GPUs, 1))
		c := &Cost{Basis: "gpu-hour", Total: p.GPUHour * gpus * lv.DurationS / 3600}
		if lv.OutputTPS > 0 {
			c.PerMillionOutput = p.GPUHour * gpus / 3600 / lv.OutputTPS * 1e6
		}
		return c
	}
	return nil
}

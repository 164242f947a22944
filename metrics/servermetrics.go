package metrics

// ServerMetrics is what a server's Prometheus /metrics said about one level:
// the means of its latency histograms over the requests it finished between
// a scrape before the level (after warm-up) and one after it, from the
// differences of each histogram's _sum and _count. Means are per request
// except TPOT where only a per-token series exists (see TPOTSeries). A
// field is 0 when the server does not export that series.
type ServerMetrics struct {
	// Requests is how many requests the server's E2E (else TTFT) histogram
	// counted over the level: the level's completed requests, unless
	// someone else used the server meanwhile.
	Requests int `json:"requests"`
	// Engine names whose series these are: vllm (and tokbench's
	// simulator), sglang, tgi or llamacpp.
	Engine        string  `json:"engine,omitempty"`
	TTFTMsMean    float64 `json:"ttft_ms_mean,omitempty"`
	TPOTMsMean    float64 `json:"tpot_ms_mean,omitempty"`
	E2EMsMean     float64 `json:"e2e_ms_mean,omitempty"`
	QueueMsMean   float64 `json:"queue_ms_mean,omitempty"`
	PrefillMsMean float64 `json:"prefill_ms_mean,omitempty"`
	DecodeMsMean  float64 `json:"decode_ms_mean,omitempty"`
	// TPOTSeries names the histogram TPOT came from: a per-request one
	// (vllm:request_time_per_output_token_seconds) or a per-token one.
	TPOTSeries string `json:"tpot_series,omitempty"`
	// The server's own percentiles, from its histograms' bucket deltas
	// (interpolated within a bucket, as Prometheus's histogram_quantile).
	TTFTMsP50 float64 `json:"ttft_ms_p50,omitempty"`
	TTFTMsP99 float64 `json:"ttft_ms_p99,omitempty"`
	E2EMsP50  float64 `json:"e2e_ms_p50,omitempty"`
	E2EMsP99  float64 `json:"e2e_ms_p99,omitempty"`
	// llama.cpp exports no latency histograms, only counters: the prompt
	// and generated tokens it processed over the level, and its rates
	// (tokens over the seconds its slots spent, summed over slots).
	PromptTokens             int     `json:"prompt_tokens,omitempty"`
	PredictedTokens          int     `json:"predicted_tokens,omitempty"`
	PromptTokensPerSecond    float64 `json:"prompt_tokens_per_second,omitempty"`
	PredictedTokensPerSecond float64 `json:"predicted_tokens_per_second,omitempty"`
	// ClientMinus is the client's mean minus the server's, for each mean
	// both have: what the network, proxies and the client added.
	ClientMinus *ServerMeans `json:"client_minus_server,omitempty"`
}

// ServerMeans are differences of means in milliseconds.
type ServerMeans struct {
	TTFTMs float64 `json:"ttft_ms_mean"`
	TPOTMs float64 `json:"tpot_ms_mean"`
	E2EMs  float64 `json:"e2e_ms_mean"`
}

// SetServerMetrics records sm on the level with the client's means minus
// the server's.
func (lv *Level) SetServerMetrics(sm ServerMetrics) {
	gap := &ServerMeans{}
	if sm.TTFTMsMean > 0 && lv.TTFT.Count > 0 {
		gap.TTFTMs = lv.TTFT.Mean - sm.TTFTMsMean
	}
	if sm.TPOTMsMean > 0 && lv.TPOT.Count > 0 {
		gap.TPOTMs = lv.TPOT.Mean - sm.TPOTMsMean
	}
	if sm.E2EMsMean > 0 && lv.E2E.Count > 0 {
		gap.E2EMs = lv.E2E.Mean - sm.E2EMsMean
	}
	if *gap != (ServerMeans{}) {
		sm.ClientMinus = gap
	}
	lv.ServerMetrics = &sm
}

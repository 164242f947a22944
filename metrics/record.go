package metrics

import (
	"math"
	"sort"
	"time"
)

// LateSendMs is how late after its scheduled instant a send must go out
// to count as a late send (LateMs).
const LateSendMs = 1

// LateMs is the client's lateness in sending an open-loop request: its
// queue less its own connection set-up, which is in QueueMs (t0 is on an
// open connection) and in the latency from the scheduled instant, but is
// no late send.
func (r *Record) LateMs() float64 {
	late := r.QueueMs
	if p := r.Phases; p != nil {
		late -= p.ConnWaitMs
	}
	return late
}

// Token sources: where a record's output token count came from.
const (
	SourceUsage     = "usage"     // the server's usage report
	SourceTokenizer = "tokenizer" // an exact local tokenizer count of the streamed text
	SourceMixed     = "mixed"     // a level whose records used both
)

// Record is everything measured about one request. Times are milliseconds
// from t0, the instant the request's bytes were handed to the kernel on an
// open connection (with --connections cold: the instant the request was
// handed to the client, before any set-up), all taken from one monotonic
// clock. A failed request (OK false) keeps what it
// measured but never enters latency statistics.
type Record struct {
	ID    int `json:"id"`
	Level int `json:"level"`
	// Load is the level's load, so a run can be summarized again from
	// requests.jsonl alone (after a crash, or when merging shards).
	Load Load `json:"load"`
	// Chain and Step (both from 1) place a call inside an agent chain.
	Chain int `json:"chain,omitempty"`
	Step  int `json:"step,omitempty"`
	// Start is the wall-clock instant of t0, for humans and for aligning
	// records of several processes.
	Start time.Time `json:"start"`
	// OffsetMs is t0 relative to the start of the level (monotonic).
	OffsetMs float64 `json:"offset_ms"`
	// QueueMs is actual send minus scheduled send (open-loop load); TTFT and
	// E2E measured from the scheduled instant are these plus QueueMs.
	QueueMs float64 `json:"queue_ms,omitempty"`

	// ResponseID is the server's id of the response, for its logs.
	ResponseID string `json:"response_id,omitempty"`
	OK         bool   `json:"ok"`
	// Retries counts earlier attempts of this request that failed with
	// RetryErrors; RetryWaitMs is the time from the first attempt to this one.
	Retries      int      `json:"retries,omitempty"`
	RetryErrors  []string `json:"retry_errors,omitempty"`
	RetryWaitMs  float64  `json:"retry_wait_ms,omitempty"`
	ErrorClass   string   `json:"error_class,omitempty"`
	Error        string   `json:"error,omitempty"`
	HTTPStatus   int      `json:"http_status,omitempty"`
	FinishReason string   `json:"finish_reason,omitempty"`

	TTFTMs  float64 `json:"ttft_ms"`
	TTFVTMs float64 `json:"ttfvt_ms"`
	// E2EMs is the last token-carrying chunk minus t0.
	E2EMs float64 `json:"e2e_ms"`
	// DoneMs is when the response ended (after usage and [DONE]).
	DoneMs float64 `json:"done_ms"`

	InputTokens           int    `json:"input_tokens"`
	InputTokensRequested  int    `json:"input_tokens_requested,omitempty"`
	OutputTokens          int    `json:"output_tokens"`
	OutputTokensRequested int    `json:"output_tokens_requested,omitempty"`
	ReasoningTokens       int    `json:"reasoning_tokens,omitempty"`
	TokenSource           string `json:"token_source,omitempty"`

	// ChunkMs[i] is the arrival of the i-th token-carrying chunk and
	// ChunkTokens[i] the output tokens it carried (summing to OutputTokens).
	ChunkMs     []float64 `json:"chunk_ms,omitempty"`
	ChunkTokens []int     `json:"chunk_tokens,omitempty"`

	// Server-reported timing, where the server gives it.
	Server *ServerTiming `json:"server,omitempty"`
	// CachedTokens are the prompt tokens the server served from its prefix
	// cache, when it said (CacheReported): usage's cached_tokens (OpenAI,
	// vLLM, SGLang), cache_read_input_tokens (Anthropic), llama.cpp's
	// timings.
	CachedTokens  int  `json:"cached_tokens,omitempty"`
	CacheReported bool `json:"cache_reported,omitempty"`
	// Phases are the request's way to the server: connection, write,
	// first byte (nil in records written before tokbench kept them).
	Phases *Phases `json:"phases,omitempty"`

	// EmbedInputs, for an embeddings request, are the texts it embedded
	// and EmbedDims the answer's vector dimension; its latency is DoneMs
	// (no token stream: no TTFT, E2E or chunks).
	EmbedInputs int `json:"embed_inputs,omitempty"`
	EmbedDims   int `json:"embed_dims,omitempty"`
	// ToolsSent are the tool definitions the request carried and
	// ToolTokens their local token count; ToolCalled says the answer
	// called one, ToolCallMs when its first tool-call delta arrived (from
	// t0) and ToolArgTokens the arguments' tokens (by the local tokenizer).
	ToolsSent     int     `json:"tools_sent,omitempty"`
	ToolTokens    int     `json:"tool_tokens,omitempty"`
	ToolCalled    bool    `json:"tool_called,omitempty"`
	ToolCallMs    float64 `json:"tool_call_ms,omitempty"`
	ToolArgTokens int     `json:"tool_arg_tokens,omitempty"`

	// Model and API are the request's, where a record is not one of a
	// planned level's (tokbench proxy: live traffic of many).
	Model string `json:"model,omitempty"`
	API   string `json:"api,omitempty"`
	// Proxy is the client's side of a request tokbench proxy carried.
	Proxy *ProxyTiming `json:"proxy,omitempty"`
	// Media are the request's images and sounds, when it sent any.
	Media *MediaRecord `json:"media,omitempty"`
}

// ProxyTiming is what a proxied request's client got. ClientTTFTMs and
// ClientE2EMs run from the request's arrival at the proxy to the end of
// the write that gave the client its first and last token;
// ClientDecodeTPS is DecodeTPS over the same writes (the record's TTFT
// and decode rate are the upstream's). MaxHeldMs is the longest the proxy
// held one read of the answer, from its arrival to the end of its write
// to the client; MaxWriteMs the longest one write blocked, and SlowClient
// whether that was long enough to call the client slow (its reads then
// held back the upstream's). ClientError is how the connection to the
// client failed. UsageAdded says the proxy asked the server for usage
// (stream_options.include_usage) and kept the usage chunk from the client.
// NotStreamed marks a request that asked for the answer whole: its one
// chunk is the answer's last byte, so its TTFT is its E2E.
type ProxyTiming struct {
	ClientTTFTMs    float64 `json:"client_ttft_ms,omitempty"`
	ClientE2EMs     float64 `json:"client_e2e_ms,omitempty"`
	ClientDecodeTPS float64 `json:"client_decode_tps,omitempty"`
	MaxHeldMs       float64 `json:"max_held_ms"`
	MaxWriteMs      float64 `json:"max_write_ms"`
	SlowClient      bool    `json:"slow_client,omitempty"`
	ClientError     string  `json:"client_error,omitempty"`
	UsageAdded      bool    `json:"usage_added,omitempty"`
	NotStreamed     bool    `json:"not_streamed,omitempty"`
}

// ServerTiming is what the server itself says about a request: PromptMs is
// its prefill (prompt evaluation) time, PredictedMs its decode time for
// PredictedTokens, LoadMs the time it spent loading the model first
// (Ollama), all in milliseconds as the server measured them.
type ServerTiming struct {
	PromptMs    float64 `json:"prompt_ms,omitempty"`
	PredictedMs float64 `json:"predicted_ms,omitempty"`
	DecodeTPS   float64 `json:"decode_tps,omitempty"`
	PrefillTPS  float64 `json:"prefill_tps,omitempty"`
	LoadMs      float64 `json:"load_ms,omitempty"`
	// PromptTokens and PredictedTokens are the counts the timings cover:
	// llama.cpp's prompt_n counts only the prompt tokens it evaluated, not
	// those it took from its cache (CachedTokens, its cache_n).
	PromptTokens    int  `json:"prompt_tokens,omitempty"`
	PredictedTokens int  `json:"predicted_tokens,omitempty"`
	CachedTokens    *int `json:"cached_tokens,omitempty"`
	// EvaluatedOnly says PromptTokens counts only the prompt tokens the
	// server evaluated for this request (llama.cpp's timings), so the rest
	// of the prompt came from its cache.
	EvaluatedOnly bool `json:"-"`
	// FirstTokenMs and LastTokenMs are the server's own instants of its
	// first and last token-carrying chunks (Ollama's created_at), less
	// t0, on the server's wall clock against the client's: on one machine
	// (loopback) the client's ChunkMs less them is each chunk's way from
	// the server's stamp to the client's read; across machines they carry
	// the clocks' offset too.
	FirstTokenMs float64 `json:"first_token_ms,omitempty"`
	LastTokenMs  float64 `json:"last_token_ms,omitempty"`
}

// AlignedDecodeTPS is the server's decode rate counted as tokbench counts
// its own: the tokens after the first over the time after it. Servers
// (llama.cpp's predicted_per_second, Ollama's eval_count/eval_duration)
// count every token over their decode time, which starts at the first
// token: (PredictedTokens − 1) / PredictedMs lines the two up. False when
// the server gave no token count.
func (s *ServerTiming) AlignedDecodeTPS() (float64, bool) {
	if s == nil || s.PredictedTokens < 2 || s.PredictedMs <= 0 {
		return 0, false
	}
	return float64(s.PredictedTokens-1) / (s.PredictedMs / 1000), true
}

// TTFTMs is the server's own share of the time to first token: model load
// plus prefill. 0 when the server did not report its prefill time.
func (s *ServerTiming) TTFTMs() float64 {
	if s == nil || s.PromptMs <= 0 {
		return 0
	}
	return s.LoadMs + s.PromptMs
}

// DecodeTPS is (output tokens − 1) / (t_last − t_first) in tokens per
// second, and whether it is defined (it needs two distinct chunk instants and
// at least two tokens).
func (r *Record) DecodeTPS() (float64, bool) {
	if len(r.ChunkMs) < 2 || r.OutputTokens < 2 {
		return 0, false
	}
	span := r.ChunkMs[len(r.ChunkMs)-1] - r.ChunkMs[0]
	if span <= 0 {
		return 0, false
	}
	return float64(r.OutputTokens-1) / (span / 1000), true
}

// TPOTMs is 1 / decode TPS in milliseconds.
func (r *Record) TPOTMs() (float64, bool) {
	tps, ok := r.DecodeTPS()
	if !ok {
		return 0, false
	}
	return 1000 / tps, true
}

// E2ETPS is output tokens / E2E latency.
func (r *Record) E2ETPS() (float64, bool) {
	if r.E2EMs <= 0 || r.OutputTokens == 0 {
		return 0, false
	}
	return float64(r.OutputTokens) / (r.E2EMs / 1000), true
}

// AppendITL appends the per-token inter-token latencies of r to dst: the gap
// before a chunk that carries k tokens counts as k gaps of gap/k. Tokens of
// the first chunk have no gap before them.
func (r *Record) AppendITL(dst []float64) []float64 {
	for i := 1; i < len(r.ChunkMs); i++ {
		k := r.ChunkTokens[i]
		if k <= 0 {
			continue
		}
		g := (r.ChunkMs[i] - r.ChunkMs[i-1]) / float64(k)
		for j := 0; j < k; j++ {
			dst = append(dst, g)
		}
	}
	return dst
}

// AppendChunkGaps appends the raw gaps between consecutive token chunks.
func (r *Record) AppendChunkGaps(dst []float64) []float64 {
	for i := 1; i < len(r.ChunkMs); i++ {
		dst = append(dst, r.ChunkMs[i]-r.ChunkMs[i-1])
	}
	return dst
}

// AssignTokens spreads total output tokens over chunks. estimate[i] is a
// local count of the i-th chunk's text (chunk boundaries can split tokens, so
// these need not add up to total); the result sums to total exactly, keeps
// every chunk at one token or more when total allows, and follows the
// estimates' proportions for the rest (largest remainder).
func AssignTokens(estimate []int, total int) []int {
	n := len(estimate)
	out := make([]int, n)
	if n == 0 || total <= 0 {
		return out
	}
	sum := 0
	for _, e := range estimate {
		sum += e
	}
	if sum == total {
		copy(out, estimate)
		return out
	}
	base := 0
	weights := make([]float64, n)
	if total >= n {
		base = 1
		var wsum float64
		for i, e := range estimate {
			if e > 1 {
				weights[i] = float64(e - 1)
				wsum += weights[i]
			}
		}
		if wsum == 0 {
			for i := range weights {
				weights[i] = 1
			}
		}
	} else {
		for i, e := range estimate {
			weights[i] = float64(max(e, 1))
		}
	}
	for i := range out {
		out[i] = base
	}
	largestRemainder(out, weights, total-base*n)
	return out
}

// largestRemainder adds extra units to out in proportion to weights.
func largestRemainder(out []int, weights []float64, extra int) {
	if extra <= 0 {
		return
	}
	var wsum float64
	for _, w := range weights {
		wsum += w
	}
	type rem struct {
		i int
		r float64
	}
	rems := make([]rem, len(out))
	given := 0
	for i, w := range weights {
		share := float64(extra) * w / wsum
		fl := math.Floor(share)
		out[i] += int(fl)
		given += int(fl)
		rems[i] = rem{i, share - fl}
	}
	sort.SliceStable(rems, func(a, b int) bool { return rems[a].r > rems[b].r })
	for j := 0; given < extra; j++ {
		out[rems[j%len(rems)].i]++
		given++
	}
}

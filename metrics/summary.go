package metrics

import (
	"fmt"
)

// Schema names the summary.json format.
const Schema = "tokbench.summary/v1"

// Mode is how a level makes its load.
type Mode string

// Modes.
const (
	// ModeConcurrency is a closed loop: a fixed number of users, each
	// sending its next request when the last one ended.
	ModeConcurrency Mode = "concurrency"
	// ModeRate is an open loop: requests sent on a schedule of arrivals.
	ModeRate Mode = "rate"
	// ModeLive is live traffic tokbench proxy measured: the load is
	// whatever the applications sent.
	ModeLive Mode = "live"
)

// Arrival is an open loop's arrival process.
type Arrival string

// Arrival processes.
const (
	ArrivalConstant Arrival = "constant" // evenly spaced
	ArrivalPoisson  Arrival = "poisson"  // exponential gaps
	ArrivalGamma    Arrival = "gamma"    // gamma gaps of a given shape (burstiness)
	ArrivalTrace    Arrival = "trace"    // a replayed trace's instants (RateRPS is its mean rate)
)

// Load describes one load level.
type Load struct {
	Mode        Mode    `json:"mode"`
	Concurrency int     `json:"concurrency,omitempty"`
	RateRPS     float64 `json:"rate_rps,omitempty"`
	Arrival     Arrival `json:"arrival,omitempty"`
	// InputTokens is the prompt length of the level when input length is
	// a sweep dimension (--input-tokens 1k,8k,32k); 0 otherwise.
	InputTokens int `json:"input_tokens,omitempty"`
	// TraceSpeed is a replayed trace's speed-up (Arrival trace; RateRPS is
	// then its mean rate at that speed).
	TraceSpeed float64 `json:"trace_speed,omitempty"`
}

// String is a short label: "c=8" or "5 req/s poisson".
func (l Load) String() string {
	s := fmt.Sprintf("c=%d", l.Concurrency)
	if l.Mode == ModeLive {
		return "live"
	}
	if l.Mode == ModeRate {
		s = fmt.Sprintf("%g req/s %s", l.RateRPS, l.Arrival)
	}
	if l.Arrival == ArrivalTrace {
		s = fmt.Sprintf("trace ×%g (%.3g req/s)", l.TraceSpeed, l.RateRPS)
	}
	if l.InputTokens > 0 {
		s += fmt.Sprintf(" in=%d", l.InputTokens)
	}
	return s
}

// TurnStats are the completed requests of one turn (from 1) of a level's
// conversations: their prompts' tokens, TTFT and decode rate.
type TurnStats struct {
	Turn        int   `json:"turn"`
	Completed   int   `json:"completed"`
	InputTokens Stats `json:"input_tokens"`
	TTFT        Stats `json:"ttft_ms"`
	DecodeTPS   Stats `json:"decode_tps"`
}

// Requests counts a level's requests; Errors is keyed by error class.
// Sent is Completed + Failed + Interrupted.
type Requests struct {
	Sent      int `json:"sent"`
	Completed int `json:"completed"`
	Failed    int `json:"failed"`
	// Interrupted are the streams the client cut (class "interrupted":
	// Ctrl-C's grace ran out while they streamed): neither completed nor
	// the server's failures, so they are in neither count, nor in Errors
	// or the error rate.
	Interrupted int            `json:"interrupted,omitempty"`
	Errors      map[string]int `json:"errors"`
	// ErrorSamples holds, per error class, the message of its first
	// failure (the status line and the server's words for HTTP errors).
	ErrorSamples map[string]string `json:"error_samples,omitempty"`
}

// ClassInterrupted is the error class of a stream the client cut
// (api.ClassInterrupted).
const ClassInterrupted = "interrupted"

// Shortfall compares the output length asked for with what came back.
type Shortfall struct {
	RequestedTokens int `json:"requested_tokens"`
	ReceivedTokens  int `json:"received_tokens"`
	// ShortRequests counts completed requests that returned fewer tokens
	// than they asked for.
	ShortRequests int `json:"short_requests"`
	// LongRequests counts completed requests that returned more tokens than
	// they asked for: the server ignored max_tokens.
	LongRequests int `json:"long_requests,omitempty"`
}

// Level is the summary of one load level, in the summary.json shape.
type Level struct {
	Load      Load     `json:"load"`
	Requests  Requests `json:"requests"`
	DurationS float64  `json:"duration_s"`

	InputTokens  int `json:"input_tokens"`
	OutputTokens int `json:"output_tokens"`
	// InputTokensRequested is the prompt length the workload intended,
	// summed over completed requests; InputTokens minus it, per request, is
	// TemplateTokensPerRequest: what the chat template (role markers, BOS)
	// added when the server reported prompt_tokens. That holds when the
	// prompts were counted with the model's own tokenizer; counted with
	// another (cl100k_base against a Llama), the difference is the
	// template and the two tokenizers' disagreement together, and it is
	// ExtraPromptTokensPerRequest instead (see NotCountedByModel).
	InputTokensRequested        int     `json:"input_tokens_requested,omitempty"`
	TemplateTokensPerRequest    float64 `json:"template_tokens_per_request,omitempty"`
	ExtraPromptTokensPerRequest float64 `json:"extra_prompt_tokens_per_request,omitempty"`
	// ReasoningTokens are the output tokens spent reasoning (part of
	// OutputTokens), from usage details or the reasoning deltas.
	ReasoningTokens int    `json:"reasoning_tokens,omitempty"`
	TokenSource     string `json:"token_source"`

	OutputTPS float64 `json:"output_tps"`
	// SteadyOutputTPS is the aggregate rate between ramp-up (every
	// user streaming) and drain (the last request sent); 0 when the level is
	// too short to have such a window.
	SteadyOutputTPS float64 `json:"steady_output_tps"`
	RequestRPS      float64 `json:"request_rps"`
	GoodputRPS      float64 `json:"goodput_rps"`
	ErrorRate       float64 `json:"error_rate"`

	TTFT           Stats `json:"ttft_ms"`
	TTFVT          Stats `json:"ttfvt_ms"`
	DecodeTPS      Stats `json:"decode_tps"`
	TPOT           Stats `json:"tpot_ms"`
	ITL            Stats `json:"itl_ms"`
	E2E            Stats `json:"e2e_ms"`
	E2ETPS         Stats `json:"e2e_tps"`
	ChunkGap       Stats `json:"chunk_gap_ms"`
	TokensPerChunk Stats `json:"tokens_per_chunk"`
	// QueueMs, TTFTSched and E2ESched are set for open-loop levels: client
	// queue delay and latencies from the scheduled send instant.
	QueueMs   *Stats `json:"queue_ms,omitempty"`
	TTFTSched *Stats `json:"ttft_from_scheduled_ms,omitempty"`
	E2ESched  *Stats `json:"e2e_from_scheduled_ms,omitempty"`
	ServerTPS *Stats `json:"server_decode_tps,omitempty"`
	// ServerAlignedTPS is the server's decode rate counted as tokbench
	// counts its own (the tokens after the first over the time after it).
	ServerAlignedTPS *Stats `json:"server_decode_tps_aligned,omitempty"`
	// ServerPrefillMs and ServerTTFTMs (load + prefill) are the server's own
	// timing; ClientMinusServer is what the client measured beyond it.
	ServerPrefillMs   *Stats     `json:"server_prefill_ms,omitempty"`
	ServerTTFTMs      *Stats     `json:"server_ttft_ms,omitempty"`
	ClientMinusServer *ServerGap `json:"client_minus_server,omitempty"`
	// ServerMetrics are the means the server's own /metrics histograms
	// moved by over the level (bench --server-metrics).
	ServerMetrics *ServerMetrics `json:"server_metrics,omitempty"`
	// ChainMs is the wall-clock of complete agent chains, first call's t0 to
	// the last call's end, think time included.
	ChainMs *Stats `json:"chain_ms,omitempty"`
	// ChainKind is ChainConversation when the chains are a chat's
	// conversations, empty for agent chains.
	ChainKind string `json:"chain_kind,omitempty"`
	// Media are the level's images and sounds and what they cost, when
	// its requests sent any.
	Media *MediaStats `json:"media,omitempty"`
	// Notes are what the report says of the level beside its figures:
	// facts to read them by, not warnings.
	Notes []string `json:"notes,omitempty"`
	// Turns are a conversation level's figures turn by turn (an agent
	// chain's step by step): a chat's prompt grows with every turn, and
	// turn 1 against turn N is what its users feel.
	Turns []TurnStats `json:"turns,omitempty"`
	// Precision, on a level too long to hold every value, says which
	// percentiles are a sketch's and how close they are.
	Precision *Precision `json:"precision,omitempty"`
	// Windows are the level's periodic summaries (bench --summary-every),
	// in order.
	Windows []Window `json:"windows,omitempty"`
	// LateSends counts open-loop requests sent more than 1 ms after their
	// scheduled instant (the client was busy or the in-flight cap was hit).
	LateSends int `json:"late_sends,omitempty"`
	// Pacer is how an open-loop level's sends were paced.
	Pacer *Pacer `json:"pacer,omitempty"`
	// StartSpreadMs is the time a closed loop's user starts were spread
	// over when tokbench chose it (one request's expected duration);
	// Lockstep is true when they started together, so the first requests
	// ran as one burst.
	StartSpreadMs float64 `json:"start_spread_ms,omitempty"`
	Lockstep      bool    `json:"lockstep,omitempty"`
	// Retries counts retried attempts (each request is counted once).
	Retries int `json:"retries,omitempty"`
	// Aborted says why the level stopped early (--max-error-rate).
	Aborted   string    `json:"aborted,omitempty"`
	Shortfall Shortfall `json:"output_shortfall"`
	Physics   *Physics  `json:"physics,omitempty"`
	// GPU is what the GPUs' counters said during the level.
	GPU     *GPU       `json:"gpu,omitempty"`
	SLO     *SLOResult `json:"slo,omitempty"`
	Repeats *Repeats   `json:"repeats,omitempty"`
	Cost    *Cost      `json:"cost,omitempty"`
	// PromptCache is how much of the prompts the server took from its
	// prefix cache, where it said or its timing shows.
	PromptCache *PromptCache `json:"prompt_cache,omitempty"`
	// Embeddings are an embeddings level's figures (inputs and tokens
	// embedded per second, latency); ToolCalls a level's tool calling.
	Embeddings *Embeddings `json:"embeddings,omitempty"`
	ToolCalls  *ToolCalls  `json:"tool_calls,omitempty"`
	// Connections are the level's connections and the requests' phases
	// (connection wait, set-up, write, first byte).
	Connections *Connections `json:"connections,omitempty"`
	// Client is the client's self-check during the level (CPU, GC pauses,
	// scheduling lag); a warning says when it may have distorted the level.
	Client   *ClientHealth `json:"client,omitempty"`
	Warnings []string      `json:"warnings,omitempty"`
}

// Physics relates a level's decode speed to what the hardware allows; set
// when the deployment (model, precision, hardware, GPUs) is known.
type Physics struct {
	Deployment    string `json:"deployment"` // e.g. "llama-3.1-8b bf16 on 1× h100-sxm"
	ContextTokens int    `json:"context_tokens"`
	// BytesPerToken is read per decoded token by a single stream.
	BytesPerToken float64 `json:"bytes_per_token"`
	// DecodeTPSCeiling is the single-stream limit: peak bandwidth over
	// bytes per token.
	DecodeTPSCeiling float64 `json:"decode_tps_ceiling"`
	// MBU is the bandwidth utilisation implied by the level's decode TPS
	// p50 with Batch streams decoding together: the level's concurrency,
	// or the server's slots when it has fewer (the rest wait, reading
	// nothing).
	MBU   float64 `json:"mbu"`
	Batch int     `json:"batch,omitempty"`
	// CeilingFraction is decode TPS p50 over the single-stream ceiling.
	CeilingFraction float64 `json:"ceiling_fraction"`
	// WeightBytes are read once per decode step, KVBytesPerToken per token
	// of context; BandwidthBytesPerSec is the peak they are read at and
	// KVCapacityTokens the KV cache that fits: what tokbench calibrate fits
	// a simulator to.
	WeightBytes          float64 `json:"weight_bytes,omitempty"`
	KVBytesPerToken      float64 `json:"kv_bytes_per_token,omitempty"`
	BandwidthBytesPerSec float64 `json:"bandwidth_bytes_per_sec,omitempty"`
	KVCapacityTokens     int     `json:"kv_capacity_tokens,omitempty"`
	// Source says where the bytes per token and the bandwidth came from;
	// Note explains an MBU above 100% (or flags it as impossible).
	Source string `json:"source,omitempty"`
	Note   string `json:"note,omitempty"`
	// Doubt, when set, says why the ceiling and MBU may be wrong (a
	// bandwidth measured on a busy machine reads low: ceilings low, MBUs
	// high).
	Doubt string `json:"doubt,omitempty"`
}

// Summary is the whole of summary.json.
type Summary struct {
	Schema      string  `json:"schema"`
	Target      Target  `json:"target"`
	Interrupted bool    `json:"interrupted"`
	Levels      []Level `json:"levels"`
	// SLOs in force, the highest load meeting all of them, and the knee.
	SLOs     []string  `json:"slos,omitempty"`
	Capacity *Capacity `json:"capacity,omitempty"`
	Knee     *Knee     `json:"knee,omitempty"`
	// Context is a context-length sweep's effect at one load.
	Context *ContextEffect `json:"context_effect,omitempty"`
	// MediaCost is what a request's media add to TTFT at idle.
	MediaCost *MediaCost `json:"media_cost,omitempty"`
	Profile   string     `json:"profile,omitempty"`
	Warnings  []string   `json:"warnings,omitempty"`
}

// Target is what was measured. URL never carries credentials.
type Target struct {
	URL       string `json:"url"`
	API       string `json:"api"`
	Model     string `json:"model"`
	Simulated bool   `json:"simulated"`
	// ServedModel is the model the server lists when it lists one and
	// Model is not it (llama.cpp answers any name with its one model).
	ServedModel string `json:"served_model,omitempty"`
}

// ModelDesc is the model as a report names it: Model, and the served
// one beside it when they differ.
func (t Target) ModelDesc() string {
	if t.ServedModel != "" && t.ServedModel != t.Model {
		return fmt.Sprintf("%s (served: %s)", t.Model, t.ServedModel)
	}
	return t.Model
}

// NotCountedByModel says the level's prompts were counted with a tokenizer
// other than the model's: what the server counted beyond them per request
// is not the chat template's alone.
func (lv *Level) NotCountedByModel() {
	if lv.TemplateTokensPerRequest != 0 {
		lv.ExtraPromptTokensPerRequest, lv.TemplateTokensPerRequest = lv.TemplateTokensPerRequest, 0
	}
}

// Pacer is how an open-loop level met its send instants: the pacer sleeps
// until shortly before each instant, waking early by the lateness it
// measured of its own wake-ups (LearnedLeadMs), at most a quarter of the
// time between instants (LeadMs), and the send waits the rest awake, so
// that the machine's late wake-ups do not make late sends.
type Pacer struct {
	// LeadMs is how early before its instant the pacer aimed to wake, the
	// median over the level's sleeps; LearnedLeadMs the lead it had
	// learned by the level's end, before the quarter-gap cap (at high
	// rates LeadMs is the cap). WakeLateMs is the lateness of its
	// wake-ups against their aim (the instant less the lead), which the
	// lead covers.
	LeadMs        float64 `json:"lead_ms"`
	LearnedLeadMs float64 `json:"lead_learned_ms"`
	WakeLateMs    *Stats  `json:"wake_late_ms,omitempty"`
	// CPUSeconds is the time the pacer and the sends waited awake before
	// instants, and CPUShare that over the level's send span: its cost in
	// one core.
	CPUSeconds float64 `json:"cpu_seconds"`
	CPUShare   float64 `json:"cpu_share"`
	// SpareOpened counts the connections opened ahead of the sends that
	// needed them, while the level ran; Connections.Opened those a send
	// still had to open itself.
	SpareOpened int64 `json:"spare_opened"`
	// LateBy counts the level's late sends (LateSends) by the step of
	// their way to the wire that added most to their lateness.
	LateBy *LateBy `json:"late_by,omitempty"`
}

// LateBy counts late sends by cause: the pacer woke after the instant
// (Wake); the send's goroutine began late, or waited for --max-in-flight
// (Start); its last wait, awake, ended late because its thread lost the
// processor (Wait); or the write itself took the time (Write).
type LateBy struct {
	Wake  int `json:"wake"`
	Start int `json:"start"`
	Wait  int `json:"wait"`
	Write int `json:"write"`
}

// String names the counts, for a warning.
func (b LateBy) String() string {
	return fmt.Sprintf("the pacer woke late %d, the send began late %d, its wait ended late %d, the write was slow %d", b.Wake, b.Start, b.Wait, b.Write)
}

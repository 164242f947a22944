package metrics

import (
	"fmt"
	"sort"
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
)

// Arrival is an open loop's arrival process.
type Arrival string

// Arrival processes.
const (
	ArrivalConstant Arrival = "constant" // evenly spaced
	ArrivalPoisson  Arrival = "poisson"  // exponential gaps
	ArrivalGamma    Arrival = "gamma"    // gamma gaps of a given shape (burstiness)
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
}

// String is a short label: "c=8" or "5 req/s poisson".
func (l Load) String() string {
	s := fmt.Sprintf("c=%d", l.Concurrency)
	if l.Mode == ModeRate {
		s = fmt.Sprintf("%g req/s %s", l.RateRPS, l.Arrival)
	}
	if l.InputTokens > 0 {
		s += fmt.Sprintf(" in=%d", l.InputTokens)
	}
	return s
}

// Requests counts a level's requests; Errors is keyed by error class.
type Requests struct {
	Sent      int            `json:"sent"`
	Completed int            `json:"completed"`
	Failed    int            `json:"failed"`
	Errors    map[string]int `json:"errors"`
	// ErrorSamples holds, per error class, the message of its first
	// failure (the status line and the server's words for HTTP errors).
	ErrorSamples map[string]string `json:"error_samples,omitempty"`
}

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
	// LateSends counts open-loop requests sent more than 1 ms after their
	// scheduled instant (the client was busy or the in-flight cap was hit).
	LateSends int `json:"late_sends,omitempty"`
	// StartSpreadMs is the time a closed loop's user starts were spread
	// over when tokbench chose it (one request's expected duration);
	// Lockstep is true when they started together, so the first requests
	// ran as one burst.
	StartSpreadMs float64 `json:"start_spread_ms,omitempty"`
	Lockstep      bool    `json:"lockstep,omitempty"`
	// Retries counts retried attempts (each request is counted once).
	Retries int `json:"retries,omitempty"`
	// Aborted says why the level stopped early (--max-error-rate).
	Aborted   string     `json:"aborted,omitempty"`
	Shortfall Shortfall  `json:"output_shortfall"`
	Physics   *Physics   `json:"physics,omitempty"`
	SLO       *SLOResult `json:"slo,omitempty"`
	Repeats   *Repeats   `json:"repeats,omitempty"`
	Cost      *Cost      `json:"cost,omitempty"`
	// PromptCache is how much of the prompts the server took from its
	// prefix cache, where it said or its timing shows.
	PromptCache *PromptCache `json:"prompt_cache,omitempty"`
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
	// p50 with Concurrency streams decoding together.
	MBU float64 `json:"mbu"`
	// CeilingFraction is decode TPS p50 over the single-stream ceiling.
	CeilingFraction float64 `json:"ceiling_fraction"`
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
	Profile  string    `json:"profile,omitempty"`
	Warnings []string  `json:"warnings,omitempty"`
}

// Target is what was measured. URL never carries credentials.
type Target struct {
	URL       string `json:"url"`
	API       string `json:"api"`
	Model     string `json:"model"`
	Simulated bool   `json:"simulated"`
}

// Summarize folds the records of one level into its summary. durationS is
// the level's wall time; when it is 0 or less it is taken from the records
// (level start to the end of the last response).
//
// It is one pass over the records that gathers every distribution at once,
// so each statistic counts the same requests; split, the dozen samples it
// collects would travel between the parts.
func Summarize(load Load, recs []Record, durationS float64) Level {
	lv := Level{Load: load, Requests: Requests{Errors: map[string]int{}}}
	var ttft, ttfvt, dtps, tpot, itl, e2e, e2etps, gaps, perChunk, queue, ttftS, e2eS, server []float64
	sources := map[string]bool{}
	end := 0.0
	for i := range recs {
		r := &recs[i]
		lv.Requests.Sent++
		lv.Retries += r.Retries
		end = max(end, r.OffsetMs+r.DoneMs)
		if !r.OK {
			lv.Requests.Failed++
			cls := r.ErrorClass
			if cls == "" {
				cls = "unknown"
			}
			lv.Requests.Errors[cls]++
			if _, ok := lv.Requests.ErrorSamples[cls]; !ok && r.Error != "" {
				if lv.Requests.ErrorSamples == nil {
					lv.Requests.ErrorSamples = map[string]string{}
				}
				lv.Requests.ErrorSamples[cls] = r.Error
			}
			continue
		}
		lv.Requests.Completed++
		lv.InputTokens += r.InputTokens
		lv.InputTokensRequested += r.InputTokensRequested
		lv.ReasoningTokens += r.ReasoningTokens
		lv.OutputTokens += r.OutputTokens
		if r.TokenSource != "" {
			sources[r.TokenSource] = true
		}
		if r.OutputTokensRequested > 0 {
			lv.Shortfall.RequestedTokens += r.OutputTokensRequested
			lv.Shortfall.ReceivedTokens += r.OutputTokens
			if r.OutputTokens < r.OutputTokensRequested {
				lv.Shortfall.ShortRequests++
			}
			if r.OutputTokens > r.OutputTokensRequested {
				lv.Shortfall.LongRequests++
			}
		}
		ttft = append(ttft, r.TTFTMs)
		if r.TTFVTMs > 0 {
			ttfvt = append(ttfvt, r.TTFVTMs)
		}
		e2e = append(e2e, r.E2EMs)
		if v, ok := r.DecodeTPS(); ok {
			dtps = append(dtps, v)
			tpot = append(tpot, 1000/v)
		}
		if v, ok := r.E2ETPS(); ok {
			e2etps = append(e2etps, v)
		}
		itl = r.AppendITL(itl)
		gaps = r.AppendChunkGaps(gaps)
		for _, k := range r.ChunkTokens {
			perChunk = append(perChunk, float64(k))
		}
		if load.Mode == ModeRate {
			// Late is the client's lateness: the queue less the request's
			// own connection set-up, which is in QueueMs (t0 is on an open
			// connection) and in the latency from the scheduled instant,
			// but is no late send.
			late := r.QueueMs
			if p := r.Phases; p != nil {
				late -= p.ConnWaitMs
			}
			if late > 1 {
				lv.LateSends++
			}
			queue = append(queue, r.QueueMs)
			ttftS = append(ttftS, r.TTFTMs+r.QueueMs)
			e2eS = append(e2eS, r.E2EMs+r.QueueMs)
		}
		if r.Server != nil && r.Server.DecodeTPS > 0 {
			server = append(server, r.Server.DecodeTPS)
		}
	}
	if durationS <= 0 {
		durationS = end / 1000
	}
	lv.DurationS = durationS
	switch len(sources) {
	case 0:
	case 1:
		for s := range sources {
			lv.TokenSource = s
		}
	default:
		lv.TokenSource = SourceMixed
	}
	if durationS > 0 {
		lv.OutputTPS = float64(lv.OutputTokens) / durationS
		lv.RequestRPS = float64(lv.Requests.Completed) / durationS
		lv.GoodputRPS = lv.RequestRPS
	}
	if lv.Requests.Sent > 0 {
		lv.ErrorRate = float64(lv.Requests.Failed) / float64(lv.Requests.Sent)
	}
	lv.SteadyOutputTPS = steadyTPS(load, recs, durationS)
	lv.TTFT = Describe(ttft)
	lv.TTFVT = Describe(ttfvt)
	lv.DecodeTPS = Describe(dtps)
	lv.TPOT = Describe(tpot)
	lv.ITL = Describe(itl)
	lv.E2E = Describe(e2e)
	lv.E2ETPS = Describe(e2etps)
	lv.ChunkGap = Describe(gaps)
	lv.TokensPerChunk = Describe(perChunk)
	if load.Mode == ModeRate {
		q, t, e := Describe(queue), Describe(ttftS), Describe(e2eS)
		lv.QueueMs, lv.TTFTSched, lv.E2ESched = &q, &t, &e
	}
	if len(server) > 0 {
		s := Describe(server)
		lv.ServerTPS = &s
	}
	lv.summarizeServer(recs)
	lv.summarizeConnections(recs)
	lv.summarizeCache(recs)
	if chains := chainWalls(recs); len(chains) > 0 {
		s := Describe(chains)
		lv.ChainMs = &s
	}
	if lv.LateSends > 0 {
		lv.Warnings = append(lv.Warnings, fmt.Sprintf(
			"%d of %d requests went out more than 1 ms after their scheduled instant (client queue p99 %.1f ms); latency from the scheduled instant includes that wait",
			lv.LateSends, lv.Requests.Completed, lv.QueueMs.P99))
	}
	if lv.InputTokensRequested > 0 && lv.Requests.Completed > 0 {
		extra := float64(lv.InputTokens-lv.InputTokensRequested) / float64(lv.Requests.Completed)
		if extra > 0 {
			lv.TemplateTokensPerRequest = extra
		} else if extra < 0 {
			lv.Warnings = append(lv.Warnings, fmt.Sprintf(
				"input: the server counted %d prompt tokens for %d requested; the --tokenizer does not match the model's (try --tokenizer server or the model's tokenizer.json)",
				lv.InputTokens, lv.InputTokensRequested))
		}
	}
	if lv.Shortfall.LongRequests > 0 {
		lv.Warnings = append(lv.Warnings, fmt.Sprintf(
			"%d of %d completed requests returned more tokens than max_tokens: the server ignores it, so output lengths are not what was asked",
			lv.Shortfall.LongRequests, lv.Requests.Completed))
	}
	if lv.Shortfall.ShortRequests > 0 {
		lv.Warnings = append(lv.Warnings, fmt.Sprintf(
			"output shortfall: %d of %d completed requests returned fewer tokens than requested (%d of %d tokens); use --ignore-eos for full-length outputs",
			lv.Shortfall.ShortRequests, lv.Requests.Completed, lv.Shortfall.ReceivedTokens, lv.Shortfall.RequestedTokens))
	}
	return lv
}

// steadyTPS counts the output tokens that arrived between ramp-up and drain,
// divided by that window. Ramp-up ends at the first instant k requests
// stream at once (k = the concurrency, or 1 for open loop) — every user is
// then streaming, however its start was spread (--ramp-up) — or, in a level
// that never has k streaming together, when k requests have streamed;
// drain starts at the last send. A window shorter than a tenth of the level
// yields 0: there is no steady state.
func steadyTPS(load Load, recs []Record, durationS float64) float64 {
	type edge struct {
		at float64
		d  int // +1: a request starts streaming; −1: it ends
	}
	var firsts []float64
	var edges []edge
	lastSend := 0.0
	for i := range recs {
		r := &recs[i]
		lastSend = max(lastSend, r.OffsetMs)
		if r.OK && len(r.ChunkMs) > 0 {
			first := r.OffsetMs + r.ChunkMs[0]
			firsts = append(firsts, first)
			edges = append(edges, edge{first, 1}, edge{r.OffsetMs + max(r.DoneMs, r.ChunkMs[0]), -1})
		}
	}
	if len(firsts) == 0 {
		return 0
	}
	sort.Float64s(firsts)
	k := 1
	if load.Mode != ModeRate && load.Concurrency > 1 {
		k = min(load.Concurrency, len(firsts))
	}
	from, to := firsts[k-1], lastSend
	// Ends sort before starts at the same instant: a user's next request
	// does not overlap its last one.
	sort.Slice(edges, func(i, j int) bool {
		if edges[i].at != edges[j].at {
			return edges[i].at < edges[j].at
		}
		return edges[i].d < edges[j].d
	})
	streaming := 0
	for _, e := range edges {
		streaming += e.d
		if streaming >= k {
			from = e.at
			break
		}
	}
	if to-from < durationS*1000/10 || to <= from {
		return 0
	}
	tokens := 0
	for i := range recs {
		r := &recs[i]
		if !r.OK {
			continue
		}
		for j, t := range r.ChunkMs {
			at := r.OffsetMs + t
			if at >= from && at <= to {
				tokens += r.ChunkTokens[j]
			}
		}
	}
	return float64(tokens) / ((to - from) / 1000)
}

// chainWalls returns the wall-clock of every agent chain whose calls all
// completed: the steps of a chain are consecutive, so a chain is complete
// when its steps run 1..n without a failure and n is the longest seen.
func chainWalls(recs []Record) []float64 {
	type span struct {
		start, end float64
		steps      int
		failed     bool
	}
	chains := map[int]*span{}
	maxSteps := 0
	for i := range recs {
		r := &recs[i]
		if r.Chain == 0 {
			continue
		}
		c := chains[r.Chain]
		if c == nil {
			c = &span{start: r.OffsetMs, end: r.OffsetMs + r.DoneMs}
			chains[r.Chain] = c
		}
		c.start = min(c.start, r.OffsetMs)
		c.end = max(c.end, r.OffsetMs+r.DoneMs)
		c.steps++
		c.failed = c.failed || !r.OK
		maxSteps = max(maxSteps, r.Step)
	}
	var out []float64
	for _, c := range chains {
		if !c.failed && c.steps == maxSteps {
			out = append(out, c.end-c.start)
		}
	}
	sort.Float64s(out)
	return out
}

// NotCountedByModel says the level's prompts were counted with a tokenizer
// other than the model's: what the server counted beyond them per request
// is not the chat template's alone.
func (lv *Level) NotCountedByModel() {
	if lv.TemplateTokensPerRequest != 0 {
		lv.ExtraPromptTokensPerRequest, lv.TemplateTokensPerRequest = lv.TemplateTokensPerRequest, 0
	}
}

package metrics

// Embeddings are an embeddings level's figures (bench --api
// openai-embeddings, ollama-embed, tei-embed). An embeddings answer is no
// token stream: its level has no TTFT, decode rate or output tokens, and
// its requests' latency is t0 to the answer's last byte.
type Embeddings struct {
	// Inputs are the texts the completed requests embedded; Tokens their
	// tokens, as the server counted them where it said (TokenSource
	// "usage"), else the exact count of the inputs as sent ("prompt").
	Inputs      int    `json:"inputs"`
	Tokens      int    `json:"tokens"`
	TokenSource string `json:"token_source"`
	// InputsPerS and TokensPerS are Inputs and Tokens over the level's
	// wall time.
	InputsPerS float64 `json:"inputs_per_s"`
	TokensPerS float64 `json:"tokens_per_s"`
	// Dims is the vectors' dimension (the first answer's).
	Dims int `json:"dims,omitempty"`
	// Latency is each completed request's t0 to its answer's end.
	Latency Stats `json:"latency_ms"`
	// Failed counts the embeddings requests that failed: in a level that
	// mixes them with completions (tokbench proxy's), the level's own
	// counts are of both kinds.
	Failed int `json:"failed,omitempty"`
}

// Token sources of an embeddings level (Embeddings.TokenSource).
const (
	EmbedSourceUsage  = "usage"  // the server's count
	EmbedSourcePrompt = "prompt" // the exact count of the inputs sent
	EmbedSourceMixed  = "mixed"  // some of each
)

// NoTokenStream is what a table says of an embeddings level's TTFT and
// decode columns.
const NoTokenStream = "embeddings: no token stream"

// embedAcc accumulates an embeddings level's completed requests.
type embedAcc struct {
	inputs, tokens, dims int
	failed               int
	usage, prompt        bool
	latency              Sample
}

func (a *embedAcc) add(r *Record) {
	a.inputs += r.EmbedInputs
	a.tokens += r.InputTokens
	if a.dims == 0 {
		a.dims = r.EmbedDims
	}
	if r.TokenSource == SourceUsage {
		a.usage = true
	} else {
		a.prompt = true
	}
	a.latency.Add(r.DoneMs)
}

// apply sets the level's Embeddings, when it had any.
func (a *embedAcc) apply(lv *Level) {
	if a.inputs == 0 {
		return
	}
	e := &Embeddings{Inputs: a.inputs, Tokens: a.tokens, Dims: a.dims, Latency: a.latency.Stats(), Failed: a.failed}
	switch {
	case a.usage && a.prompt:
		e.TokenSource = EmbedSourceMixed
	case a.usage:
		e.TokenSource = EmbedSourceUsage
	default:
		e.TokenSource = EmbedSourcePrompt
	}
	if lv.DurationS > 0 {
		e.InputsPerS = float64(e.Inputs) / lv.DurationS
		e.TokensPerS = float64(e.Tokens) / lv.DurationS
	}
	lv.Embeddings = e
}

// ToolCalls are a level's figures of tool calling (bench --tools): what
// the tool definitions cost in prompt and whether and when the model
// called one.
type ToolCalls struct {
	// ToolsPerRequest is the definitions each request carried (the most
	// any did); DefinitionTokens their tokens per request by the local
	// tokenizer's count of their JSON. The server's own count is in its
	// prompt tokens: the level's template_tokens_per_request (or
	// extra_prompt_tokens_per_request) is what it counted beyond the
	// messages, the definitions and the chat template together.
	ToolsPerRequest  int     `json:"tools_per_request"`
	DefinitionTokens float64 `json:"definition_tokens_per_request"`
	// Called counts the completed requests whose answer called a tool;
	// Share is Called over the completed requests.
	Called int     `json:"called"`
	Share  float64 `json:"share"`
	// FirstCall is, for requests that called one, t0 to the first
	// tool-call delta (OpenAI's delta.tool_calls, Anthropic's tool_use
	// content_block_start or input_json_delta).
	FirstCall Stats `json:"first_tool_call_ms"`
	// ArgTokens are the tokens of the calls' arguments (part of the
	// output tokens), by the local tokenizer; ArgTokensPerCall per
	// request that called.
	ArgTokens        int     `json:"arg_tokens"`
	ArgTokensPerCall float64 `json:"arg_tokens_per_call"`
}

// toolAcc accumulates the completed requests of a level that sent tools.
type toolAcc struct {
	requests, tools, defTokens int
	called, argTokens          int
	first                      Sample
}

func (a *toolAcc) add(r *Record) {
	if r.ToolsSent == 0 {
		return
	}
	a.requests++
	a.tools = max(a.tools, r.ToolsSent)
	a.defTokens += r.ToolTokens
	if r.ToolCalled {
		a.called++
		a.argTokens += r.ToolArgTokens
		a.first.Add(r.ToolCallMs)
	}
}

// apply sets the level's ToolCalls, when its requests sent tools.
func (a *toolAcc) apply(lv *Level) {
	if a.requests == 0 {
		return
	}
	t := &ToolCalls{
		ToolsPerRequest: a.tools, DefinitionTokens: float64(a.defTokens) / float64(a.requests),
		Called: a.called, Share: float64(a.called) / float64(a.requests),
		FirstCall: a.first.Stats(), ArgTokens: a.argTokens,
	}
	if a.called > 0 {
		t.ArgTokensPerCall = float64(a.argTokens) / float64(a.called)
	}
	lv.ToolCalls = t
}

// foldEmbeddings folds the runs' embeddings figures as foldRuns folds a
// level's: counts summed, rates and each statistic of the latency folded
// over the runs that have them; nil when none has.
func foldEmbeddings(runs []Level, fold func([]float64) float64) *Embeddings {
	var have []Level
	for _, r := range runs {
		if r.Embeddings != nil {
			have = append(have, r)
		}
	}
	if len(have) == 0 {
		return nil
	}
	out := &Embeddings{TokenSource: have[0].Embeddings.TokenSource, Dims: have[0].Embeddings.Dims}
	var inputs, tokens []float64
	for _, r := range have {
		e := r.Embeddings
		out.Inputs += e.Inputs
		out.Tokens += e.Tokens
		out.Failed += e.Failed
		if e.TokenSource != out.TokenSource {
			out.TokenSource = EmbedSourceMixed
		}
		inputs, tokens = append(inputs, e.InputsPerS), append(tokens, e.TokensPerS)
	}
	out.InputsPerS, out.TokensPerS = fold(inputs), fold(tokens)
	out.Latency = foldStats(have, func(l *Level) *Stats { return &l.Embeddings.Latency }, fold)
	return out
}

// foldToolCalls folds the runs' tool-call figures as foldEmbeddings does.
func foldToolCalls(runs []Level, fold func([]float64) float64) *ToolCalls {
	var have []Level
	for _, r := range runs {
		if r.ToolCalls != nil {
			have = append(have, r)
		}
	}
	if len(have) == 0 {
		return nil
	}
	out := &ToolCalls{}
	var share, defs, perCall []float64
	for _, r := range have {
		t := r.ToolCalls
		out.ToolsPerRequest = max(out.ToolsPerRequest, t.ToolsPerRequest)
		out.Called += t.Called
		out.ArgTokens += t.ArgTokens
		share, defs, perCall = append(share, t.Share), append(defs, t.DefinitionTokens), append(perCall, t.ArgTokensPerCall)
	}
	out.Share, out.DefinitionTokens, out.ArgTokensPerCall = fold(share), fold(defs), fold(perCall)
	out.FirstCall = foldStats(have, func(l *Level) *Stats { return &l.ToolCalls.FirstCall }, fold)
	return out
}

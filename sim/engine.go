package sim

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"time"
)

// Step is the work of one engine iteration, as handed to a [Cost] model.
type Step struct {
	// DecodeSeqs is the number of sequences decoding one token each.
	DecodeSeqs int
	// KVTokens is the total context (KV-cache tokens) those sequences attend to.
	KVTokens int
	// PrefillTokens is the number of prompt tokens computed this step
	// (chunked prefill), plus the verification tokens of speculative decoding.
	PrefillTokens int
	// PrefillContextTokens is the context the prefill chunks attend to:
	// summed over the sequences being prefilled, the tokens already cached
	// plus this step's chunk (as physics.Step defines it).
	PrefillContextTokens int
	// PrefillAttentionPairs is the (query, key) pairs the prefill chunks
	// attend over, summed over the sequences: a chunk of p tokens ending a
	// context of C has p·(C − p/2); the verification tokens of speculative
	// decoding attend over their sequence's context. Zero means one chunk
	// of PrefillTokens ending PrefillContextTokens (physics.Step.PrefillPairs).
	PrefillAttentionPairs int
}

// Cost tells the engine how long a step takes and how many tokens the KV
// cache holds. physics.Deployment provides one through [PhysicsCost]; tests
// use fixed step times so that token instants are known exactly.
type Cost interface {
	StepTime(Step) time.Duration
	KVCapacityTokens() int
}

// Spec configures speculative decoding. The zero value disables it.
type Spec struct {
	// DraftTokens is the draft length k (tokens proposed per step).
	DraftTokens int
	// Acceptance is the probability a that each draft token is accepted,
	// independently, until the first rejection.
	Acceptance float64
	// DraftCostRatio is the cost c of one draft-model step relative to a
	// target-model decode step of the same batch.
	DraftCostRatio float64
}

// Enabled reports whether speculative decoding is on.
func (s Spec) Enabled() bool { return s.DraftTokens > 0 }

// ExpectedTokens is the mean number of tokens a sequence gains per step:
// (1 − a^(k+1)) / (1 − a) (Leviathan et al. 2023); 1 when disabled.
func (s Spec) ExpectedTokens() float64 {
	if !s.Enabled() {
		return 1
	}
	a := s.Acceptance
	if a >= 1 {
		return float64(s.DraftTokens + 1)
	}
	return (1 - math.Pow(a, float64(s.DraftTokens+1))) / (1 - a)
}

func (s Spec) validate() error {
	switch {
	case s.DraftTokens < 0:
		return fmt.Errorf("speculative draft tokens %d: must be >= 0", s.DraftTokens)
	case !s.Enabled():
		return nil
	case s.Acceptance < 0 || s.Acceptance > 1 || math.IsNaN(s.Acceptance):
		return fmt.Errorf("speculative acceptance %v: must be in [0, 1]", s.Acceptance)
	case s.DraftCostRatio < 0 || math.IsNaN(s.DraftCostRatio):
		return fmt.Errorf("speculative draft cost ratio %v: must be >= 0", s.DraftCostRatio)
	}
	return nil
}

// EngineConfig configures the scheduler. The zero value is usable: zero
// fields take the defaults below.
type EngineConfig struct {
	// MaxNumSeqs is the most sequences in a batch (vLLM max-num-seqs); 256.
	MaxNumSeqs int
	// MaxBatchedTokens is the token budget of one step (vLLM
	// max-num-batched-tokens with chunked prefill); 8192.
	MaxBatchedTokens int
	// Seed makes every random draw reproducible.
	Seed uint64
	// MeanOutputTokens is the mean of the geometric output-length (EOS)
	// draw. Zero means no EOS: every request runs to its max tokens.
	MeanOutputTokens int
	// Spec enables speculative decoding.
	Spec Spec
	// FrontEnd is what the server spends outside the model's steps; the
	// zero value is nothing.
	FrontEnd FrontEnd
}

// Defaults for EngineConfig.
const (
	DefaultMaxNumSeqs       = 256
	DefaultMaxBatchedTokens = 8192
)

func (c EngineConfig) withDefaults() EngineConfig {
	if c.MaxNumSeqs == 0 {
		c.MaxNumSeqs = DefaultMaxNumSeqs
	}
	if c.MaxBatchedTokens == 0 {
		c.MaxBatchedTokens = DefaultMaxBatchedTokens
	}
	return c
}

// Finish is why a request stopped.
type Finish uint8

// Finish reasons.
const (
	FinishNone   Finish = iota // still running
	FinishLength               // reached its max tokens
	FinishStop                 // the EOS draw stopped it
)

// String returns the OpenAI finish_reason spelling.
func (f Finish) String() string {
	switch f {
	case FinishLength:
		return "length"
	case FinishStop:
		return "stop"
	}
	return ""
}

// Request is one generation request as the engine sees it.
type Request struct {
	// ID identifies the request; it must be unique among live requests and
	// seeds the request's random draws.
	ID uint64
	// Arrival is the engine time at which the request reaches the server;
	// it is admitted no earlier, and with a front end only once that has
	// handled it.
	Arrival time.Duration
	// PromptTokens is the prompt length (at least 1).
	PromptTokens int
	// MaxTokens is the most output tokens (at least 1).
	MaxTokens int
	// MinTokens is the fewest output tokens before EOS may stop it.
	MinTokens int
	// IgnoreEOS makes the request run to MaxTokens.
	IgnoreEOS bool
}

// Emit is what one request produced in one step.
type Emit struct {
	ID     uint64
	Tokens int    // new output tokens, emitted together at the step's end
	First  int    // index of the first of them in the request's output (0-based)
	Finish Finish // FinishNone unless this was the request's last step
}

// StepResult describes one engine iteration.
type StepResult struct {
	Start, End time.Duration
	// Delivered is when the step's chunks reach their clients: End, or
	// later when the front end is still writing out earlier steps' chunks
	// and then this step's.
	Delivered    time.Duration
	Step         Step
	Emits        []Emit // valid until the next call to Engine.Step
	Running      int    // sequences in the batch after the step
	Waiting      int    // requests queued after the step
	KVUsedTokens int    // KV-cache tokens held after the step
	Preempted    int    // sequences preempted before this step
	Prefilling   int    // sequences that computed prompt tokens this step
}

// ErrTooLong reports a request that can never fit in the KV cache.
var ErrTooLong = errors.New("request does not fit in the KV cache")

type seq struct {
	req       Request
	admit     time.Duration // when the engine has it: arrival, then the front end
	target    int           // output tokens it will produce
	finish    Finish
	generated int // output tokens emitted so far
	computed  int // tokens whose KV is in the cache
	prefill   int // tokens to prefill before decoding (prompt, plus output after a preemption)
	rng       *rand.Rand
	chunk     int  // prompt tokens scheduled this step
	decoding  bool // scheduled to decode this step
}

func (s *seq) prefilling() bool { return s.computed < s.prefill }

// kv is the KV-cache tokens the sequence holds: the whole prompt is
// reserved at admission, output grows one token at a time.
func (s *seq) kv() int { return max(s.prefill, s.computed) }

// Engine is the iteration-level scheduler. It is not safe for concurrent use.
//
// Scheduling follows vLLM's V1 scheduler with chunked prefill: each step,
// running sequences that are decoding take one token of the budget each
// (k+1 with speculative decoding), then partially prefilled sequences take
// prompt chunks from what is left, then waiting requests are admitted in
// FIFO order while the batch has room, budget remains and their whole prompt
// fits in the free KV cache. Output tokens take KV space as they are made;
// when a decode step would overflow the cache, the most recently admitted
// sequence is preempted: it frees its cache and goes back to the head of the
// queue, to recompute its prompt and the output it already streamed.
type Engine struct {
	cfg     EngineConfig
	cost    Cost
	kvCap   int
	now     time.Duration
	running []*seq
	waiting []*seq // FIFO; preempted sequences go back to the front
	kvUsed  int
	emits   []Emit
	// The front end's tokenizer and output workers are busy until these.
	tokFree, outFree time.Duration
	// outPrev is when the output worker was through the step before the
	// last: the next step may not start earlier, so delivery overlaps one
	// step and never falls further behind.
	outPrev time.Duration
}

// NewEngine returns an engine at engine time zero.
func NewEngine(cfg EngineConfig, cost Cost) (*Engine, error) {
	cfg = cfg.withDefaults()
	if cfg.MaxNumSeqs < 1 {
		return nil, fmt.Errorf("max num seqs %d: must be >= 1", cfg.MaxNumSeqs)
	}
	if cfg.MaxBatchedTokens < 1 {
		return nil, fmt.Errorf("max batched tokens %d: must be >= 1", cfg.MaxBatchedTokens)
	}
	if cfg.MeanOutputTokens < 0 {
		return nil, fmt.Errorf("mean output tokens %d: must be >= 0", cfg.MeanOutputTokens)
	}
	if err := cfg.Spec.validate(); err != nil {
		return nil, err
	}
	if err := cfg.FrontEnd.Validate(); err != nil {
		return nil, err
	}
	if cfg.MaxBatchedTokens < 1+cfg.Spec.DraftTokens {
		return nil, fmt.Errorf("max batched tokens %d: must hold one speculative step (%d tokens)",
			cfg.MaxBatchedTokens, 1+cfg.Spec.DraftTokens)
	}
	if cost == nil {
		return nil, errors.New("engine: nil cost model")
	}
	kv := cost.KVCapacityTokens()
	if kv < 2 {
		return nil, fmt.Errorf("KV cache holds %d tokens: the model does not fit", kv)
	}
	return &Engine{cfg: cfg, cost: cost, kvCap: kv}, nil
}

// Config returns the configuration with defaults filled in.
func (e *Engine) Config() EngineConfig { return e.cfg }

// KVCapacityTokens is the size of the KV cache in tokens.
func (e *Engine) KVCapacityTokens() int { return e.kvCap }

// Now is the engine time: the end of the last step, or later if advanced.
func (e *Engine) Now() time.Duration { return e.now }

// AdvanceTo moves engine time forward to t (never backward). A real-time
// driver uses it to catch up with the wall clock after idling.
func (e *Engine) AdvanceTo(t time.Duration) {
	if t > e.now {
		e.now = t
	}
}

// Idle reports whether no request is running or waiting.
func (e *Engine) Idle() bool { return len(e.running) == 0 && len(e.waiting) == 0 }

// Len returns the number of running and waiting requests.
func (e *Engine) Len() (running, waiting int) { return len(e.running), len(e.waiting) }

// KVUsedTokens is the KV-cache tokens held now.
func (e *Engine) KVUsedTokens() int { return e.kvUsed }

// Submit queues a request. Requests must be submitted in order of arrival.
func (e *Engine) Submit(r Request) error {
	if r.PromptTokens < 1 {
		return fmt.Errorf("request %d: prompt tokens %d: must be >= 1", r.ID, r.PromptTokens)
	}
	if r.MaxTokens < 1 {
		return fmt.Errorf("request %d: max tokens %d: must be >= 1", r.ID, r.MaxTokens)
	}
	if r.PromptTokens+r.MaxTokens > e.kvCap {
		return fmt.Errorf("request %d: %d prompt + %d output tokens, cache holds %d: %w",
			r.ID, r.PromptTokens, r.MaxTokens, e.kvCap, ErrTooLong)
	}
	s := &seq{req: r, admit: r.Arrival, prefill: r.PromptTokens, rng: newRNG(e.cfg.Seed, r.ID, 1)}
	if fe := e.cfg.FrontEnd; !fe.Zero() {
		e.tokFree = max(r.Arrival+fe.in(), e.tokFree) + fe.tokenize(r.PromptTokens)
		s.admit = e.tokFree
	}
	s.target, s.finish = e.drawLength(r, s.rng)
	e.waiting = append(e.waiting, s)
	return nil
}

// drawLength picks how many tokens the request produces and why it stops.
func (e *Engine) drawLength(r Request, rng *rand.Rand) (int, Finish) {
	if r.IgnoreEOS || e.cfg.MeanOutputTokens == 0 {
		return r.MaxTokens, FinishLength
	}
	// Geometric on {1, 2, …} with mean m: P(stop after each token) = 1/m.
	p := 1 / float64(e.cfg.MeanOutputTokens)
	n := 1
	if p < 1 {
		u := 1 - rng.Float64() // (0, 1]
		n = 1 + int(math.Floor(math.Log(u)/math.Log1p(-p)))
	}
	n = max(n, r.MinTokens, 1)
	if n >= r.MaxTokens {
		return r.MaxTokens, FinishLength
	}
	return n, FinishStop
}

// Cancel removes a request wherever it is and frees its cache. It reports
// whether the request was found.
func (e *Engine) Cancel(id uint64) bool {
	for i, s := range e.running {
		if s.req.ID == id {
			e.kvUsed -= s.kv()
			e.running = append(e.running[:i], e.running[i+1:]...)
			return true
		}
	}
	for i, s := range e.waiting {
		if s.req.ID == id {
			e.waiting = append(e.waiting[:i], e.waiting[i+1:]...)
			return true
		}
	}
	return false
}

// Step runs one engine iteration and returns what it did. ok is false when
// there is nothing to do (no running request, none waiting). When nothing
// runs, engine time first jumps to the arrival of the next request.
//
// It is one function so the iteration reads in vLLM's scheduler's order
// (make room in the KV cache, preempting; schedule running decodes and
// prefill chunks; admit waiting requests; cost the step; the outcomes),
// each part using what the one before decided.
func (e *Engine) Step() (res StepResult, ok bool) {
	if e.Idle() {
		return StepResult{}, false
	}
	if len(e.running) == 0 && e.waiting[0].admit > e.now {
		e.now = e.waiting[0].admit
	}
	// Output processing overlaps only the next step: this step waits for
	// the chunks of the step before the last to be written out.
	e.now = max(e.now, e.outPrev)
	spec := e.cfg.Spec
	perDecode := 1
	if spec.Enabled() {
		perDecode += spec.DraftTokens
	}
	budget := e.cfg.MaxBatchedTokens
	var st Step

	// 1. Make room in the KV cache for this step's decode tokens, preempting
	// the newest sequences (LIFO, as vLLM does) until it fits.
	preempted := 0
	need := 0
	for {
		need = 0
		for _, s := range e.running {
			if !s.prefilling() {
				need += min(perDecode, s.target-s.generated)
			}
		}
		if e.kvUsed+need <= e.kvCap || len(e.running) <= 1 {
			break
		}
		e.preemptLast()
		preempted++
	}

	// 2. Running decodes first, then chunks of running prefills.
	for _, s := range e.running {
		s.chunk = 0
		s.decoding = false
		if !s.prefilling() && budget >= perDecode {
			s.decoding = true
			budget -= perDecode
			st.DecodeSeqs++
			st.KVTokens += s.computed
		}
	}
	decodes := st.DecodeSeqs
	for _, s := range e.running {
		if s.prefilling() && budget > 0 {
			s.chunk = min(s.prefill-s.computed, budget)
			budget -= s.chunk
			st.PrefillTokens += s.chunk
			st.PrefillContextTokens += s.computed + s.chunk
			st.PrefillAttentionPairs += chunkPairs(s.chunk, s.computed)
		}
	}
	// 3. Admit waiting requests in FIFO order.
	for len(e.waiting) > 0 && budget > 0 && len(e.running) < e.cfg.MaxNumSeqs {
		s := e.waiting[0]
		if s.admit > e.now || e.kvUsed+need+s.prefill > e.kvCap {
			break
		}
		e.waiting = e.waiting[1:]
		e.kvUsed += s.prefill
		s.chunk = min(s.prefill, budget)
		budget -= s.chunk
		st.PrefillTokens += s.chunk
		st.PrefillContextTokens += s.chunk
		st.PrefillAttentionPairs += chunkPairs(s.chunk, 0)
		e.running = append(e.running, s)
	}

	// Step time. Speculative decoding verifies k draft tokens per decoding
	// sequence in the target pass (extra compute, no extra weight reads)
	// and runs k draft-model steps costing c target decode steps each.
	costStep := st
	var dur time.Duration
	if spec.Enabled() && decodes > 0 {
		costStep.PrefillTokens += decodes * spec.DraftTokens
		costStep.PrefillAttentionPairs += st.KVTokens * spec.DraftTokens
		dur = e.cost.StepTime(costStep)
		draft := e.cost.StepTime(Step{DecodeSeqs: decodes, KVTokens: st.KVTokens})
		dur += time.Duration(float64(spec.DraftTokens) * spec.DraftCostRatio * float64(draft))
	} else {
		dur = e.cost.StepTime(costStep)
	}
	dur += e.cfg.FrontEnd.schedule(len(e.running))
	if dur <= 0 {
		dur = time.Nanosecond
	}
	res.Start = e.now
	e.now += dur
	res.End = e.now
	res.Delivered = res.End
	res.Step = st
	res.Preempted = preempted

	// Outcomes at the step's end.
	e.emits = e.emits[:0]
	kept := e.running[:0]
	prefilling := 0
	for _, s := range e.running {
		n := 0
		switch {
		case s.chunk > 0:
			prefilling++
			s.computed += s.chunk
			s.chunk = 0
			if !s.prefilling() {
				n = 1 // the step that finishes a prompt samples a token
			}
		case s.decoding:
			s.decoding = false
			n = 1
			if spec.Enabled() {
				n = spec.draw(s.rng)
			}
			n = min(n, s.target-s.generated)
			s.computed += n
			e.kvUsed += n
		}
		if n > 0 {
			em := Emit{ID: s.req.ID, Tokens: n, First: s.generated}
			s.generated += n
			if s.generated >= s.target {
				em.Finish = s.finish
			}
			e.emits = append(e.emits, em)
		}
		if s.generated >= s.target {
			e.kvUsed -= s.kv()
			continue
		}
		kept = append(kept, s)
	}
	clear(e.running[len(kept):])
	e.running = kept
	res.Emits = e.emits
	e.outPrev = e.outFree
	if out := e.cfg.FrontEnd.output(len(e.emits)); out > 0 {
		e.outFree = max(e.outFree, res.End) + out
		res.Delivered = e.outFree
	}
	res.Running = len(e.running)
	res.Waiting = len(e.waiting)
	res.KVUsedTokens = e.kvUsed
	res.Prefilling = prefilling
	return res, true
}

// chunkPairs is the (query, key) pairs a prefill chunk of p tokens after
// cached tokens attends over under the causal mask: p·(cached + p/2).
func chunkPairs(p, cached int) int { return p*cached + p*p/2 }

// preemptLast evicts the newest running sequence back to the head of the
// queue. Its prompt and the output it has streamed are recomputed as one
// prefill when it is readmitted.
func (e *Engine) preemptLast() {
	last := len(e.running) - 1
	s := e.running[last]
	e.running[last] = nil
	e.running = e.running[:last]
	e.kvUsed -= s.kv()
	s.prefill = s.req.PromptTokens + s.generated
	s.computed = 0
	s.chunk = 0
	s.decoding = false
	e.waiting = append(e.waiting, nil)
	copy(e.waiting[1:], e.waiting)
	e.waiting[0] = s
}

// draw returns the tokens a sequence gains in one speculative step: the
// accepted prefix of k drafts (each accepted with probability a until the
// first rejection) plus the token the target model samples after it.
func (s Spec) draw(rng *rand.Rand) int {
	n := 1
	for range s.DraftTokens {
		if rng.Float64() >= s.Acceptance {
			break
		}
		n++
	}
	return n
}

// newRNG returns the generator for one request's stream of draws.
func newRNG(seed, id, stream uint64) *rand.Rand {
	return rand.New(rand.NewPCG(seed^0x9e3779b97f4a7c15*stream, splitmix(id^seed)))
}

func splitmix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

package sim

import (
	"errors"
	"math"
	"time"
)

// FrontEnd is what a server spends on a request outside the model's
// steps: its HTTP front end, tokenizer and output processing. The zero
// value is none (the engine alone, as before).
//
//   - On the way in, a request takes RequestMs (HTTP parsing, validation,
//     the chat template, the hop to the engine process), then its prompt is
//     tokenized at TokenizeUsPerToken by one tokenizer worker (vLLM's API
//     server tokenizes on a single thread: a burst of prompts queues). The
//     engine sees the request only then; it joins at the next step boundary.
//   - Each step, the scheduler spends ScheduleUsPerSeq per running sequence
//     before the GPU runs, in series with it (the per-step part of
//     scheduling is the cost model's own per-step overhead).
//   - After each step, one output worker detokenizes the step's chunks and
//     writes them (ChunkUs each), in parallel with the next step (vLLM's
//     asynchronous output processing) but in series with the steps before:
//     a step's chunks reach their clients when the worker is through them.
//
// A closed-loop user whose answer has just ended therefore sends its next
// request after the engine has begun its next step: its prompt waits for
// that step, as on a real server, where the simulator without a front end
// admits it at once.
type FrontEnd struct {
	RequestMs          float64 `json:"request_ms"`
	TokenizeUsPerToken float64 `json:"tokenize_us_per_token"`
	ScheduleUsPerSeq   float64 `json:"schedule_us_per_seq"`
	ChunkUs            float64 `json:"chunk_us"`
}

// VLLMFrontEnd is vLLM's OpenAI-compatible server, from published
// measurements (docs/simulator.md cites each):
//
//   - RequestMs 4: HTTP server and ZMQ hop, vLLM online against offline
//     TTFT at batch 32 (tenstorrent/tt-inference-server#190: +4 ms);
//   - TokenizeUsPerToken 10: 131-token chat prompts tokenized in 1.3–2.8 ms,
//     10–21 µs a token, the steady value taken
//     (tenstorrent/tt-inference-server#2173);
//   - ScheduleUsPerSeq 12.7: vLLM's scheduler, all-decode steps, per
//     running request at the batch cap (openfabric-systems/simllm#204, CPU
//     profile of vLLM's engine loop);
//   - ChunkUs 29: incremental detokenization, 0.03 s for 8 × 128 output
//     tokens (vllm-project/vllm#121, fast tokenizer).
var VLLMFrontEnd = FrontEnd{RequestMs: 4, TokenizeUsPerToken: 10, ScheduleUsPerSeq: 12.7, ChunkUs: 29}

// Validate checks that every cost is a finite number, zero or more.
func (f FrontEnd) Validate() error {
	for _, v := range []float64{f.RequestMs, f.TokenizeUsPerToken, f.ScheduleUsPerSeq, f.ChunkUs} {
		if v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
			return errors.New("front end: request_ms, tokenize_us_per_token, schedule_us_per_seq and chunk_us must be finite and not negative")
		}
	}
	return nil
}

// Zero reports whether f costs nothing.
func (f FrontEnd) Zero() bool { return f == FrontEnd{} }

// The front end's times: before tokenization starts, tokenizing n prompt
// tokens, scheduling seqs sequences, and writing out chunks.
func (f FrontEnd) in() time.Duration               { return fromMs(f.RequestMs) }
func (f FrontEnd) tokenize(n int) time.Duration    { return fromUs(f.TokenizeUsPerToken * float64(n)) }
func (f FrontEnd) schedule(seqs int) time.Duration { return fromUs(f.ScheduleUsPerSeq * float64(seqs)) }
func (f FrontEnd) output(chunks int) time.Duration { return fromUs(f.ChunkUs * float64(chunks)) }

func fromMs(v float64) time.Duration { return time.Duration(v * float64(time.Millisecond)) }
func fromUs(v float64) time.Duration { return time.Duration(v * float64(time.Microsecond)) }

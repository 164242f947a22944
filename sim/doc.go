// Package sim is a simulated LLM inference engine and an OpenAI-compatible
// server in front of it.
//
// The engine ([Engine]) is a discrete, iteration-level model of a serving
// engine such as vLLM: continuous batching up to a maximum number of
// sequences, a per-step token budget that running decodes use first and
// chunked prefills fill after them, a KV cache of fixed capacity with a FIFO
// waiting queue and preemption by recompute, an output-length (EOS) draw, and
// speculative decoding. How long a step takes comes from a [Cost] model, in
// production the roofline of package physics. The engine knows nothing about
// clocks: it advances its own engine time one step at a time, so the same
// core runs in virtual time ([RunClosedLoop], tests, `tokbench simulate`)
// and in real time behind the HTTP [Server], whose single engine goroutine
// sleeps until each step's end and then hands every stream the tokens of
// that step as one chunk.
//
// Determinism: for a fixed seed, configuration and sequence of submissions,
// the engine produces identical token instants. Every random draw (output
// length, accepted draft tokens, output words) comes from a generator seeded
// by the engine seed and the request ID, so it does not depend on how
// requests interleave.
//
// Concurrency: an [Engine] is not safe for concurrent use; it belongs to one
// goroutine. A [Server] is safe for concurrent use. It starts one engine
// goroutine per server, plus the HTTP server's goroutines when started with
// [Server.Start]; [Server.Close] stops all of them and returns when they have
// ended. Handler goroutines (one per in-flight request, owned by net/http)
// end when their request finishes or its client goes away; a client that
// disconnects cancels its request inside the engine.
package sim

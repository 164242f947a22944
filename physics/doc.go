// Package physics holds the arithmetic of LLM inference: a catalog of
// hardware, models and weight precisions with their sources, and the cost
// model built on them.
//
// Decode is bound by memory bandwidth: every engine iteration reads the
// weights once (for a mixture-of-experts model, only the experts the batch
// touches) plus the KV cache of every sequence, so a single stream can never
// beat bandwidth ÷ bytes per token. Prefill and large batches are bound by
// compute: 2 FLOPs per active parameter per token, plus attention.
//
//	d := physics.Deployment{Model: m, Weights: p, KVCache: p, Hardware: h, GPUs: 1}
//	d.BytesPerToken(0)                        // bytes read per decoded token
//	d.StepTime(physics.Step{DecodeSeqs: 8, KVTokens: 8 * 1024})
//	d.Ceiling(physics.Workload{Batch: 8})     // everything `tokbench ceiling` prints
//
// Every figure in the built-in catalog carries its source; figures that are
// estimates or that sources disagree on say so. The efficiencies of each
// hardware entry (MBU, MFU, overheads) are calibrated against published
// measurements; docs/physics.md shows the calibration and the held-out
// validation errors, produced by this package's tests.
//
// All values are plain data; Catalog and Deployment are safe for concurrent
// use as long as nobody mutates the maps of a Catalog while others read them.
package physics

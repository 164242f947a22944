package sim

import (
	"errors"
	"time"
)

// Calibrated is a cost model fitted to a measured deployment (tokbench
// calibrate): a step reads the weights once and the KV of its context at
// the deployment's bandwidth times MBU, computes its prefill and decode
// tokens at PrefillTPS, takes the larger of the two, and adds the
// attention over its context, a per-step and a per-sequence overhead:
//
//	step = max((W + KV·context) / (BW·MBU), (prefill + decode tokens) / PrefillTPS)
//	       + Attention·(query, key) pairs
//	       + StepOverhead + SeqOverhead·decoding sequences
//
// Decode tokens count as compute at the prefill rate: the same FLOPs per
// token, so a batch that grows past the memory term turns compute-bound,
// as CPUs serving llama.cpp do at a few users. Attention makes a token's
// cost grow with the context it attends to: a decoding sequence's token
// attends over its whole context, a prefill chunk of p tokens ending a
// context of C over p·(C − p/2) pairs (the causal mask), as in package
// physics. It is added, not overlapped: llama.cpp runs the attention
// kernels between the matmuls, one after another.
type Calibrated struct {
	WeightBytes          float64 `json:"weight_bytes"`
	KVBytesPerToken      float64 `json:"kv_bytes_per_token"`
	KVCapacity           int     `json:"kv_capacity_tokens"`
	BandwidthBytesPerSec float64 `json:"bandwidth_bytes_per_sec"`
	MBU                  float64 `json:"mbu"`
	PrefillTPS           float64 `json:"prefill_tps"`
	StepOverheadMs       float64 `json:"step_overhead_ms"`
	SeqOverheadMs        float64 `json:"seq_overhead_ms"`
	// AttentionNsPerPair is the time of one (query, key) pair of
	// attention; 0 when the fit had one prompt length to go on.
	AttentionNsPerPair float64 `json:"attention_ns_per_pair,omitempty"`
}

// Validate checks that the model can cost a step.
func (c Calibrated) Validate() error {
	switch {
	case !(c.WeightBytes > 0) || !(c.BandwidthBytesPerSec > 0) || !(c.MBU > 0) || !(c.PrefillTPS > 0):
		return errors.New("weight_bytes, bandwidth_bytes_per_sec, mbu and prefill_tps must be positive")
	case c.KVBytesPerToken < 0 || c.StepOverheadMs < 0 || c.SeqOverheadMs < 0 || c.AttentionNsPerPair < 0 || c.KVCapacity < 1:
		return errors.New("kv_bytes_per_token, attention_ns_per_pair and the overheads must not be negative, kv_capacity_tokens at least 1")
	}
	return nil
}

// StepTime is the calibrated step time; an empty step takes none.
func (c Calibrated) StepTime(s Step) time.Duration {
	tokens := s.DecodeSeqs + s.PrefillTokens
	if tokens <= 0 {
		return 0
	}
	mem := (c.WeightBytes + c.KVBytesPerToken*float64(s.KVTokens+s.PrefillContextTokens)) / (c.BandwidthBytesPerSec * c.MBU)
	comp := float64(tokens) / c.PrefillTPS
	sec := max(mem, comp) + c.AttentionNsPerPair*attentionPairs(s)/1e9 +
		(c.StepOverheadMs+c.SeqOverheadMs*float64(s.DecodeSeqs))/1000
	return time.Duration(sec * float64(time.Second))
}

// KVCapacityTokens is the KV cache the deployment holds.
func (c Calibrated) KVCapacityTokens() int { return c.KVCapacity }

// attentionPairs is the (query, key) pairs a step attends over: every
// decoding sequence's context, and for each prefill chunk p·(C − p/2),
// with C the context it ends, summed over the sequences
// (physics.Step.PrefillPairs, physics.Deployment.StepCost's count).
func attentionPairs(s Step) float64 {
	return float64(s.KVTokens) + physicsStep(s).PrefillPairs()
}

package sim

import (
	"errors"
	"time"
)

// Calibrated is a cost model fitted to a measured deployment (tokbench
// calibrate): a step reads the weights once and the KV of its context at
// the deployment's bandwidth times MBU, computes its prefill and decode
// tokens at PrefillTPS, takes the larger of the two, and adds a per-step
// and a per-sequence overhead:
//
//	step = max((W + KV·context) / (BW·MBU), (prefill + decode tokens) / PrefillTPS)
//	       + StepOverhead + SeqOverhead·decoding sequences
//
// Decode tokens count as compute at the prefill rate: the same FLOPs per
// token, so a batch that grows past the memory term turns compute-bound,
// as CPUs serving llama.cpp do at a few users.
type Calibrated struct {
	WeightBytes          float64 `json:"weight_bytes"`
	KVBytesPerToken      float64 `json:"kv_bytes_per_token"`
	KVCapacity           int     `json:"kv_capacity_tokens"`
	BandwidthBytesPerSec float64 `json:"bandwidth_bytes_per_sec"`
	MBU                  float64 `json:"mbu"`
	PrefillTPS           float64 `json:"prefill_tps"`
	StepOverheadMs       float64 `json:"step_overhead_ms"`
	SeqOverheadMs        float64 `json:"seq_overhead_ms"`
}

// Validate checks that the model can cost a step.
func (c Calibrated) Validate() error {
	switch {
	case !(c.WeightBytes > 0) || !(c.BandwidthBytesPerSec > 0) || !(c.MBU > 0) || !(c.PrefillTPS > 0):
		return errors.New("weight_bytes, bandwidth_bytes_per_sec, mbu and prefill_tps must be positive")
	case c.KVBytesPerToken < 0 || c.StepOverheadMs < 0 || c.SeqOverheadMs < 0 || c.KVCapacity < 1:
		return errors.New("kv_bytes_per_token and the overheads must not be negative, kv_capacity_tokens at least 1")
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
	sec := max(mem, comp) + (c.StepOverheadMs+c.SeqOverheadMs*float64(s.DecodeSeqs))/1000
	return time.Duration(sec * float64(time.Second))
}

// KVCapacityTokens is the KV cache the deployment holds.
func (c Calibrated) KVCapacityTokens() int { return c.KVCapacity }

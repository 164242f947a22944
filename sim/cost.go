package sim

import (
	"fmt"
	"time"

	"github.com/tokbench/tokbench/physics"
)

// PhysicsCost adapts a physics.Deployment to the engine's [Cost].
type PhysicsCost struct{ D physics.Deployment }

// StepTime is the deployment's roofline step time.
func (c PhysicsCost) StepTime(s Step) time.Duration { return c.D.StepTime(physicsStep(s)) }

func physicsStep(s Step) physics.Step {
	return physics.Step{
		DecodeSeqs: s.DecodeSeqs, KVTokens: s.KVTokens,
		PrefillTokens: s.PrefillTokens, PrefillContextTokens: s.PrefillContextTokens,
		PrefillAttentionPairs: s.PrefillAttentionPairs,
	}
}

// KVCapacityTokens is the deployment's KV cache size in tokens.
func (c PhysicsCost) KVCapacityTokens() int { return c.D.KVCapacityTokens() }

// Deployment looks up catalog names and returns the deployment they make.
// The KV cache is kept in BF16 (vLLM's default "auto" KV dtype for 16-bit
// and weight-only quantized models).
func Deployment(model, quant, hardware string, gpus int) (physics.Deployment, error) {
	m, err := physics.LookupModel(model)
	if err != nil {
		return physics.Deployment{}, fmt.Errorf("sim: %w", err)
	}
	p, err := physics.LookupPrecision(quant)
	if err != nil {
		return physics.Deployment{}, fmt.Errorf("sim: %w", err)
	}
	h, err := physics.LookupHardware(hardware)
	if err != nil {
		return physics.Deployment{}, fmt.Errorf("sim: %w", err)
	}
	kv, err := physics.LookupPrecision("bf16")
	if err != nil {
		return physics.Deployment{}, fmt.Errorf("sim: KV cache precision: %w", err)
	}
	if gpus < 1 {
		return physics.Deployment{}, fmt.Errorf("sim: gpus %d: must be >= 1", gpus)
	}
	return physics.Deployment{Model: m, Weights: p, KVCache: kv, Hardware: h, GPUs: gpus}, nil
}

// DeploymentCost is the physics cost model for catalog names.
func DeploymentCost(model, quant, hardware string, gpus int) (Cost, error) {
	d, err := Deployment(model, quant, hardware, gpus)
	if err != nil {
		return nil, err
	}
	return PhysicsCost{D: d}, nil
}

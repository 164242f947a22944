package sim

import (
	"errors"
	"fmt"
	"math"

	"github.com/tokbench/tokbench/physics"
)

// Preset is a simulated deployment as tokbench serve and simulate take it:
// the catalog's model, precision and hardware, the engine's batch limits,
// its seed and EOS draw, and speculative decoding (SpecDraftTokens 0: off).
type Preset struct {
	Model, Quant, Hardware string
	GPUs                   int
	MaxBatch               int
	MaxBatchedTokens       int
	Seed                   uint64
	MeanOutputTokens       int
	SpecDraftTokens        int
	SpecAcceptance         float64
	SpecDraftCost          float64
	// FrontEnd is the server's time outside the model's steps (the zero
	// value: none; VLLMFrontEnd for vLLM's).
	FrontEnd FrontEnd
}

// PresetError is a Preset field out of range or not in the catalog; Field
// is its flag's name ("gpus", "max-batched-tokens", …).
type PresetError struct {
	Field string
	Err   error
}

func (e *PresetError) Error() string { return e.Field + ": " + e.Err.Error() }
func (e *PresetError) Unwrap() error { return e.Err }

func presetErrorf(field, format string, args ...any) error {
	return &PresetError{Field: field, Err: fmt.Errorf(format, args...)}
}

// Config checks p and builds the server's configuration, with the
// deployment's cost model.
func (p Preset) Config() (Config, error) {
	cfg := DefaultConfig()
	switch {
	case p.GPUs < 1:
		return cfg, presetErrorf("gpus", "must be at least 1, got %d", p.GPUs)
	case p.MaxBatch < 1:
		return cfg, presetErrorf("max-batch", "must be at least 1, got %d", p.MaxBatch)
	case p.MaxBatchedTokens < 1:
		return cfg, presetErrorf("max-batched-tokens", "must be at least 1, got %d", p.MaxBatchedTokens)
	case p.MeanOutputTokens < 0:
		return cfg, presetErrorf("mean-output-tokens", "must be 0 or more, got %d", p.MeanOutputTokens)
	case p.SpecDraftTokens < 0:
		return cfg, presetErrorf("spec-draft-tokens", "must be 0 or more, got %d", p.SpecDraftTokens)
	case p.SpecAcceptance < 0 || p.SpecAcceptance > 1 || math.IsNaN(p.SpecAcceptance):
		return cfg, presetErrorf("spec-acceptance", "must be between 0 and 1, got %v", p.SpecAcceptance)
	case p.SpecDraftCost < 0 || math.IsNaN(p.SpecDraftCost):
		return cfg, presetErrorf("spec-draft-cost", "must be 0 or more, got %v", p.SpecDraftCost)
	case p.FrontEnd.Validate() != nil:
		return cfg, &PresetError{Field: "front-end", Err: p.FrontEnd.Validate()}
	case p.MaxBatchedTokens < 1+p.SpecDraftTokens:
		return cfg, presetErrorf("max-batched-tokens", "%d cannot hold one speculative step of %d tokens (--spec-draft-tokens + 1)",
			p.MaxBatchedTokens, 1+p.SpecDraftTokens)
	}
	cfg.Model, cfg.Quant, cfg.Hardware, cfg.GPUs = p.Model, p.Quant, p.Hardware, p.GPUs
	cfg.Engine = EngineConfig{
		MaxNumSeqs: p.MaxBatch, MaxBatchedTokens: p.MaxBatchedTokens, Seed: p.Seed,
		MeanOutputTokens: p.MeanOutputTokens, FrontEnd: p.FrontEnd,
	}
	if p.SpecDraftTokens > 0 {
		cfg.Engine.Spec = Spec{DraftTokens: p.SpecDraftTokens, Acceptance: p.SpecAcceptance, DraftCostRatio: p.SpecDraftCost}
	}
	cost, err := DeploymentCost(p.Model, p.Quant, p.Hardware, p.GPUs)
	if err != nil {
		if ue, ok := errors.AsType[*physics.UnknownError](err); ok {
			if field := map[string]string{"model": "model", "precision": "quant", "hardware": "hardware"}[ue.Kind]; field != "" {
				return cfg, &PresetError{Field: field, Err: ue}
			}
		}
		return cfg, err
	}
	if cost.KVCapacityTokens() < 2 {
		return cfg, presetErrorf("model", "%s in %s does not fit on %d× %s (raise --gpus or lower --quant)",
			p.Model, p.Quant, p.GPUs, p.Hardware)
	}
	cfg.Cost = cost
	return cfg, nil
}

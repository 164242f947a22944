package physics

import (
	"errors"
	"fmt"
)

// Spec names a deployment as the ceiling command takes it: a catalog
// model, a dense model's parameter count (ParamsB, with Model as its name)
// or a GGUF file; precisions of weights and KV cache; hardware, the
// engine whose calibration to use, GPUs; the context and prompt the
// figures are for; and a catalog file adding entries.
type Spec struct {
	Model                            string
	ParamsB                          float64
	GGUF                             string
	Quant, KVQuant, Hardware, Engine string
	GPUs, Context, PromptTokens      int
	Catalog                          string
	// Local is the machine's own entry (package machine) that Hardware
	// "local" names.
	Local *Hardware
}

// SpecError is a Spec field that cannot be resolved; Field is its flag's
// name ("model", "kv-quant", …).
type SpecError struct {
	Field string
	Err   error
}

func (e *SpecError) Error() string { return e.Field + ": " + e.Err.Error() }
func (e *SpecError) Unwrap() error { return e.Err }

// Resolve finds the deployment s names in the catalog, and returns it
// with the calibration's name and notes on what it assumed or lacks.
func Resolve(s Spec) (Deployment, string, []string, error) {
	var notes []string
	cat := Default()
	if s.Catalog != "" {
		var err error
		if cat, err = LoadCatalog(s.Catalog); err != nil {
			return Deployment{}, "", nil, &SpecError{"catalog", err}
		}
	}
	var m Model
	var w Precision
	var err error
	switch {
	case s.GGUF != "":
		var note string
		if m, w, note, err = FromGGUF(s.GGUF); err != nil {
			return Deployment{}, "", nil, &SpecError{"gguf", err}
		}
		notes = append(notes, note)
	case s.ParamsB > 0:
		if _, err := cat.LookupModel(s.Model); s.Model != "" && err == nil {
			return Deployment{}, "", nil, &SpecError{"params", fmt.Errorf("%q is a catalog model; give --model or --params, not both", s.Model)}
		}
		name := s.Model
		if name == "" {
			name = fmt.Sprintf("dense-%gb", s.ParamsB)
		}
		m = Model{Name: name, TotalParams: s.ParamsB * 1e9, ActiveParams: s.ParamsB * 1e9,
			Source: "--params: dense model, architecture unknown"}
		notes = append(notes, "--params: architecture unknown, so all parameters count as read per token and the KV cache is not computed")
	case s.Model == "":
		return Deployment{}, "", nil, &SpecError{"model", errors.New("required (or --params for a dense model of that many billion parameters)")}
	default:
		var err error
		if m, err = cat.LookupModel(s.Model); err != nil {
			return Deployment{}, "", nil, &SpecError{"model", err}
		}
	}
	if s.GGUF == "" {
		if w, err = cat.LookupPrecision(s.Quant); err != nil {
			return Deployment{}, "", nil, &SpecError{"quant", err}
		}
	}
	kv, err := cat.LookupPrecision(s.KVQuant)
	if err != nil {
		return Deployment{}, "", nil, &SpecError{"kv-quant", err}
	}
	var h Hardware
	switch {
	case s.Hardware == "local" && s.Local != nil:
		h = *s.Local
		notes = append(notes, "--hardware local: "+h.Source)
		if h.Doubt != "" {
			notes = append(notes, "DOUBTFUL bandwidth: "+h.Doubt)
		}
	default:
		if h, err = cat.LookupHardware(s.Hardware); err != nil {
			return Deployment{}, "", nil, &SpecError{"hardware", err}
		}
	}
	engine := "hardware default"
	if s.Engine != "" {
		e, err := cat.LookupEngine(s.Engine)
		if err != nil {
			return Deployment{}, "", nil, &SpecError{"engine", err}
		}
		h = e.Apply(h)
		engine = e.Name
	}
	if m.MaxContext > 0 && s.Context+s.PromptTokens > m.MaxContext && s.Context > m.MaxContext {
		notes = append(notes, fmt.Sprintf("--context %d exceeds %s's maximum context of %d", s.Context, m.Name, m.MaxContext))
	}
	if h.BF16FLOPS == 0 {
		notes = append(notes, fmt.Sprintf("%s has no FLOPs figure in the catalog: no compute term, no prefill floor", h.Name))
	}
	return Deployment{Model: m, Weights: w, KVCache: kv, Hardware: h, GPUs: s.GPUs}, engine, notes, nil
}

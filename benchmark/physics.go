package benchmark

import (
	"errors"
	"fmt"
	"strings"

	"github.com/tokbench/tokbench/metrics"
	"github.com/tokbench/tokbench/physics"
)

// Physics is the deployment a benchmark's numbers are judged against.
type Physics struct {
	Deployment physics.Deployment
	Desc       string // "llama-3.1-8b bf16 on 1× h100-sxm"
}

// ResolvePhysics finds the deployment from a model (a catalog id, or a
// served name such as meta-llama/Llama-3.1-8B-Instruct) or a dense model's
// parameter count in billions, a weight precision, hardware and GPUs. It
// returns nil without hardware, nil and a note when the model is not in
// the catalog, and an InputError naming --hardware or --quant when the
// catalog lacks them.
func ResolvePhysics(model string, paramsB float64, quant, hardware string, gpus int) (*Physics, string, error) {
	if hardware == "" {
		return nil, "", nil
	}
	h, err := physics.LookupHardware(hardware)
	if err != nil {
		return nil, "", UnknownInput("--hardware", err)
	}
	note := ""
	if quant == "" {
		quant = "bf16"
		note = "--quant not given: bf16 assumed for the ceiling and MBU"
	}
	w, err := physics.LookupPrecision(quant)
	if err != nil {
		return nil, "", UnknownInput("--quant", err)
	}
	kv, _ := physics.LookupPrecision("bf16")
	var m physics.Model
	switch {
	case paramsB > 0:
		m = physics.Model{Name: fmt.Sprintf("dense-%gb", paramsB), TotalParams: paramsB * 1e9, ActiveParams: paramsB * 1e9}
	default:
		var ok bool
		if m, ok = CatalogModel(model); !ok {
			return nil, fmt.Sprintf("no ceiling or MBU: model %q is not in the catalog (give --params in billions)", model), nil
		}
	}
	gpus = max(gpus, 1)
	return &Physics{
		Deployment: physics.Deployment{Model: m, Weights: w, KVCache: kv, Hardware: h, GPUs: gpus},
		Desc:       fmt.Sprintf("%s %s on %d× %s", m.Name, w.Name, gpus, h.Name),
	}, note, nil
}

// UnknownInput is the InputError for a name the physics catalog lacks,
// listing the names it knows.
func UnknownInput(flag string, err error) error {
	if ue, ok := errors.AsType[*physics.UnknownError](err); ok {
		return inputErrorf("%s: unknown %q (known: %s)", flag, ue.Name, strings.Join(ue.Known, ", "))
	}
	return inputErrorf("%s: %v", flag, err)
}

// CatalogModel matches a served model name such as
// "meta-llama/Llama-3.1-8B-Instruct" to a catalog id such as "llama-3.1-8b".
func CatalogModel(name string) (physics.Model, bool) {
	n := strings.ToLower(name)
	if i := strings.LastIndex(n, "/"); i >= 0 {
		n = n[i+1:]
	}
	n = strings.TrimPrefix(n, "meta-")
	for _, suffix := range []string{"-instruct", "-chat", "-it", "-hf"} {
		n = strings.TrimSuffix(n, suffix)
	}
	for _, cand := range []string{n, strings.ReplaceAll(n, "_", "-")} {
		if m, err := physics.LookupModel(cand); err == nil {
			return m, true
		}
	}
	return physics.Model{}, false
}

// annotate adds the physics of one level: ceiling, fraction and MBU.
func (p *Physics) annotate(lv *metrics.Level, contextTokens int) {
	ceil := p.Deployment.Ceiling(physics.Workload{ContextTokens: contextTokens, Batch: 1})
	ph := &metrics.Physics{
		Deployment: p.Desc, ContextTokens: contextTokens,
		BytesPerToken: ceil.BytesPerToken, DecodeTPSCeiling: ceil.DecodeTPSCeiling,
	}
	if lv.DecodeTPS.Count > 0 {
		batch := max(lv.Load.Concurrency, 1)
		ph.MBU = p.Deployment.AchievedMBU(lv.DecodeTPS.P50, batch, contextTokens)
		if ceil.DecodeTPSCeiling > 0 {
			ph.CeilingFraction = lv.DecodeTPS.P50 / ceil.DecodeTPSCeiling
		}
	}
	lv.Physics = ph
}

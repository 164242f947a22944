package cli

import (
	"fmt"
	"strings"

	"github.com/tokbench/tokbench/metrics"
	"github.com/tokbench/tokbench/physics"
)

// benchPhysics is the deployment a benchmark's numbers are judged against.
type benchPhysics struct {
	d    physics.Deployment
	desc string
}

// resolvePhysics finds the deployment from --model/--params, --quant,
// --hardware and --gpus. It returns nil and a note when the model is not in
// the catalog, and a usage error for a bad --hardware or --quant.
func resolvePhysics(model string, paramsB float64, quant, hardware string, gpus int) (*benchPhysics, string, error) {
	if hardware == "" {
		return nil, "", nil
	}
	h, err := physics.LookupHardware(hardware)
	if err != nil {
		return nil, "", unknownUsage("--hardware", err)
	}
	note := ""
	if quant == "" {
		quant = "bf16"
		note = "--quant not given: bf16 assumed for the ceiling and MBU"
	}
	w, err := physics.LookupPrecision(quant)
	if err != nil {
		return nil, "", unknownUsage("--quant", err)
	}
	kv, _ := physics.LookupPrecision("bf16")
	var m physics.Model
	switch {
	case paramsB > 0:
		m = physics.Model{Name: fmt.Sprintf("dense-%gb", paramsB), TotalParams: paramsB * 1e9, ActiveParams: paramsB * 1e9}
	default:
		var ok bool
		if m, ok = catalogModel(model); !ok {
			return nil, fmt.Sprintf("no ceiling or MBU: model %q is not in the catalog (give --params in billions)", model), nil
		}
	}
	gpus = max(gpus, 1)
	return &benchPhysics{
		d:    physics.Deployment{Model: m, Weights: w, KVCache: kv, Hardware: h, GPUs: gpus},
		desc: fmt.Sprintf("%s %s on %d× %s", m.Name, w.Name, gpus, h.Name),
	}, note, nil
}

// catalogModel matches a served model name such as
// "meta-llama/Llama-3.1-8B-Instruct" to a catalog id such as "llama-3.1-8b".
func catalogModel(name string) (physics.Model, bool) {
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
func (p *benchPhysics) annotate(lv *metrics.Level, contextTokens int) {
	ceil := p.d.Ceiling(physics.Workload{ContextTokens: contextTokens, Batch: 1})
	ph := &metrics.Physics{
		Deployment: p.desc, ContextTokens: contextTokens,
		BytesPerToken: ceil.BytesPerToken, DecodeTPSCeiling: ceil.DecodeTPSCeiling,
	}
	if lv.DecodeTPS.Count > 0 {
		batch := max(lv.Load.Concurrency, 1)
		ph.MBU = p.d.AchievedMBU(lv.DecodeTPS.P50, batch, contextTokens)
		if ceil.DecodeTPSCeiling > 0 {
			ph.CeilingFraction = lv.DecodeTPS.P50 / ceil.DecodeTPSCeiling
		}
	}
	lv.Physics = ph
}

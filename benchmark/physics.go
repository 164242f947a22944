package benchmark

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/tokbench/tokbench/machine"
	"github.com/tokbench/tokbench/metrics"
	"github.com/tokbench/tokbench/physics"
)

// Physics is the deployment a benchmark's numbers are judged against.
type Physics struct {
	Deployment physics.Deployment
	Desc       string // "llama-3.1-8b bf16 on 1× h100-sxm"
	// Source says where the model's bytes per token and the hardware's
	// bandwidth came from.
	Source string
	// Dense is true when the model is a parameter count taken as dense
	// (--params, a server's parameter count): an MoE model reads less.
	Dense bool
	// Speculative is true when the server said it decodes speculatively.
	Speculative bool
	// Slots is how many sequences the server decodes at once when it said
	// (llama.cpp's total_slots), 0 when not: past them requests wait, so
	// a step reads the KV cache of Slots sequences, not of every user.
	Slots int
}

// PhysicsInput is what a plan knows of the deployment: the hardware and
// GPUs, and the model as far as the flags say (a catalog model, a dense
// parameter count, a GGUF file, a precision). What it lacks, the run
// asks the server.
type PhysicsInput struct {
	Model, GGUF, Quant, Hardware string
	ParamsB                      float64
	GPUs                         int
	// Remeasure: --hardware local's bandwidth is measured now.
	Remeasure bool
}

// ResolvePhysics finds the deployment from the input alone: a GGUF file,
// a dense parameter count in billions, or a model in the catalog (a
// catalog id, or a served name such as meta-llama/Llama-3.1-8B-Instruct).
// It returns nil without hardware, nil and a note when the model is
// none of those (the run then asks the server), and an InputError
// naming the flag the catalog or the file fails.
func ResolvePhysics(in PhysicsInput) (*Physics, string, error) {
	if in.Hardware == "" {
		return nil, "", nil
	}
	// A name the catalog lacks is wrong whatever the model. This machine
	// is no name to check: its bandwidth is measured (or its cache
	// checked) once, by the deployment that uses it, so that a run has
	// one figure and one account of where it came from.
	if in.Hardware != "local" {
		if _, err := in.hardware(); err != nil {
			return nil, "", err
		}
	}
	switch {
	case in.GGUF != "":
		m, w, note, err := physics.FromGGUF(in.GGUF)
		if err != nil {
			return nil, "", fieldErrorf("PhysicsIn.GGUF", "%v", err)
		}
		return in.with(m, &w, note+fileAge(in.GGUF), false)
	case in.ParamsB > 0:
		m := physics.Model{Name: fmt.Sprintf("dense-%gb", in.ParamsB), TotalParams: in.ParamsB * 1e9, ActiveParams: in.ParamsB * 1e9}
		return in.with(m, nil, fmt.Sprintf("--params %g: a dense model, every parameter read per token", in.ParamsB), true)
	}
	if m, ok := CatalogModel(in.Model); ok {
		return in.with(m, nil, "model "+m.Name+" from the catalog", false)
	}
	return nil, fmt.Sprintf("no ceiling or MBU: model %q is not in the catalog and the server said nothing of its size (give --gguf FILE or --params in billions)", in.Model), nil
}

// with is the deployment of model m on the input's hardware, weights in
// w (nil: --quant, else bf16 assumed), m's source said in source.
func (in PhysicsInput) with(m physics.Model, w *physics.Precision, source string, dense bool) (*Physics, string, error) {
	h, err := in.hardware()
	if err != nil {
		return nil, "", err
	}
	note := ""
	if w == nil {
		quant := in.Quant
		if quant == "" {
			quant = "bf16"
			note = "--quant not given: bf16 assumed for the ceiling and MBU"
		}
		p, err := physics.LookupPrecision(quant)
		if err != nil {
			return nil, "", UnknownInput("PhysicsIn.Quant", err)
		}
		w = &p
	}
	kv, _ := physics.LookupPrecision("bf16")
	gpus := max(in.GPUs, 1)
	return &Physics{
		Deployment: physics.Deployment{Model: m, Weights: *w, KVCache: kv, Hardware: h, GPUs: gpus},
		Desc:       fmt.Sprintf("%s %s on %d× %s", m.Name, w.Name, gpus, h.Name),
		Source:     source + "; " + h.Name + ": " + h.Source,
		Dense:      dense,
	}, note, nil
}

func (in PhysicsInput) hardware() (physics.Hardware, error) {
	if in.Hardware == "local" {
		return LocalHardware(context.Background(), in.Remeasure)
	}
	h, err := physics.LookupHardware(in.Hardware)
	if err != nil {
		return h, UnknownInput("PhysicsIn.Hardware", err)
	}
	return h, nil
}

// FromServer finds the model from what the server said of it (probe
// facts): the GGUF file at llama.cpp's model_path when it can be read
// here (exact bytes per token), else a parameter count (Ollama's
// general.parameter_count, llama.cpp's n_params) at the precision the
// server names (Ollama's quantization level) or that its file size
// implies (llama.cpp's size ÷ n_params), else --quant. ok is false when
// the server said too little.
func (in PhysicsInput) FromServer(facts map[string]string, engine string) (ph *Physics, note string, ok bool, err error) {
	if path := facts["model_path"]; path != "" {
		if m, w, gnote, err := physics.FromGGUF(path); err == nil {
			ph, note, err := in.with(m, &w, fmt.Sprintf("%s's model_path %s: %s", engine, path, strings.TrimPrefix(gnote, "--gguf: "))+fileAge(path), false)
			return ph, note, err == nil, err
		}
	}
	params, _ := strconv.ParseFloat(facts["model_params"], 64)
	if params <= 0 {
		return nil, "", false, nil
	}
	m := physics.Model{Name: fmt.Sprintf("%s-%.3gb", cmp.Or(facts["model_family"], "model"), params/1e9), TotalParams: params, ActiveParams: params}
	source := fmt.Sprintf("%s reports %.4g B parameters, all taken as read per token (dense)", engine, params/1e9)
	var w *physics.Precision
	if q := strings.ToLower(facts["model_quantization"]); q != "" && in.Quant == "" {
		if p, err := physics.LookupPrecision(q); err == nil {
			w = &p
			source += ", " + q + " weights as it names them"
		}
	}
	if size, _ := strconv.ParseFloat(facts["model_size_bytes"], 64); w == nil && in.Quant == "" && size > 0 {
		w = &physics.Precision{Name: "server-size", BitsPerWeight: 8 * size / params,
			Source: fmt.Sprintf("%s's model size %.4g GB over its parameters", engine, size/1e9)}
		source += fmt.Sprintf(", %.3g bits per weight from its model size (%.4g GB)", w.BitsPerWeight, size/1e9)
	}
	ph, note, err = in.with(m, w, source, true)
	return ph, note, err == nil, err
}

// setFacts takes what the server said of how it decodes: speculatively,
// and how many sequences at once.
func (p *Physics) setFacts(facts map[string]string) {
	p.Speculative = facts["speculative"] == "true"
	if n, err := strconv.Atoi(facts["server_slots"]); err == nil && n > 0 {
		p.Slots = n
	}
}

// mbuNote explains an MBU above 100%: more than the hardware can read
// for one token per weight pass. Where the server or the model gives a
// reason it is named; otherwise the figure is flagged as impossible for
// the deployment as given.
func (p *Physics) mbuNote(mbu float64) string {
	if mbu <= 1 {
		return ""
	}
	pct := fmt.Sprintf("MBU %.0f%% is above what %s can read", 100*mbu, p.Deployment.Hardware.Name)
	var why []string
	if p.Speculative {
		why = append(why, "the server decodes speculatively, accepting several draft tokens per pass over the weights")
	}
	if p.Dense {
		why = append(why, "a mixture-of-experts model reads only its active experts per token (the parameter count was taken as dense)")
	}
	if len(why) > 0 {
		return pct + ": " + strings.Join(why, "; ")
	}
	return pct + " for " + p.Desc + ": impossible as given, so the model is smaller or more quantized than named, " +
		"the server decodes speculatively, or the hardware is faster than --hardware says"
}

// fileAge is ", file of DATE, AGE old" for the file at path: the age of
// the bytes per token a model file gives ("" when it cannot be read).
func fileAge(path string) string {
	st, err := os.Stat(path)
	if err != nil {
		return ""
	}
	return fmt.Sprintf(" (file of %s, %s old)", st.ModTime().UTC().Format("2006-01-02 15:04 UTC"), machine.Age(time.Since(st.ModTime())))
}

// LocalHardware is this machine as hardware (--hardware local): its
// memory bandwidth, the best quiet measurement cached per machine
// (machine.CacheFile, machine.Local), or measured now when remeasure
// is set or nothing quiet and recent is cached.
func LocalHardware(ctx context.Context, remeasure bool) (physics.Hardware, error) {
	path, _ := machine.CacheFile() // no cache directory: measured every time
	info, err := machine.Local(ctx, machine.LocalOptions{Path: path, Remeasure: remeasure})
	if err != nil {
		return physics.Hardware{}, fmt.Errorf("--hardware local: %w", err)
	}
	return info.Hardware(), nil
}

// UnknownInput is the InputError of field for a name the physics catalog
// lacks, listing the names it knows.
func UnknownInput(field string, err error) error {
	if ue, ok := errors.AsType[*physics.UnknownError](err); ok {
		return fieldErrorf(field, "unknown %q (known: %s)", ue.Name, strings.Join(ue.Known, ", "))
	}
	return fieldErrorf(field, "%v", err)
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
		if p.Slots > 0 {
			batch = min(batch, p.Slots)
		}
		ph.Batch = batch
		ph.MBU = p.Deployment.AchievedMBU(lv.DecodeTPS.P50, batch, contextTokens)
		if ceil.DecodeTPSCeiling > 0 {
			ph.CeilingFraction = lv.DecodeTPS.P50 / ceil.DecodeTPSCeiling
		}
	}
	d := p.Deployment
	ph.WeightBytes = d.Model.ReadParams(1) * d.Weights.BytesPerWeight()
	ph.KVBytesPerToken = d.BytesPerToken(1) - ph.WeightBytes
	ph.BandwidthBytesPerSec = float64(max(d.GPUs, 1)) * d.Hardware.BandwidthBytesPerSec
	ph.KVCapacityTokens = d.KVCapacityTokens()
	ph.Source, ph.Note = p.Source, p.mbuNote(ph.MBU)
	if doubt := d.Hardware.Doubt; doubt != "" {
		ph.Doubt = d.Hardware.Name + "'s bandwidth is doubtful: " + doubt
	}
	lv.Physics = ph
}

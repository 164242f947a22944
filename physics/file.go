package physics

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// catalogFile is the on-disk shape of a user catalog (YAML, or JSON, which
// the YAML decoder reads too). Figures use the units datasheets use: GB,
// TB/s, TFLOPS, billions of parameters, microseconds.
//
//	hardware:
//	  - name: my-gpu
//	    class: datacenter-gpu      # calibration to start from (default datacenter-gpu)
//	    memory_gb: 48
//	    bandwidth_tbps: 0.96
//	    bf16_tflops: 181
//	    mbu: 0.8                   # optional: overrides the class calibration
//	    source: vendor datasheet
//	models:
//	  - name: my-13b
//	    params_b: 13               # optional when the architecture is given
//	    layers: 40
//	    hidden: 5120
//	    heads: 40
//	    kv_heads: 40
//	    head_dim: 128
//	    vocab: 32000
//	    ffn: 13824
//	precisions:
//	  - name: q3_k_l
//	    bits_per_weight: 4.3
type catalogFile struct {
	Hardware   []hardwareFile  `yaml:"hardware"`
	Models     []modelFile     `yaml:"models"`
	Precisions []precisionFile `yaml:"precisions"`
}

type hardwareFile struct {
	Name               string   `yaml:"name"`
	Class              string   `yaml:"class"`
	MemoryGB           float64  `yaml:"memory_gb"`
	BandwidthTBps      float64  `yaml:"bandwidth_tbps"`
	BF16TFLOPS         float64  `yaml:"bf16_tflops"`
	FP8TFLOPS          float64  `yaml:"fp8_tflops"`
	MBU                *float64 `yaml:"mbu"`
	MFUPrefill         *float64 `yaml:"mfu_prefill"`
	MFUDecode          *float64 `yaml:"mfu_decode"`
	StepOverheadUs     *float64 `yaml:"step_overhead_us"`
	LayerOverheadUs    *float64 `yaml:"layer_overhead_us"`
	InterconnectGBps   float64  `yaml:"interconnect_gbps"` // link speed per direction
	AllReduceLatencyUs *float64 `yaml:"allreduce_latency_us"`
	AllReduceEff       *float64 `yaml:"allreduce_efficiency"` // fraction of interconnect_gbps an all-reduce reaches
	Source             string   `yaml:"source"`
}

type modelFile struct {
	Name            string  `yaml:"name"`
	ParamsB         float64 `yaml:"params_b"`
	ActiveParamsB   float64 `yaml:"active_params_b"`
	Layers          int     `yaml:"layers"`
	Hidden          int     `yaml:"hidden"`
	Heads           int     `yaml:"heads"`
	KVHeads         int     `yaml:"kv_heads"`
	HeadDim         int     `yaml:"head_dim"`
	Vocab           int     `yaml:"vocab"`
	MaxContext      int     `yaml:"max_context"`
	FFN             int     `yaml:"ffn"`
	FFNMatrices     int     `yaml:"ffn_matrices"`
	TiedEmbeddings  bool    `yaml:"tied_embeddings"`
	Experts         int     `yaml:"experts"`
	ExpertsPerToken int     `yaml:"experts_per_token"`
	SharedExperts   int     `yaml:"shared_experts"`
	ExpertFFN       int     `yaml:"expert_ffn"`
	MoELayers       int     `yaml:"moe_layers"`
	KVLoraRank      int     `yaml:"kv_lora_rank"`
	QKRopeHeadDim   int     `yaml:"qk_rope_head_dim"`
	SlidingWindow   int     `yaml:"sliding_window"`
	SlidingLayers   int     `yaml:"sliding_layers"`
	Source          string  `yaml:"source"`
}

type precisionFile struct {
	Name          string  `yaml:"name"`
	BitsPerWeight float64 `yaml:"bits_per_weight"`
	FP8Compute    bool    `yaml:"fp8_compute"`
	Source        string  `yaml:"source"`
}

// LoadCatalog reads a user catalog file (YAML or JSON) and returns the
// built-in catalog extended with its entries; an entry with a built-in name
// replaces the built-in one. Unknown keys and missing required figures are
// errors naming the file and the field.
func LoadCatalog(path string) (Catalog, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Catalog{}, fmt.Errorf("catalog: %w", err)
	}
	c := Default()
	if err := c.Add(path, data); err != nil {
		return Catalog{}, err
	}
	return c, nil
}

// Add decodes a catalog file's contents into c; name is used in errors.
func (c *Catalog) Add(name string, data []byte) error {
	var f catalogFile
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("catalog %s: %s", name, yamlMessage(err))
	}
	if c.Hardware == nil {
		c.Hardware = map[string]Hardware{}
	}
	if c.Models == nil {
		c.Models = map[string]Model{}
	}
	if c.Precisions == nil {
		c.Precisions = map[string]Precision{}
	}
	for i, hf := range f.Hardware {
		h, err := hf.hardware()
		if err != nil {
			return fmt.Errorf("catalog %s: hardware[%d] %s", name, i, err)
		}
		c.Hardware[h.Name] = h
	}
	for i, mf := range f.Models {
		m, err := mf.model()
		if err != nil {
			return fmt.Errorf("catalog %s: models[%d] %s", name, i, err)
		}
		c.Models[m.Name] = m
	}
	for i, pf := range f.Precisions {
		if pf.Name == "" {
			return fmt.Errorf("catalog %s: precisions[%d] name: missing", name, i)
		}
		if pf.BitsPerWeight <= 0 {
			return fmt.Errorf("catalog %s: precisions[%d] (%s) bits_per_weight: must be > 0", name, i, pf.Name)
		}
		c.Precisions[normalize(pf.Name)] = Precision{Name: normalize(pf.Name), BitsPerWeight: pf.BitsPerWeight, FP8Compute: pf.FP8Compute, Source: pf.Source}
	}
	return nil
}

var classEfficiency = map[string]Efficiency{
	ClassDatacenterGPU: effDatacenter,
	ClassConsumerGPU:   effConsumer,
	ClassApple:         effApple,
	ClassCPU:           effCPU,
	ClassSRAM:          effSRAM,
}

func micros(us float64) time.Duration { return time.Duration(us * float64(time.Microsecond)) }

func (hf hardwareFile) hardware() (Hardware, error) {
	if hf.Name == "" {
		return Hardware{}, errors.New("name: missing")
	}
	fail := func(field, msg string) (Hardware, error) {
		return Hardware{}, fmt.Errorf("(%s) %s: %s", hf.Name, field, msg)
	}
	if hf.BandwidthTBps <= 0 {
		return fail("bandwidth_tbps", "must be > 0")
	}
	if hf.MemoryGB < 0 || hf.BF16TFLOPS < 0 || hf.FP8TFLOPS < 0 || hf.InterconnectGBps < 0 {
		return fail("memory_gb/bf16_tflops/fp8_tflops/interconnect_gbps", "must not be negative")
	}
	class := hf.Class
	if class == "" {
		class = ClassDatacenterGPU
	}
	eff, ok := classEfficiency[class]
	if !ok {
		return fail("class", fmt.Sprintf("unknown %q (known: %s, %s, %s, %s, %s)", class,
			ClassDatacenterGPU, ClassConsumerGPU, ClassApple, ClassCPU, ClassSRAM))
	}
	for _, f := range []struct {
		name string
		v    *float64
		dst  *float64
	}{{"mbu", hf.MBU, &eff.MBU}, {"mfu_prefill", hf.MFUPrefill, &eff.MFUPrefill}, {"mfu_decode", hf.MFUDecode, &eff.MFUDecode}, {"allreduce_efficiency", hf.AllReduceEff, &eff.AllReduceEfficiency}} {
		if f.v == nil {
			continue
		}
		if *f.v <= 0 || *f.v > 1 {
			return fail(f.name, "must be in (0, 1]")
		}
		*f.dst = *f.v
	}
	for _, f := range []struct {
		name string
		v    *float64
		dst  *time.Duration
	}{{"step_overhead_us", hf.StepOverheadUs, &eff.StepOverhead}, {"layer_overhead_us", hf.LayerOverheadUs, &eff.LayerOverhead}, {"allreduce_latency_us", hf.AllReduceLatencyUs, &eff.AllReduceLatency}} {
		if f.v == nil {
			continue
		}
		if *f.v < 0 {
			return fail(f.name, "must not be negative")
		}
		*f.dst = micros(*f.v)
	}
	h := Hardware{
		Name: normalize(hf.Name), Class: class,
		MemoryBytes: hf.MemoryGB * gb, BandwidthBytesPerSec: hf.BandwidthTBps * tbps,
		BF16FLOPS: hf.BF16TFLOPS * tflops, FP8FLOPS: hf.FP8TFLOPS * tflops,
		InterconnectBytesPerSec: hf.InterconnectGBps * gbps,
		Source:                  hf.Source,
	}
	return h.WithEfficiency(eff), nil
}

func (mf modelFile) model() (Model, error) {
	if mf.Name == "" {
		return Model{}, errors.New("name: missing")
	}
	fail := func(field, msg string) (Model, error) {
		return Model{}, fmt.Errorf("(%s) %s: %s", mf.Name, field, msg)
	}
	for _, f := range []struct {
		name string
		v    int
	}{{"layers", mf.Layers}, {"hidden", mf.Hidden}, {"heads", mf.Heads}, {"kv_heads", mf.KVHeads}, {"head_dim", mf.HeadDim},
		{"vocab", mf.Vocab}, {"max_context", mf.MaxContext}, {"ffn", mf.FFN}, {"experts", mf.Experts},
		{"experts_per_token", mf.ExpertsPerToken}, {"expert_ffn", mf.ExpertFFN}, {"moe_layers", mf.MoELayers}} {
		if f.v < 0 {
			return fail(f.name, "must not be negative")
		}
	}
	if mf.Experts > 0 && (mf.ExpertsPerToken <= 0 || mf.ExpertsPerToken > mf.Experts) {
		return fail("experts_per_token", "must be in 1..experts")
	}
	m := Model{
		Name: normalize(mf.Name), TotalParams: mf.ParamsB * 1e9, ActiveParams: mf.ActiveParamsB * 1e9,
		Layers: mf.Layers, Hidden: mf.Hidden, Heads: mf.Heads, KVHeads: mf.KVHeads, HeadDim: mf.HeadDim,
		Vocab: mf.Vocab, MaxContext: mf.MaxContext, FFN: mf.FFN, FFNMatrices: mf.FFNMatrices, TiedEmbeddings: mf.TiedEmbeddings,
		Experts: mf.Experts, ExpertsPerToken: mf.ExpertsPerToken, SharedExperts: mf.SharedExperts, ExpertFFN: mf.ExpertFFN,
		MoELayers: mf.MoELayers, KVLoraRank: mf.KVLoraRank, QKRopeHeadDim: mf.QKRopeHeadDim,
		SlidingWindow: mf.SlidingWindow, SlidingLayers: mf.SlidingLayers,
		Source: mf.Source,
	}.withDerivedParams()
	if m.TotalParams <= 0 {
		return fail("params_b", "missing, and the architecture (layers, hidden, heads …) is not enough to derive it")
	}
	return m, nil
}

var yamlTypeName = regexp.MustCompile(` in type physics\.(\w+)File`)

// yamlMessage turns the decoder's multi-line error into one line that names
// the catalog section rather than Go types.
func yamlMessage(err error) string {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	msg = strings.TrimPrefix(msg, "unmarshal errors:\n  ")
	msg = strings.ReplaceAll(msg, "\n  ", "; ")
	msg = strings.ReplaceAll(msg, "\n", "; ")
	return yamlTypeName.ReplaceAllString(msg, " in a $1 entry")
}

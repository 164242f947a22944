package physics

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// Hardware classes group devices whose efficiencies are calibrated together.
const (
	ClassDatacenterGPU = "datacenter-gpu" // HBM GPUs and accelerators in serving engines (vLLM, TensorRT-LLM)
	ClassConsumerGPU   = "consumer-gpu"   // GDDR GPUs, measured with llama.cpp
	ClassApple         = "apple"          // Apple silicon unified memory, llama.cpp Metal
	ClassCPU           = "cpu"            // CPU sockets, llama.cpp
	ClassSRAM          = "sram"           // on-chip SRAM systems (Groq, Cerebras); not calibrated
)

// Hardware is one device (a GPU, an accelerator or a CPU socket): its peak
// figures and the calibrated fractions of them an engine achieves.
type Hardware struct {
	Name                 string  // catalog id, lowercase-hyphen
	Class                string  // one of the Class constants; selects the calibration
	MemoryBytes          float64 // per device
	BandwidthBytesPerSec float64 // peak memory bandwidth per device
	BF16FLOPS, FP8FLOPS  float64 // dense peak per device; 0 = unknown

	MBU        float64 // calibrated achievable fraction of bandwidth in decode
	MFUPrefill float64 // achievable fraction of peak FLOP/s in prefill
	MFUDecode  float64 // achievable fraction of peak FLOP/s in (large-batch) decode

	StepOverhead  time.Duration // per engine iteration (scheduling, sampling, launch)
	LayerOverhead time.Duration // per layer per iteration (kernel launches, norms)

	InterconnectBytesPerSec float64       // link speed per direction, for tensor-parallel all-reduce (NVLink etc.)
	AllReduceLatency        time.Duration // fixed cost of one all-reduce (launch + synchronisation)
	// AllReduceEfficiency is the fraction of InterconnectBytesPerSec an
	// all-reduce reaches as bus bandwidth (its 2(g−1)/g of the message per
	// second); 0 means 1.
	AllReduceEfficiency float64

	Source string
	// Doubt, when not empty, says why the figures may not hold (a
	// bandwidth measured on a busy machine): what is computed from them
	// must say so.
	Doubt string
}

// Precision is a storage format for weights or KV cache.
type Precision struct {
	Name          string
	BitsPerWeight float64 // including block scales and zero points
	// FP8Compute means matrix multiplies run on FP8 tensor cores (W8A8 FP8);
	// otherwise weights are dequantised and multiplied in BF16.
	FP8Compute bool
	Source     string
}

// BytesPerWeight is BitsPerWeight / 8.
func (p Precision) BytesPerWeight() float64 { return p.BitsPerWeight / 8 }

// Model is a transformer architecture. Zero TotalParams / ActiveParams are
// derived from the architecture by the catalog (see ArchParams).
type Model struct {
	Name                                                            string
	TotalParams, ActiveParams                                       float64
	Layers, Hidden, Heads, KVHeads, HeadDim, Vocab, MaxContext, FFN int
	TiedEmbeddings                                                  bool
	// FFNMatrices is the number of d×FFN matrices per MLP: 3 for gated
	// (SwiGLU/GeGLU) MLPs, 2 for a plain MLP (MPT); 0 means 3.
	FFNMatrices int

	// Mixture of experts. ExpertFFN is the hidden size of one routed (and
	// shared) expert. MoELayers is how many layers have routed experts; 0 means
	// all of them when Experts > 0. Dense layers use FFN.
	Experts, ExpertsPerToken, SharedExperts int
	ExpertFFN                               int
	MoELayers                               int

	// Multi-head latent attention (DeepSeek): the KV cache holds a compressed
	// latent of KVLoraRank plus a rotary key of QKRopeHeadDim per layer.
	KVLoraRank, QKRopeHeadDim int

	// Sliding-window attention on SlidingLayers of the layers: those layers
	// keep (and read) at most SlidingWindow tokens of KV.
	SlidingWindow, SlidingLayers int

	Source string
}

// Catalog holds named hardware, models, precisions and engines. The zero
// value is empty; Default returns the built-in catalog.
type Catalog struct {
	Hardware   map[string]Hardware
	Models     map[string]Model
	Precisions map[string]Precision
	Engines    map[string]Engine
}

var defaultCatalog = buildDefault()

func buildDefault() Catalog {
	c := Catalog{
		Hardware:   map[string]Hardware{},
		Models:     map[string]Model{},
		Precisions: map[string]Precision{},
		Engines:    map[string]Engine{},
	}
	for _, h := range builtinHardware {
		c.Hardware[h.Name] = h
	}
	for _, m := range builtinModels {
		c.Models[m.Name] = m.withDerivedParams()
	}
	for _, a := range modelAliases {
		c.Models[a[0]] = renamed(c.Models[a[1]], a[0])
	}
	for _, p := range builtinPrecisions {
		c.Precisions[p.Name] = p
	}
	for _, e := range builtinEngines {
		c.Engines[e.Name] = e
	}
	return c
}

func renamed(m Model, name string) Model {
	m.Name = name
	return m
}

// Default returns a copy of the built-in catalog; changing it does not
// change the package-level lookups.
func Default() Catalog { return defaultCatalog.Clone() }

// Clone returns a catalog with copies of c's maps.
func (c Catalog) Clone() Catalog {
	return Catalog{
		Hardware:   maps.Clone(c.Hardware),
		Models:     maps.Clone(c.Models),
		Precisions: maps.Clone(c.Precisions),
		Engines:    maps.Clone(c.Engines),
	}
}

// LookupHardware finds hardware in the built-in catalog.
func LookupHardware(name string) (Hardware, error) { return defaultCatalog.LookupHardware(name) }

// LookupModel finds a model in the built-in catalog.
func LookupModel(name string) (Model, error) { return defaultCatalog.LookupModel(name) }

// LookupPrecision finds a precision in the built-in catalog.
func LookupPrecision(name string) (Precision, error) { return defaultCatalog.LookupPrecision(name) }

// LookupEngine finds an engine profile in the built-in catalog.
func LookupEngine(name string) (Engine, error) { return defaultCatalog.LookupEngine(name) }

// UnknownError reports a name missing from the catalog, with the known ones.
type UnknownError struct {
	Kind  string // "hardware", "model", "precision", "engine"
	Name  string
	Known []string
}

func (e *UnknownError) Error() string {
	return fmt.Sprintf("unknown %s %q (known: %s)", e.Kind, e.Name, strings.Join(e.Known, ", "))
}

func lookup[T any](m map[string]T, kind, name string) (T, error) {
	key := normalize(name)
	if v, ok := m[key]; ok {
		return v, nil
	}
	var zero T
	return zero, &UnknownError{Kind: kind, Name: name, Known: slices.Sorted(maps.Keys(m))}
}

// normalize maps user spellings ("H100-SXM", "Q4_K_M", "llama-3.1-8B") to ids.
func normalize(name string) string {
	return strings.ToLower(strings.TrimSpace(name))
}

// LookupHardware finds hardware by id.
func (c Catalog) LookupHardware(name string) (Hardware, error) {
	return lookup(c.Hardware, "hardware", name)
}

// LookupModel finds a model by id.
func (c Catalog) LookupModel(name string) (Model, error) {
	return lookup(c.Models, "model", name)
}

// LookupPrecision finds a precision by id.
func (c Catalog) LookupPrecision(name string) (Precision, error) {
	return lookup(c.Precisions, "precision", name)
}

// LookupEngine finds an engine profile by id.
func (c Catalog) LookupEngine(name string) (Engine, error) {
	return lookup(c.Engines, "engine", name)
}

// HardwareNames lists the hardware ids in c, sorted.
func (c Catalog) HardwareNames() []string { return slices.Sorted(maps.Keys(c.Hardware)) }

// ModelNames lists the model ids in c, sorted.
func (c Catalog) ModelNames() []string { return slices.Sorted(maps.Keys(c.Models)) }

// PrecisionNames lists the precision ids in c, sorted.
func (c Catalog) PrecisionNames() []string { return slices.Sorted(maps.Keys(c.Precisions)) }

// EngineNames lists the engine ids in c, sorted.
func (c Catalog) EngineNames() []string { return slices.Sorted(maps.Keys(c.Engines)) }

// Efficiency is the calibrated part of a Hardware entry.
type Efficiency struct {
	MBU, MFUPrefill, MFUDecode  float64
	StepOverhead, LayerOverhead time.Duration
	AllReduceLatency            time.Duration
	AllReduceEfficiency         float64 // fraction of the interconnect's link speed; 0 means 1
}

// Efficiency returns h's calibrated efficiencies.
func (h Hardware) Efficiency() Efficiency {
	return Efficiency{
		MBU: h.MBU, MFUPrefill: h.MFUPrefill, MFUDecode: h.MFUDecode,
		StepOverhead: h.StepOverhead, LayerOverhead: h.LayerOverhead,
		AllReduceLatency: h.AllReduceLatency, AllReduceEfficiency: h.AllReduceEfficiency,
	}
}

// WithEfficiency returns h with its calibrated efficiencies replaced by e.
func (h Hardware) WithEfficiency(e Efficiency) Hardware {
	h.MBU, h.MFUPrefill, h.MFUDecode = e.MBU, e.MFUPrefill, e.MFUDecode
	h.StepOverhead, h.LayerOverhead, h.AllReduceLatency = e.StepOverhead, e.LayerOverhead, e.AllReduceLatency
	h.AllReduceEfficiency = e.AllReduceEfficiency
	return h
}

// Engine is an inference engine whose kernels reach different efficiencies
// than the serving engines a hardware entry is calibrated for. The built-in
// hardware is calibrated for the engine its class is usually measured with:
// vLLM / TensorRT-LLM on datacenter GPUs, llama.cpp elsewhere.
type Engine struct {
	Name string
	// ByClass replaces a hardware entry's efficiencies for the hardware
	// classes listed; other classes keep the hardware's own.
	ByClass map[string]Efficiency
	// AllReduceByClass replaces only the tensor-parallel all-reduce figures
	// (an engine's collective library differs while its kernels do not).
	AllReduceByClass map[string]AllReduce
	Source           string
}

// AllReduce is how an engine's tensor-parallel all-reduce performs: a fixed
// latency per operation and the fraction of the interconnect's link speed
// it reaches as bus bandwidth.
type AllReduce struct {
	Latency    time.Duration
	Efficiency float64
}

// Apply returns h with the efficiencies e reaches on h's class.
func (e Engine) Apply(h Hardware) Hardware {
	if eff, ok := e.ByClass[h.Class]; ok {
		h = h.WithEfficiency(eff)
	}
	if ar, ok := e.AllReduceByClass[h.Class]; ok {
		h.AllReduceLatency, h.AllReduceEfficiency = ar.Latency, ar.Efficiency
	}
	return h
}

package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/tokbench/tokbench/benchmark"
	"github.com/tokbench/tokbench/physics"
)

type ceilingFlags struct {
	model, quant, kvQuant, hardware, engine string
	gpus, context, batch, promptTokens      int
	claim, paramsB                          float64
	catalog, format                         string
	gguf                                    string
}

func newCeilingCmd(env Env) *cobra.Command {
	f := &ceilingFlags{}
	cmd := &cobra.Command{
		Use:   "ceiling",
		Short: "Physical speed limits of a model on hardware; judges a claimed tokens/s",
		Long: `ceiling computes what the hardware allows a model to do: bytes read per
decoded token, the single-stream decode ceiling (memory bandwidth ÷ bytes per
token), the aggregate ceiling at a batch size and the batch where compute
overtakes memory, the KV-cache size and how many tokens fit, and the prefill
time floor for a prompt (a TTFT floor). Ceilings assume 100% of peak
bandwidth and FLOPs; "expected" figures use the calibrated efficiencies of the
hardware (see docs/physics.md).

--claim judges a claimed tokens/s: within the single-stream ceiling, or only
possible as batched aggregate throughput, with speculative decoding, a
mixture-of-experts model, a smaller model or lower precision, or more GPUs.`,
		Example: `  tokbench ceiling --model llama-3.1-70b --quant fp8 --hardware h100-sxm --gpus 2
  tokbench ceiling --params 70 --quant int8 --hardware h100-sxm --claim 120
  tokbench ceiling --model llama-3.1-8b --batch 64 --context 2048 --format json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runCeiling(env, f, cmd)
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&f.model, "model", "", "model from the catalog (e.g. llama-3.1-8b); with --params, a name for the custom model")
	fs.StringVar(&f.quant, "quant", "bf16", "weight precision (bf16, fp8, int8, int4, q4_k_m, mxfp4 …)")
	fs.StringVar(&f.kvQuant, "kv-quant", "bf16", "KV-cache precision")
	fs.StringVar(&f.hardware, "hardware", "h100-sxm", "accelerator from the catalog")
	fs.IntVar(&f.gpus, "gpus", 1, "devices, tensor parallel")
	fs.IntVar(&f.context, "context", 0, "tokens of context (KV cache) per stream")
	fs.IntVar(&f.batch, "batch", 1, "concurrent streams for the aggregate ceiling")
	fs.IntVar(&f.promptTokens, "prompt-tokens", 1024, "prompt tokens for the prefill (TTFT) floor; 0 skips it")
	fs.Float64Var(&f.claim, "claim", 0, "claimed decode tokens/s to judge")
	fs.Float64Var(&f.paramsB, "params", 0, "billions of parameters of a dense model not in the catalog")
	fs.StringVar(&f.engine, "engine", "", "engine whose calibration to use for expected figures (vllm, tensorrt-llm, llama.cpp …); default: the hardware's")
	fs.StringVar(&f.catalog, "catalog", "", "YAML or JSON file adding hardware, models and precisions")
	fs.StringVar(&f.format, "format", "table", "output: table or json")
	fs.StringVar(&f.gguf, "gguf", "", "GGUF model file: architecture and exact bytes per token from its tensor types and shapes (instead of --model/--quant)")
	return cmd
}

// ceilingDeployment turns the flags into a deployment, or a usage error
// naming the flag.
func ceilingDeployment(f *ceilingFlags, cmd *cobra.Command) (physics.Deployment, string, []string, error) {
	var notes []string
	switch {
	case f.format != "table" && f.format != "json":
		return physics.Deployment{}, "", nil, usagef("--format: unknown %q (known: table, json)", f.format)
	case f.gpus < 1:
		return physics.Deployment{}, "", nil, usagef("--gpus: %d is below 1", f.gpus)
	case f.batch < 1:
		return physics.Deployment{}, "", nil, usagef("--batch: %d is below 1", f.batch)
	case f.context < 0:
		return physics.Deployment{}, "", nil, usagef("--context: %d is negative", f.context)
	case f.promptTokens < 0:
		return physics.Deployment{}, "", nil, usagef("--prompt-tokens: %d is negative", f.promptTokens)
	case cmd.Flags().Changed("claim") && !(f.claim > 0):
		return physics.Deployment{}, "", nil, usagef("--claim: %g is not a positive tokens/s", f.claim)
	case cmd.Flags().Changed("params") && !(f.paramsB > 0):
		return physics.Deployment{}, "", nil, usagef("--params: %g is not a positive number of billions", f.paramsB)
	}
	cat := physics.Default()
	if f.catalog != "" {
		var err error
		if cat, err = physics.LoadCatalog(f.catalog); err != nil {
			return physics.Deployment{}, "", nil, usagef("--catalog: %v", err)
		}
	}
	var m physics.Model
	var w physics.Precision
	var err error
	switch {
	case f.gguf != "":
		if m, w, notes, err = ggufModel(f.gguf, notes); err != nil {
			return physics.Deployment{}, "", nil, usagef("--gguf: %v", err)
		}
	case f.paramsB > 0:
		if _, err := cat.LookupModel(f.model); f.model != "" && err == nil {
			return physics.Deployment{}, "", nil, usagef("--params: %q is a catalog model; give --model or --params, not both", f.model)
		}
		name := f.model
		if name == "" {
			name = fmt.Sprintf("dense-%gb", f.paramsB)
		}
		m = physics.Model{Name: name, TotalParams: f.paramsB * 1e9, ActiveParams: f.paramsB * 1e9,
			Source: "--params: dense model, architecture unknown"}
		notes = append(notes, "--params: architecture unknown, so all parameters count as read per token and the KV cache is not computed")
	case f.model == "":
		return physics.Deployment{}, "", nil, usagef("--model: required (or --params for a dense model of that many billion parameters)")
	default:
		var err error
		if m, err = cat.LookupModel(f.model); err != nil {
			return physics.Deployment{}, "", nil, benchmark.UnknownInput("--model", err)
		}
	}
	if f.gguf == "" {
		if w, err = cat.LookupPrecision(f.quant); err != nil {
			return physics.Deployment{}, "", nil, benchmark.UnknownInput("--quant", err)
		}
	}
	kv, err := cat.LookupPrecision(f.kvQuant)
	if err != nil {
		return physics.Deployment{}, "", nil, benchmark.UnknownInput("--kv-quant", err)
	}
	h, err := cat.LookupHardware(f.hardware)
	if err != nil {
		return physics.Deployment{}, "", nil, benchmark.UnknownInput("--hardware", err)
	}
	engine := "hardware default"
	if f.engine != "" {
		e, err := cat.LookupEngine(f.engine)
		if err != nil {
			return physics.Deployment{}, "", nil, benchmark.UnknownInput("--engine", err)
		}
		h = e.Apply(h)
		engine = e.Name
	}
	if m.MaxContext > 0 && f.context+f.promptTokens > m.MaxContext && f.context > m.MaxContext {
		notes = append(notes, fmt.Sprintf("--context %d exceeds %s's maximum context of %d", f.context, m.Name, m.MaxContext))
	}
	if h.BF16FLOPS == 0 {
		notes = append(notes, fmt.Sprintf("%s has no FLOPs figure in the catalog: no compute term, no prefill floor", h.Name))
	}
	return physics.Deployment{Model: m, Weights: w, KVCache: kv, Hardware: h, GPUs: f.gpus}, engine, notes, nil
}

// ceilingJSON is the --format json output; field names are a contract.
type ceilingJSON struct {
	Model        string  `json:"model"`
	TotalParams  float64 `json:"total_params"`
	ActiveParams float64 `json:"active_params"`
	Quant        string  `json:"quant"`
	KVQuant      string  `json:"kv_quant"`
	Hardware     string  `json:"hardware"`
	GPUs         int     `json:"gpus"`
	Engine       string  `json:"engine"`

	WeightBytes     float64 `json:"weight_bytes"`
	ContextTokens   int     `json:"context_tokens"`
	BytesPerToken   float64 `json:"bytes_per_token"`
	KVBytesPerToken float64 `json:"kv_bytes_per_token"`

	DecodeTPSCeiling  float64 `json:"decode_tps_ceiling"`
	DecodeTPSExpected float64 `json:"decode_tps_expected"`
	TPOTMsExpected    float64 `json:"tpot_ms_expected"`

	Batch                  int     `json:"batch"`
	AggregateTPSCeiling    float64 `json:"aggregate_tps_ceiling"`
	AggregateTPSExpected   float64 `json:"aggregate_tps_expected"`
	PerStreamTPSExpected   float64 `json:"per_stream_tps_expected"`
	BatchComputeBound      bool    `json:"batch_compute_bound"`
	ComputeBoundBatch      int     `json:"compute_bound_batch"`
	ComputeBoundTPSCeiling float64 `json:"compute_bound_tps_ceiling"`

	KVCacheBytes      float64 `json:"kv_cache_bytes"`
	KVCapacityTokens  int     `json:"kv_capacity_tokens"`
	MaxBatchAtContext int     `json:"max_batch_at_context"`
	FitsInMemory      bool    `json:"fits_in_memory"`

	PromptTokens      int     `json:"prompt_tokens"`
	PrefillFloorMs    float64 `json:"prefill_floor_ms"`
	PrefillExpectedMs float64 `json:"prefill_expected_ms"`

	Verdict *verdictJSON `json:"verdict,omitempty"`
	Notes   []string     `json:"notes,omitempty"`

	flopsKnown bool
}

type verdictJSON struct {
	ClaimTPS           float64    `json:"claim_tps"`
	WithinSingleStream bool       `json:"within_single_stream_ceiling"`
	FractionOfCeiling  float64    `json:"fraction_of_ceiling"`
	RequiredMBU        float64    `json:"required_mbu"`
	Summary            string     `json:"summary"`
	Paths              []pathJSON `json:"paths,omitempty"`
}

type pathJSON struct {
	How      string `json:"how"`
	Possible bool   `json:"possible"`
	Detail   string `json:"detail"`
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func runCeiling(env Env, f *ceilingFlags, cmd *cobra.Command) error {
	d, engine, notes, err := ceilingDeployment(f, cmd)
	if err != nil {
		return err
	}
	c := d.Ceiling(physics.Workload{ContextTokens: f.context, Batch: f.batch, PromptTokens: f.promptTokens})
	out := ceilingJSON{
		Model: d.Model.Name, TotalParams: d.Model.TotalParams, ActiveParams: d.Model.ActiveParams,
		Quant: d.Weights.Name, KVQuant: d.KVCache.Name, Hardware: d.Hardware.Name, GPUs: f.gpus, Engine: engine,
		WeightBytes: c.WeightBytes, ContextTokens: c.ContextTokens, BytesPerToken: c.BytesPerToken, KVBytesPerToken: c.KVBytesPerToken,
		DecodeTPSCeiling: c.DecodeTPSCeiling, DecodeTPSExpected: c.DecodeTPSExpected, TPOTMsExpected: ms(c.TPOTExpected),
		Batch: c.Batch, AggregateTPSCeiling: c.AggregateTPSCeiling, AggregateTPSExpected: c.AggregateTPSExpected,
		PerStreamTPSExpected: c.PerStreamTPSExpected, BatchComputeBound: c.BatchComputeBound,
		ComputeBoundBatch: c.ComputeBoundBatch, ComputeBoundTPSCeiling: c.ComputeBoundTPSCeiling,
		KVCacheBytes: c.KVCacheBytes, KVCapacityTokens: c.KVCapacityTokens, MaxBatchAtContext: c.MaxBatchAtContext,
		FitsInMemory: c.FitsInMemory,
		PromptTokens: c.PromptTokens, PrefillFloorMs: ms(c.PrefillFloor), PrefillExpectedMs: ms(c.PrefillExpected),
		Notes: notes, flopsKnown: d.Hardware.BF16FLOPS > 0,
	}
	if !c.FitsInMemory {
		out.Notes = append(out.Notes, fmt.Sprintf("does not fit: %.1f GB of weights and %.1f GB of KV cache against %.1f GB usable on %d× %s",
			c.WeightBytes/1e9, c.KVCacheBytes/1e9, float64(f.gpus)*d.Hardware.MemoryBytes*physics.MemoryUtilization/1e9, f.gpus, d.Hardware.Name))
	}
	if cmd.Flags().Changed("claim") {
		v := c.Judge(f.claim)
		vj := &verdictJSON{ClaimTPS: v.ClaimTPS, WithinSingleStream: v.WithinSingleStream,
			FractionOfCeiling: v.FractionOfCeiling, RequiredMBU: v.RequiredMBU, Summary: v.Summary}
		for _, p := range v.Paths {
			vj.Paths = append(vj.Paths, pathJSON(p))
		}
		out.Verdict = vj
	}
	if f.format == "json" {
		enc := json.NewEncoder(env.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	}
	return writeCeilingTable(env.Stdout, out)
}

func fmtBytes(b float64) string {
	switch {
	case b >= 1e12:
		return fmt.Sprintf("%.2f TB", b/1e12)
	case b >= 1e9:
		return fmt.Sprintf("%.2f GB", b/1e9)
	case b >= 1e6:
		return fmt.Sprintf("%.2f MB", b/1e6)
	case b >= 1e3:
		return fmt.Sprintf("%.1f kB", b/1e3)
	}
	return fmt.Sprintf("%.0f B", b)
}

// fmtNum prints a count with thousands separators.
func fmtNum(v float64) string {
	s := fmt.Sprintf("%.0f", math.Round(v))
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, r := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

func fmtTPS(v float64) string {
	if v >= 1000 {
		return fmtNum(v) + " tok/s"
	}
	return fmt.Sprintf("%.1f tok/s", v)
}

func writeCeilingTable(w io.Writer, o ceilingJSON) error {
	params := fmt.Sprintf("%.3gB params", o.TotalParams/1e9)
	if o.ActiveParams > 0 && o.ActiveParams < o.TotalParams {
		params = fmt.Sprintf("%.3gB params, %.3gB active", o.TotalParams/1e9, o.ActiveParams/1e9)
	}
	fmt.Fprintf(w, "%s (%s) · %s weights · %s KV · %d× %s · calibration: %s\n\n",
		o.Model, params, o.Quant, o.KVQuant, o.GPUs, o.Hardware, o.Engine)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	row := func(k, v string) { fmt.Fprintf(tw, "%s\t%s\n", k, v) }
	fits := "fits"
	if !o.FitsInMemory {
		fits = "DOES NOT FIT"
	}
	row("weights", fmt.Sprintf("%s (%s with the KV cache below)", fmtBytes(o.WeightBytes), fits))
	row("bytes read per token", fmt.Sprintf("%s at %d tokens of context", fmtBytes(o.BytesPerToken), o.ContextTokens))
	if o.KVBytesPerToken > 0 {
		row("KV cache per token", fmtBytes(o.KVBytesPerToken))
		kv := fmt.Sprintf("%s tokens fit", fmtNum(float64(o.KVCapacityTokens)))
		if o.ContextTokens > 0 {
			kv += fmt.Sprintf(" (%s streams at %d tokens)", fmtNum(float64(o.MaxBatchAtContext)), o.ContextTokens)
		}
		row("KV cache capacity", kv)
		row(fmt.Sprintf("KV cache, batch %d", o.Batch), fmtBytes(o.KVCacheBytes))
	} else {
		row("KV cache per token", "unknown (no architecture)")
	}
	row("single-stream decode", fmt.Sprintf("ceiling %s · expected %s (TPOT %.2f ms)", fmtTPS(o.DecodeTPSCeiling), fmtTPS(o.DecodeTPSExpected), o.TPOTMsExpected))
	bound := "memory-bound"
	if o.BatchComputeBound {
		bound = "compute-bound"
	}
	row(fmt.Sprintf("batch %d aggregate", o.Batch), fmt.Sprintf("ceiling %s · expected %s (%s per stream, %s)",
		fmtTPS(o.AggregateTPSCeiling), fmtTPS(o.AggregateTPSExpected), fmtTPS(o.PerStreamTPSExpected), bound))
	switch {
	case o.ComputeBoundBatch > 0:
		row("compute overtakes memory", fmt.Sprintf("at batch %s (aggregate ceiling %s)", fmtNum(float64(o.ComputeBoundBatch)), fmtTPS(o.ComputeBoundTPSCeiling)))
	case !o.flopsKnown:
		row("compute overtakes memory", "unknown (no FLOPs figure)")
	default:
		row("compute overtakes memory", fmt.Sprintf("never at %d tokens of context: each stream's KV reads take longer than its FLOPs", o.ContextTokens))
	}
	if o.PromptTokens > 0 {
		prefill := "unknown (no FLOPs figure)"
		if o.flopsKnown {
			prefill = fmt.Sprintf("TTFT floor ≥ %.1f ms · expected %.1f ms", o.PrefillFloorMs, o.PrefillExpectedMs)
		}
		row(fmt.Sprintf("prefill, %d tokens", o.PromptTokens), prefill)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if v := o.Verdict; v != nil {
		fmt.Fprintf(w, "\nclaim %s: %s\n", fmtTPS(v.ClaimTPS), v.Summary)
		for _, p := range v.Paths {
			mark := "no "
			if p.Possible {
				mark = "yes"
			}
			fmt.Fprintf(w, "  %s  %-27s %s\n", mark, p.How, p.Detail)
		}
	}
	for _, n := range o.Notes {
		fmt.Fprintf(w, "\nnote: %s", n)
	}
	if len(o.Notes) > 0 {
		fmt.Fprintln(w)
	}
	return nil
}

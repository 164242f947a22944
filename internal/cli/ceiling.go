package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/tokbench/tokbench/benchmark"
	"github.com/tokbench/tokbench/physics"
	"github.com/tokbench/tokbench/report"
	"github.com/tokbench/tokbench/sim"
)

type ceilingFlags struct {
	model, quant, kvQuant, hardware, engine string
	gpus, context, batch, promptTokens      int
	claim, paramsB                          float64
	catalog, format                         string
	gguf                                    string
	remeasure                               bool
	// images of imageSize and audioSeconds of sound join the prompt.
	images       int
	imageSize    string
	audioSeconds float64
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
	fs.StringVar(&f.hardware, "hardware", "h100-sxm", "accelerator from the catalog, or local: this machine, its memory bandwidth measured (and cached)")
	fs.IntVar(&f.gpus, "gpus", 1, "devices, tensor parallel")
	fs.IntVar(&f.context, "context", 0, "tokens of context (KV cache) per stream")
	fs.IntVar(&f.batch, "batch", 1, "concurrent streams for the aggregate ceiling")
	fs.IntVar(&f.promptTokens, "prompt-tokens", 1024, "prompt tokens for the prefill (TTFT) floor; 0 skips it")
	fs.Float64Var(&f.claim, "claim", 0, "claimed decode tokens/s to judge")
	fs.Float64Var(&f.paramsB, "params", 0, "billions of parameters of a dense model not in the catalog")
	fs.StringVar(&f.engine, "engine", "", "engine whose calibration to use for expected figures (vllm, tensorrt-llm, llama.cpp …); default: the hardware's")
	fs.StringVar(&f.catalog, "catalog", "", "YAML or JSON file adding hardware, models and precisions")
	fs.StringVar(&f.format, "format", "table", "output: table or json")
	fs.BoolVar(&f.remeasure, "remeasure", false, "with --hardware local: measure the bandwidth now, whatever is cached")
	fs.StringVar(&f.gguf, "gguf", "", "GGUF model file: architecture and exact bytes per token from its tensor types and shapes (instead of --model/--quant)")
	fs.IntVar(&f.images, "images", 0, "images in the prompt: their tokens (Qwen2-VL's) join --prompt-tokens and their encoder's time the TTFT floor")
	fs.StringVar(&f.imageSize, "image-size", "512x512", "the images' size, WIDTHxHEIGHT in pixels")
	fs.Float64Var(&f.audioSeconds, "audio-seconds", 0, "seconds of sound in the prompt (Qwen2-Audio's tokens and encoder)")
	return cmd
}

// ceilingDeployment turns the flags into a deployment, or a usage error
// naming the flag.
func ceilingDeployment(f *ceilingFlags, cmd *cobra.Command) (physics.Deployment, string, []string, error) {
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
	case f.remeasure && f.hardware != "local":
		return physics.Deployment{}, "", nil, usagef("--remeasure: measures --hardware local's bandwidth; --hardware is %q", f.hardware)
	case cmd.Flags().Changed("params") && !(f.paramsB > 0):
		return physics.Deployment{}, "", nil, usagef("--params: %g is not a positive number of billions", f.paramsB)
	}
	if f.gguf != "" {
		// The file's header and tensor types are the model and its
		// precision: another name for either would be ignored.
		for _, name := range []string{"model", "quant", "params"} {
			if cmd.Flags().Changed(name) {
				return physics.Deployment{}, "", nil, usagef("--%s: --gguf gives the model and its precision from the file; leave --%s out", name, name)
			}
		}
	}
	spec := physics.Spec{
		Model: f.model, ParamsB: f.paramsB, GGUF: f.gguf, Quant: f.quant, KVQuant: f.kvQuant,
		Hardware: f.hardware, Engine: f.engine, GPUs: f.gpus, Context: f.context,
		PromptTokens: f.promptTokens, Catalog: f.catalog,
	}
	if f.hardware == "local" {
		h, err := benchmark.LocalHardware(cmd.Context(), f.remeasure)
		if err != nil {
			return physics.Deployment{}, "", nil, err
		}
		spec.Local = &h
	}
	d, engine, notes, err := physics.Resolve(spec)
	if se, ok := errors.AsType[*physics.SpecError](err); ok {
		if _, unknown := errors.AsType[*physics.UnknownError](se.Err); unknown {
			return d, "", nil, benchmark.UnknownInput("--"+se.Field, se.Err)
		}
		return d, "", nil, usagef("--%s: %v", se.Field, se.Err)
	}
	return d, engine, notes, err
}

func runCeiling(env Env, f *ceilingFlags, cmd *cobra.Command) error {
	d, engine, notes, err := ceilingDeployment(f, cmd)
	if err != nil {
		return err
	}
	claim := 0.0
	if cmd.Flags().Changed("claim") {
		claim = f.claim
	}
	ml, err := simMedia(f.images, f.imageSize, f.audioSeconds)
	if err != nil {
		return err
	}
	ml.Hardware, ml.GPUs = f.hardware, f.gpus
	mc := ml.Cost()
	prompt := f.promptTokens
	if mc.Tokens > 0 {
		prompt += mc.Tokens
		notes = append(notes, fmt.Sprintf("media: %s: %d prompt tokens (in the %d of the prefill); their encoders' %.3g FLOPs are in the TTFT figures",
			ml, mc.Tokens, prompt, mc.EncoderFLOPs))
	}
	out := report.NewCeiling(d, engine, physics.Workload{ContextTokens: f.context, Batch: f.batch, PromptTokens: prompt}, claim, notes)
	if mc.EncoderFLOPs > 0 && out.PromptTokens > 0 {
		// The encoders run before the prefill: at peak for the floor, at
		// the hardware's prefill MFU for the expected time.
		peak := d.Hardware.BF16FLOPS * float64(max(d.GPUs, 1))
		if peak > 0 {
			out.PrefillFloorMs += mc.EncoderFLOPs / peak * 1000
		}
		out.PrefillExpectedMs += float64(sim.EncoderTimeOn(d.Hardware, d.GPUs, mc.EncoderFLOPs)) / float64(time.Millisecond)
	}
	if f.format == "json" {
		enc := json.NewEncoder(env.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	}
	return report.CeilingTable(env.Stdout, out)
}

package cli

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/tokbench/tokbench/calibrate"
	"github.com/tokbench/tokbench/sim"
)

// simFlags are the simulator settings shared by serve and simulate.
type simFlags struct {
	model, quant, hardware string
	gpus                   int
	maxBatch, maxTokens    int
	seed                   uint64
	meanOutput             int
	specDraft              int
	specAccept, specCost   float64
	calibration            string
	frontEnd               string
	cal                    *calibrate.File
}

func (f *simFlags) register(fs *pflag.FlagSet) {
	d := sim.DefaultConfig()
	fs.StringVar(&f.model, "model", d.Model, "model from the physics catalog")
	fs.StringVar(&f.quant, "quant", d.Quant, "weight precision: bf16, fp8, int8, int4, …")
	fs.StringVar(&f.hardware, "hardware", d.Hardware, "accelerator from the physics catalog")
	fs.IntVar(&f.gpus, "gpus", d.GPUs, "GPUs (tensor parallelism)")
	fs.IntVar(&f.maxBatch, "max-batch", d.Engine.MaxNumSeqs, "most sequences in a batch (vLLM max-num-seqs)")
	fs.IntVar(&f.maxTokens, "max-batched-tokens", d.Engine.MaxBatchedTokens, "token budget per engine step (chunked prefill)")
	fs.Uint64Var(&f.seed, "seed", 0, "seed for every random draw")
	fs.IntVar(&f.meanOutput, "mean-output-tokens", 0, "mean of the geometric EOS draw; 0 runs every request to its max tokens")
	fs.IntVar(&f.specDraft, "spec-draft-tokens", 0, "speculative decoding draft length k (0 disables)")
	fs.Float64Var(&f.specAccept, "spec-acceptance", 0.7, "speculative decoding per-token acceptance rate")
	fs.Float64Var(&f.specCost, "spec-draft-cost", 0.05, "draft step cost relative to a target decode step")
	fs.StringVar(&f.frontEnd, "front-end", "none", "the server's time outside the model's steps: none, or vllm (vLLM's HTTP server, tokenizer, scheduler and detokenizer, from published measurements; docs/simulator.md)")
	fs.StringVar(&f.calibration, "calibration", "", "a calibration file (tokbench calibrate): simulate that measured deployment instead of --model/--quant/--hardware")
}

// frontEnds are --front-end's values.
var frontEnds = map[string]sim.FrontEnd{"none": {}, "vllm": sim.VLLMFrontEnd}

// config validates the flags and builds the simulator configuration.
// set reports whether the user gave a flag.
func (f *simFlags) config(set func(string) bool) (sim.Config, error) {
	if f.calibration != "" {
		return f.calibrated(set)
	}
	fe, ok := frontEnds[f.frontEnd]
	if !ok {
		return sim.Config{}, usagef("--front-end: unknown %q (known: none, vllm)", f.frontEnd)
	}
	cfg, err := sim.Preset{
		FrontEnd: fe,
		Model:    f.model, Quant: f.quant, Hardware: f.hardware, GPUs: f.gpus,
		MaxBatch: f.maxBatch, MaxBatchedTokens: f.maxTokens, Seed: f.seed, MeanOutputTokens: f.meanOutput,
		SpecDraftTokens: f.specDraft, SpecAcceptance: f.specAccept, SpecDraftCost: f.specCost,
	}.Config()
	if pe, ok := errors.AsType[*sim.PresetError](err); ok {
		return cfg, usagef("--%s: %v", pe.Field, pe.Err)
	}
	if err != nil {
		return cfg, usagef("%v", err) // a deployment the physics cannot cost
	}
	return cfg, nil
}

// calibrated is the simulator of a calibration file: its fitted cost
// model and engine limits, the flags' engine settings where given.
func (f *simFlags) calibrated(set func(string) bool) (sim.Config, error) {
	for _, name := range []string{"model", "quant", "hardware", "gpus", "front-end"} {
		if set(name) {
			return sim.Config{}, usagef("--%s: --calibration gives the deployment; leave --%s out", name, name)
		}
	}
	cal, err := calibrate.Read(f.calibration)
	if err != nil {
		return sim.Config{}, usagef("--calibration: %v", err)
	}
	f.cal = cal
	cfg := cal.SimConfig()
	if set("max-batch") {
		cfg.Engine.MaxNumSeqs = f.maxBatch
	}
	if set("max-batched-tokens") {
		cfg.Engine.MaxBatchedTokens = f.maxTokens
	}
	cfg.Engine.Seed, cfg.Engine.MeanOutputTokens = f.seed, f.meanOutput
	if cfg.Engine.MaxNumSeqs < 1 || cfg.Engine.MaxBatchedTokens < 1 {
		return sim.Config{}, usagef("--max-batch and --max-batched-tokens must be at least 1")
	}
	return cfg, nil
}

func (f *simFlags) preset() string {
	if f.cal != nil {
		refused := ""
		if f.cal.Fit.Error != "" {
			refused = ", REFUSED: beyond its bound, written with --force"
		}
		return fmt.Sprintf("CALIBRATED %s (fitted to %s, rms error %.1f%%%s)", f.cal.Deployment, f.cal.Run, 100*f.cal.Fit.RMSError, refused)
	}
	fe := ""
	if f.frontEnd == "vllm" {
		fe = " behind vLLM's front end"
	}
	return fmt.Sprintf("%s %s on %d× %s%s", f.model, f.quant, f.gpus, f.hardware, fe)
}

func newServeCmd(env Env) *cobra.Command {
	var (
		f         simFlags
		addr      string
		grace     time.Duration
		toolShare float64
	)
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the simulated OpenAI-compatible inference server",
		Long: `serve runs the simulated inference engine behind an OpenAI-compatible API
(/v1/chat/completions, /v1/completions, /v1/models, /metrics, /health), the
Anthropic, Ollama, llama.cpp and TGI routes, and embeddings (/v1/embeddings,
/api/embed, /embed) until interrupted; a chat request that carries tools is
answered with a call of one (--tool-call-share of them). Ctrl-C lets
streams in flight finish for --grace. Token timing follows the physics of
the chosen model, precision and hardware; see docs/simulator.md.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if grace < 0 {
				return usagef("--grace: want a duration of 0 or more, got %v", grace)
			}
			cfg, err := f.config(cmd.Flags().Changed)
			if err != nil {
				return err
			}
			if toolShare < 0 || toolShare > 1 {
				return usagef("--tool-call-share: want a share from 0 to 1, got %g", toolShare)
			}
			cfg.ToolCallShare = toolShare
			if toolShare == 0 {
				cfg.ToolCallShare = -1 // none (0 is the config's "every one")
			}
			srv, err := sim.NewServer(cfg)
			if err != nil {
				return usagef("%v", err)
			}
			ctx, hurry, stop := env.interrupts(cmd.Context())
			defer stop()
			// The server outlives ctx by the grace: Shutdown below ends it.
			url, err := srv.Start(context.WithoutCancel(ctx), addr)
			if err != nil {
				srv.Close()
				return addrErr(fmt.Errorf("--addr: %w", err))
			}
			c := srv.Config()
			fmt.Fprintf(env.Stderr, "tokbench serve: simulated %s (KV cache %d tokens, batch ≤ %d, %d tokens/step)\n",
				f.preset(), srv.KVCapacityTokens(), c.Engine.MaxNumSeqs, c.Engine.MaxBatchedTokens)
			if c.Engine.Spec.Enabled() {
				fmt.Fprintf(env.Stderr, "tokbench serve: speculative decoding k=%d a=%.2f (%.2f tokens/step)\n",
					c.Engine.Spec.DraftTokens, c.Engine.Spec.Acceptance, c.Engine.Spec.ExpectedTokens())
			}
			fmt.Fprintf(env.Stderr, "tokbench serve: OpenAI base URL %s (model %q); Ctrl-C stops\n", url, c.ServedModel)
			<-ctx.Done()
			gctx, cancel := context.WithTimeout(hurry, grace)
			defer cancel()
			return srv.Shutdown(gctx)
		},
	}
	f.register(cmd.Flags())
	cmd.Flags().StringVar(&addr, "addr", "127.0.0.1:8000", "listen address (loopback by default)")
	cmd.Flags().DurationVar(&grace, "grace", 5*time.Second, "at Ctrl-C, how long streams in flight may finish")
	cmd.Flags().Float64Var(&toolShare, "tool-call-share", 1, "the share of streamed chat requests carrying tools that are answered with a tool call (seeded per request)")
	return cmd
}

package cli

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"

	"github.com/spf13/cobra"

	"github.com/tokbench/tokbench/api"
	"github.com/tokbench/tokbench/calibrate"
	"github.com/tokbench/tokbench/metrics"
	"github.com/tokbench/tokbench/report"
	"github.com/tokbench/tokbench/sim"
)

func newSimulateCmd(env Env) *cobra.Command {
	var (
		f                       simFlags
		concurrency, format     string
		requests, input, output int
		phases                  int
		lockstep                bool
		images                  int
		imageSize               string
		audioSeconds            float64
		apiName                 string
		embedInputs             int
	)
	cmd := &cobra.Command{
		Use:   "simulate",
		Short: "Compute a concurrency curve on the simulated engine in virtual time",
		Long: `simulate runs closed-loop users (each sends its next request the moment
the previous one finishes) through the simulated engine in virtual time: no
server, no sleeping, a whole curve in well under a second. The numbers come
from the same metrics code as bench; see docs/simulator.md for the model.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := f.config(cmd.Flags().Changed)
			if err != nil {
				return err
			}
			users, err := parseCounts("--concurrency", concurrency, 1)
			if err != nil {
				return err
			}
			if _, err := api.ByName(apiName); err != nil && apiName != "auto" {
				return usagef("--api: %v", err)
			}
			inputs, err := embedShape(apiName, embedInputs)
			if err != nil {
				return err
			}
			embed := simEmbed{API: apiName, Inputs: inputs, Dims: cfg.EmbedDims}
			switch {
			case requests < 0:
				return usagef("--requests: must be positive, got %d", requests)
			case input < 1:
				return usagef("--input-tokens: must be at least 1, got %d", input)
			case inputs == 0 && output < 1:
				return usagef("--output-tokens: must be at least 1, got %d", output)
			case inputs == 0 && input+output > cfg.Cost.KVCapacityTokens():
				return usagef("--input-tokens + --output-tokens: %d tokens do not fit in the KV cache (%d tokens)",
					input+output, cfg.Cost.KVCapacityTokens())
			case format != "table" && format != "json":
				return usagef("--format: unknown %q (known: table, json)", format)
			case phases < 0 || phases > 256:
				return usagef("--phases: want 1 to 256, got %d", phases)
			case phases > 1 && lockstep:
				return usagef("--phases: the users of a --lockstep level start together: give one or the other")
			}
			if inputs > 0 {
				if err := embed.check(cfg, input, cmd.Flags().Changed); err != nil {
					return err
				}
			}
			mediaLoad, err := simMedia(images, imageSize, audioSeconds)
			if err != nil {
				return err
			}
			mediaLoad.Hardware, mediaLoad.GPUs = f.hardware, f.gpus
			if !cmd.Flags().Changed("phases") && f.cal != nil && !lockstep {
				phases = calibratedPhases
			}
			sum := metrics.Summary{
				Schema: metrics.Schema,
				Target: metrics.Target{URL: "virtual", API: "sim", Model: f.model, Simulated: true},
			}
			if f.cal != nil {
				sum.Target.Model = f.cal.Target.Model
			}
			curve := sim.CurveConfig{
				Users: users, Requests: requests, PromptTokens: input, MaxTokens: output, Lockstep: lockstep, Phases: phases,
				Media: mediaLoad,
			}
			if inputs > 0 {
				curve.Embed = sim.EmbedLoad{Inputs: inputs, Dims: cfg.EmbedDims, NoUsage: apiName == api.EmbedTEI}
				sum.Target.API, output = apiName, 0
			}
			levels, err := sim.Curve(cmd.Context(), cfg.Engine, cfg.Cost, curve)
			if err != nil {
				return err
			}
			sum.Levels = levels
			if format == "json" {
				return writeSimJSON(env, sum, &f, simShape{input, output, inputs})
			}
			if inputs > 0 {
				fmt.Fprintf(env.Stdout, "simulated %s, %s: %d inputs of %d tokens a request, virtual time\n", f.preset(), apiName, inputs, input)
			} else {
				fmt.Fprintf(env.Stdout, "simulated %s, %d in / %d out tokens, virtual time\n", f.preset(), input, output)
			}
			if err := report.Table(env.Stdout, sum); err != nil {
				return err
			}
			if f.cal != nil {
				for _, lv := range sum.Levels {
					fmt.Fprintf(env.Stdout, "%s: %s\n", lv.Load, fitErrorNote(f.cal))
				}
				if f.cal.Fit.Error != "" {
					fmt.Fprintf(env.Stdout, "WARNING: %s was written with --force: %s\n", f.calibration, f.cal.Fit.Error)
				}
			}
			return nil
		},
	}
	f.register(cmd.Flags())
	fl := cmd.Flags()
	fl.StringVar(&concurrency, "concurrency", "1,4,16", "comma list of concurrent users, one level each")
	fl.IntVar(&requests, "requests", 0, "requests per level (default max(4×concurrency, 16))")
	fl.IntVar(&input, "input-tokens", 512, "prompt length in tokens")
	fl.IntVar(&output, "output-tokens", 128, "max tokens of each request")
	fl.StringVar(&format, "format", "table", "stdout format: table, json")
	fl.IntVar(&phases, "phases", 1, fmt.Sprintf("run each level this many times with its users' starts at random instants and report the mean: the expected figures of a real server, whose users fall into step with each other by chance (default %d with --calibration)", calibratedPhases))
	fl.BoolVar(&lockstep, "lockstep", false, "start each level's users at the same instant (the default spreads them over one request's duration, as bench does)")
	fl.IntVar(&images, "images", 0, "images in every request, encoded and prefilled as Qwen2-VL's (see docs/simulator.md)")
	fl.StringVar(&imageSize, "image-size", "512x512", "the images' size, WIDTHxHEIGHT in pixels")
	fl.Float64Var(&audioSeconds, "audio-seconds", 0, "seconds of sound in every request, encoded and prefilled as Qwen2-Audio's")
	fl.StringVar(&apiName, "api", "openai-chat", fmt.Sprintf("the requests' protocol: an embeddings API (%s, %s, %s) simulates embeddings requests of --embed-inputs inputs; any other streamed answers", api.EmbedOpenAI, api.EmbedOllama, api.EmbedTEI))
	fl.IntVar(&embedInputs, "embed-inputs", 0, "with an embeddings API: texts per request, each --input-tokens long (default 1)")
	return cmd
}

// simEmbed is simulate's embeddings requests: Inputs texts a request in
// protocol API, answered with vectors of Dims.
type simEmbed struct {
	API          string
	Inputs, Dims int
}

// check refuses what the simulated server would refuse of requests of
// e.Inputs inputs of input tokens each, and the flags that do not apply.
func (e simEmbed) check(cfg sim.Config, input int, set func(string) bool) error {
	total := e.Inputs * input
	switch {
	case set("output-tokens"):
		return usagef("--output-tokens: an embeddings API (--api %s) has no output tokens; leave it out", e.API)
	case set("images") || set("audio-seconds"):
		return usagef("--images, --audio-seconds: an embeddings API (--api %s) embeds text only", e.API)
	case input > cfg.ModelLen():
		return usagef("--input-tokens: %d tokens an input, the model's maximum is %d", input, cfg.ModelLen())
	case total+1 > cfg.Cost.KVCapacityTokens():
		return usagef("--embed-inputs × --input-tokens: %d tokens a request do not fit in the KV cache (%d tokens)",
			total, cfg.Cost.KVCapacityTokens())
	}
	return nil
}

// simShape is the requests' shape a simulation's JSON states.
type simShape struct{ input, output, embedInputs int }

// fitErrorNote is what stands beside every calibrated prediction: how
// far the fit missed the levels it was fitted to.
func fitErrorNote(cal *calibrate.File) string {
	var loads []string
	worst := 0.0
	for _, p := range cal.Fit.Levels {
		loads = append(loads, fmt.Sprintf("c=%d", p.Concurrency))
		worst = max(worst, math.Abs(p.DecodeTPS.ErrorPct), math.Abs(p.TTFTMs.ErrorPct))
	}
	s := fmt.Sprintf("predicted by a fit that missed its measured levels (%s) by %.1f%% rms, %.1f%% at worst", strings.Join(loads, ", "), 100*cal.Fit.RMSError, worst)
	if cal.Fit.Error != "" {
		s += " (REFUSED: beyond its bound, written with --force)"
	}
	return s
}

// calibratedPhases is --phases for a calibrated simulation: a prediction
// of a measured deployment is its expected figures, not the best case.
const calibratedPhases = 16

// writeSimJSON writes the summary with the simulated deployment in target.
func writeSimJSON(env Env, s metrics.Summary, f *simFlags, shape simShape) error {
	type target struct {
		metrics.Target
		Hardware     string `json:"hardware"`
		Quant        string `json:"quant"`
		GPUs         int    `json:"gpus"`
		InputTokens  int    `json:"input_tokens"`
		OutputTokens int    `json:"output_tokens"`
		// EmbedInputs are each embeddings request's inputs, of
		// InputTokens each.
		EmbedInputs int    `json:"embed_inputs,omitempty"`
		Clock       string `json:"clock"`
		// Calibration is the calibration file simulated, when one was.
		Calibration string `json:"calibration,omitempty"`
	}
	// A calibrated level carries the fit's error beside its prediction.
	type fit struct {
		RMSError float64 `json:"rms_error"`
		Note     string  `json:"note"`
		Error    string  `json:"error,omitempty"`
	}
	type level struct {
		metrics.Level
		Fit *fit `json:"calibration_fit,omitempty"`
	}
	levels := make([]level, len(s.Levels))
	for i, lv := range s.Levels {
		levels[i].Level = lv
		if f.cal != nil {
			levels[i].Fit = &fit{RMSError: f.cal.Fit.RMSError, Note: fitErrorNote(f.cal), Error: f.cal.Fit.Error}
		}
	}
	out := struct {
		Schema      string  `json:"schema"`
		Target      target  `json:"target"`
		Interrupted bool    `json:"interrupted"`
		Levels      []level `json:"levels"`
	}{s.Schema, target{s.Target, f.hardware, f.quant, f.gpus, shape.input, shape.output, shape.embedInputs, "virtual", ""}, false, levels}
	if f.cal != nil {
		out.Target.Hardware, out.Target.Quant, out.Target.GPUs = "", "", 0
		out.Target.Calibration = f.calibration
		out.Target.Model = f.cal.Target.Model
	}
	enc := json.NewEncoder(env.Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

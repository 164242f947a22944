// Package benchmark runs a whole tokbench benchmark from a Plan: it starts
// the embedded simulator when the plan names no URL, probes the server
// (protocol, model, engine facts), waits for the plan's start instant, runs
// every level — repeated, or as an automatic sweep — with SLO verdicts,
// the server's own /metrics around each level, the physical ceiling and
// cost, and writes the run directory as it goes.
//
// A Plan is the benchmark, typed. DefaultPlan is `tokbench bench` with
// no flags (the embedded simulator, 1, 4 and 16 users, 512 tokens in and
// 128 out); set its fields, and Run validates and runs it (ExampleRun):
//
//	plan := benchmark.DefaultPlan()
//	plan.URL = "http://localhost:8000/v1" // "": the embedded simulator
//	plan.Load.Concurrency = []int{1, 8}
//	plan.Workload.Output = workload.Fixed(256)
//	res, err := benchmark.Run(ctx, plan, benchmark.Hooks{})
//	if err != nil {
//		return err // an *InputError names the Plan field at fault
//	}
//	for _, lv := range res.Summary.Levels {
//		fmt.Println(lv.Load, lv.TTFT.P50, lv.DecodeTPS.P50)
//	}
//
// Run never changes the plan; Hooks.Out, a results.Writer, receives the
// run directory as it is measured. `tokbench bench` turns its flags into
// a Plan and the Result into output; the harness and any library user run
// the same code.
package benchmark

import (
	"crypto/tls"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"time"

	"github.com/tokbench/tokbench/api"
	"github.com/tokbench/tokbench/load"
	"github.com/tokbench/tokbench/metrics"
	"github.com/tokbench/tokbench/probe"
	"github.com/tokbench/tokbench/tokenize"
	"github.com/tokbench/tokbench/workload"
)

// Plan is a validated benchmark. Run reads it and never changes it.
type Plan struct {
	// URL is the base URL as the API's SDK takes it; empty starts the
	// embedded simulator configured by Sim.
	URL string
	Sim SimOptions
	// API is an api.Names spelling, or "auto" to probe the server.
	API string
	// Model is the model to ask for; empty takes the first one the server
	// lists.
	Model string
	// Header goes with every request and probe. APIKey, when set, is sent
	// in the protocol's own header (Bearer token, Anthropic's x-api-key)
	// unless Header sets that header already. Secrets are scrubbed from
	// everything written.
	Header  http.Header
	APIKey  string
	Secrets []string
	// APIKeyEnv names the variable APIKey was read from, for run.json.
	APIKeyEnv string
	// ContinuousUsage is auto (ask vLLM and the simulator for usage in
	// every chunk), on or off.
	ContinuousUsage Switch
	// LlamaCppMedia is the form in which API llamacpp sends images:
	// api.LlamaCppMultimodalData, api.LlamaCppImageData, or empty to take
	// the one the server's GET /props points to (multimodal_data when it
	// says nothing).
	LlamaCppMedia string
	IgnoreEOS     bool
	// ServerMetrics scrapes the server's /metrics around each level; with
	// API auto it is on for the engines known to serve latency series.
	ServerMetrics bool
	// GPUTelemetry samples the GPUs' counters during every level (nil:
	// none).
	GPUTelemetry *GPUTelemetry

	Client ClientOptions

	// Load is the load asked for: its levels (this shard's part of each)
	// run in order, each Repeat times. With Sweep set, the sweep picks
	// concurrency levels from results, each sending what Load's
	// SweepLevel does.
	Load LevelSpec
	// Levels, when set, are run instead of Load's (levels built by hand,
	// as the harness does); Load is then only recorded.
	Levels  []load.Level
	Sweep   *load.AutoSweep
	Repeat  int
	SLOs    []metrics.SLO
	Prices  metrics.Prices
	Profile string
	// StartAt, when set, is the instant the first level begins (shards of
	// one run start together); set-up happens before it.
	StartAt time.Time
	Shard   load.Shard

	Workload Workload
	// Physics is the deployment the numbers are judged against (nil: no
	// ceiling); a run of the embedded simulator judges against the
	// simulator's own deployment.
	Physics *Physics
	// PhysicsIn, when Physics is nil, is the deployment as far as the
	// plan knows it: the run completes it from what the server says of
	// its model (its name, llama.cpp's model path, parameter counts).
	PhysicsIn *PhysicsInput
	// Notes are warnings the summary starts with.
	Notes []string

	// Meta is run.json's like-for-like metadata (hardware, quant, engine,
	// label, token lengths); Run adds what probing found. run.json's
	// configuration is derived from the plan (Plan.Config).
	Meta    map[string]string
	Version string // the tool's version, for run.json
}

// DefaultPlan is `tokbench bench` without flags: the embedded simulator,
// closed-loop levels of 1, 4 and 16 users sending max(4×users, 16)
// requests each after one warm-up, prompts of 512 tokens (cl100k_base)
// asking for 128, a 10-minute request timeout and a 5-second grace. Each
// call draws a new Workload.PromptSeed, so no run is served from a prompt
// cache another filled; set it to send a run's prompts again.
func DefaultPlan() *Plan {
	tok, err := tokenize.Open(tokenize.Default)
	if err != nil {
		panic("benchmark: the built-in tokenizer: " + err.Error()) // compiled in: cannot fail
	}
	return &Plan{
		API: "openai-chat", Header: http.Header{}, ContinuousUsage: Auto, Repeat: 1,
		Client: ClientOptions{Timeout: 10 * time.Minute, Grace: 5 * time.Second},
		Load: LevelSpec{
			Concurrency: []int{1, 4, 16}, Arrival: load.ArrivalPoisson, Burstiness: 1,
			Warmup: 1, Seed: 1, Steps: 1,
		},
		Sim:    SimOptions{Seed: 1},
		Prices: metrics.Prices{GPUs: 1},
		Workload: Workload{
			Inputs: []workload.Dist{workload.Fixed(512)}, Output: workload.Fixed(128),
			PrefixGroups: 1, Tokenizer: tok, PromptSeed: rand.Uint64() | 1,
		},
	}
}

// levels are the levels the plan runs (none when a sweep picks them).
func (p *Plan) levels() []load.Level {
	switch {
	case p.Levels != nil:
		return p.Levels
	case p.Sweep != nil:
		return nil
	}
	return p.Load.Levels()
}

// SimOptions configure the embedded simulator (zero values: its defaults);
// Plan.Model, when set, is the model it simulates.
type SimOptions struct {
	Quant, Hardware string
	GPUs            int
	Seed            uint64
}

// ClientOptions are the HTTP client's and the load runner's settings.
type ClientOptions struct {
	// Timeout bounds one request; StallTimeout a silence in its stream
	// (the wait for the answer's head included; 0: none); Grace how long
	// streams may finish after an interrupt.
	Timeout, StallTimeout, Grace time.Duration
	Retry                        int
	MaxErrorRate                 float64
	// Cold measures first contact: no connection opened before a level,
	// set-up counted in TTFT.
	Cold  bool
	HTTP2 bool
	TLS   *tls.Config
	// FollowRedirects follows 307 and 308 to the same origin
	// (api.FollowSameOrigin); otherwise a 3xx is the request's outcome.
	FollowRedirects bool
	// KeepAwake keeps the machine's processors from idling while each
	// level runs (load.Runner.KeepAwake).
	KeepAwake bool
	// Dial, when set, replaces the dialer of tokbench's connections (the
	// harness's run without kernel receive stamps).
	Dial dialFunc
}

// Workload is what the requests hold.
type Workload struct {
	Inputs []workload.Dist // one level dimension when there are several
	Output workload.Dist
	// Rows are a JSONL or ShareGPT dataset's rows; Corpus a text file to
	// cut prompts from (Format workload.FormatText). Dataset and
	// DatasetFormat name the file either came from and its format, for
	// run.json.
	Rows                   []workload.Row
	Corpus                 string
	Dataset, DatasetFormat string
	// CopyBudget is what --dataset-budget leaves, once Rows hold their
	// text, for the copies of it a level's requests make
	// (workload.Config.MaxBytes; 0: unbounded).
	CopyBudget   int64
	PrefixTokens int
	PrefixGroups int
	MinTokens    int
	Tokenizer    tokenize.Tokenizer
	// ServerTokenizer counts prompts with the engine's own /tokenize.
	ServerTokenizer bool
	// Chat says the levels' chains are conversations (--workload chat),
	// not agent chains: the words their figures are given in, and a
	// prompt cache that serves each turn's history is expected.
	Chat       bool
	PromptSeed uint64
	// Trace, when set, makes every level's requests: the trace's (see
	// workload.TraceSource).
	Trace *workload.Trace
	// EmbedInputs, for an embeddings API, is the inputs of each request:
	// each a prompt of the workload's (workload.EmbedSource).
	EmbedInputs int
	// Tools are the tool definitions every request carries (chat APIs
	// that take them: api.SendsTools); ToolsFile the file they came from,
	// for run.json.
	Tools     []api.Tool
	ToolsFile string
	// Media go with every request whose dataset row has none (see
	// ParseMedia).
	Media workload.MediaSpec
}

// Lengths are the input and output tokens that stand for the run where
// one number is needed (run.json, the physics context, the host check):
// the first input length and the output's mean, or a trace's averages.
func (w Workload) Lengths() (in, out int) {
	if t := w.Trace; t != nil && len(t.Requests) > 0 {
		for _, r := range t.Requests {
			in, out = in+r.InputTokens, out+r.OutputTokens
		}
		return in / len(t.Requests), out / len(t.Requests)
	}
	if len(w.Inputs) > 0 {
		in = int(w.Inputs[0].Mean)
	}
	return in, int(w.Output.Mean)
}

// Switch is an auto/on/off setting.
type Switch string

// Switch values.
const (
	Auto Switch = "auto"
	On   Switch = "on"
	Off  Switch = "off"
)

// InputError is a plan that asks for what cannot be done: a bad value or
// file, or something the server lacks (no /tokenize for the server
// tokenizer, an API the server does not speak). Field names the Plan
// field at fault as it is spelled in Go ("Client.Retry", "Load.Concurrency",
// "Workload.Rows"), so a front end can name its own spelling of it (bench
// names the flag).
type InputError struct {
	Field string
	Msg   string
}

func (e *InputError) Error() string {
	if e.Field == "" {
		return e.Msg
	}
	return e.Field + ": " + e.Msg
}

// fieldErrorf is an InputError of the Plan field named.
func fieldErrorf(field, format string, args ...any) error {
	return &InputError{Field: field, Msg: fmt.Sprintf(format, args...)}
}

// IsInputError reports whether err is (or wraps) an InputError.
func IsInputError(err error) bool {
	_, ok := errors.AsType[*InputError](err)
	return ok
}

// TraceConfig is run.json's account of a replayed trace.
type TraceConfig struct {
	File     string    `json:"file"`
	Format   string    `json:"format"`
	Speed    []float64 `json:"speed"`
	Window   string    `json:"window,omitempty"`
	Requests int       `json:"requests"`
	SpanS    float64   `json:"span_s"`
}

// Config is run.json's configuration: the benchmark as given, secrets
// removed (sensitive header values read "[REDACTED]").
type Config struct {
	URL             string           `json:"url"`
	API             string           `json:"api"`
	Model           string           `json:"model"`
	Concurrency     []int            `json:"concurrency"`
	Rate            []float64        `json:"rate"`
	Arrival         string           `json:"arrival"`
	Burstiness      float64          `json:"burstiness"`
	MaxConcurrency  int              `json:"max_concurrency"`
	Requests        int              `json:"requests"`
	Duration        string           `json:"duration"`
	Warmup          int              `json:"warmup"`
	Trace           *TraceConfig     `json:"trace,omitempty"`
	InputTokens     int              `json:"input_tokens"`
	OutputTokens    int              `json:"output_tokens"`
	Tokenizer       string           `json:"tokenizer"`
	IgnoreEOS       bool             `json:"ignore_eos"`
	IgnoreEOSSent   bool             `json:"ignore_eos_sent"`
	ContinuousUsage bool             `json:"continuous_usage"`
	Headers         []string         `json:"headers"`
	APIKeyEnv       string           `json:"api_key_env"`
	Timeout         string           `json:"timeout"`
	StallTimeout    string           `json:"stall_timeout"`
	Seed            uint64           `json:"seed"`
	PromptSeed      uint64           `json:"prompt_seed"`
	Load            LoadConfig       `json:"load"`
	HTTP2           bool             `json:"http2"`
	Connections     string           `json:"connections"`
	Redirects       string           `json:"redirects"`
	Shard           string           `json:"shard"`
	Prompts         PromptConfig     `json:"prompts"`
	Detected        *probe.Detection `json:"detected,omitempty"`
}

// LoadConfig is the load-shaping part of Config.
type LoadConfig struct {
	SLO          string  `json:"slo"`
	Profile      string  `json:"profile"`
	Repeat       int     `json:"repeat"`
	Sweep        string  `json:"sweep"`
	StartAt      string  `json:"start_at"`
	Workload     string  `json:"workload"`
	Steps        int     `json:"steps"`
	ThinkTime    string  `json:"think_time"`
	RampUp       string  `json:"ramp_up"`
	Lockstep     bool    `json:"lockstep"`
	SummaryEvery string  `json:"summary_every,omitempty"`
	PriceIn      float64 `json:"price_in"`
	PriceOut     float64 `json:"price_out"`
	GPUHourPrice float64 `json:"gpu_hour_price"`
}

// PromptConfig is the prompt part of Config.
type PromptConfig struct {
	InputTokens     []string `json:"input_tokens"`
	OutputTokens    string   `json:"output_tokens"`
	Dataset         string   `json:"dataset"`
	DatasetFormat   string   `json:"dataset_format"`
	PrefixTokens    int      `json:"prefix_tokens"`
	PrefixGroups    int      `json:"prefix_groups"`
	MinTokens       int      `json:"min_tokens"`
	TokenizerServer bool     `json:"tokenizer_server"`
	// EmbedInputs are an embeddings run's inputs per request; Tools the
	// tool definitions each request carried, ToolsFile their file.
	EmbedInputs int    `json:"embed_inputs,omitempty"`
	Tools       int    `json:"tools,omitempty"`
	ToolsFile   string `json:"tools_file,omitempty"`
	// Images of ImageSize in ImageFormat and AudioSeconds of sound went
	// with every request (none: left out).
	Images       int     `json:"images,omitempty"`
	ImageSize    string  `json:"image_size,omitempty"`
	ImageFormat  string  `json:"image_format,omitempty"`
	AudioSeconds float64 `json:"audio_seconds,omitempty"`
}

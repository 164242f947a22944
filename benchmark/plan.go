// Package benchmark runs a whole tokbench benchmark from a Plan: it starts
// the embedded simulator when the plan names no URL, probes the server
// (protocol, model, engine facts), waits for the plan's start instant, runs
// every level — repeated, or as an automatic sweep — with SLO verdicts,
// the server's own /metrics around each level, the physical ceiling and
// cost, and writes the run directory as it goes.
//
// `tokbench bench` turns its flags into a Plan and the Result into output;
// the harness and any library user run the same code.
package benchmark

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"time"

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
	// ContinuousUsage is auto (ask vLLM and the simulator for usage in
	// every chunk), on or off.
	ContinuousUsage Switch
	IgnoreEOS       bool
	// ServerMetrics scrapes the server's /metrics around each level; with
	// API auto it is on for the engines known to serve latency series.
	ServerMetrics bool
	// GPUTelemetry samples the GPUs' counters during every level (nil:
	// none).
	GPUTelemetry *GPUTelemetry

	Client ClientOptions

	// Levels are the planned levels (this shard's part of each), run in
	// order, each Repeat times. With Sweep set they are not used: the
	// sweep picks concurrency levels from results, each like SweepLevel.
	Levels     []load.Level
	Sweep      *load.AutoSweep
	SweepLevel load.Level
	Repeat     int
	SLOs       []metrics.SLO
	Prices     metrics.Prices
	Profile    string
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
	// label, token lengths); Config its configuration as given. Run adds
	// what probing found to both.
	Meta    map[string]string
	Config  Config
	Version string // the tool's version, for run.json
}

// SimOptions configure the embedded simulator (zero values: its defaults).
type SimOptions struct {
	Model, Quant, Hardware string
	GPUs                   int
	Seed                   uint64
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
	// Dial, when set, replaces the dialer of tokbench's connections (the
	// harness's run without kernel receive stamps).
	Dial dialFunc
}

// Workload is what the requests hold.
type Workload struct {
	Inputs []workload.Dist // one level dimension when there are several
	Output workload.Dist
	// Rows are a JSONL or ShareGPT dataset's rows; Corpus a text file to
	// cut prompts from (Format workload.FormatText).
	Rows   []workload.Row
	Corpus string
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
	// InputTokens and OutputTokens stand for the run where one number is
	// needed (the physics context).
	InputTokens, OutputTokens int
	// Trace, when set, makes every level's requests: the trace's (see
	// workload.TraceSource).
	Trace *workload.Trace
	// Media go with every request whose dataset row has none (see
	// ParseMedia).
	Media workload.MediaSpec
}

// Switch is an auto/on/off setting.
type Switch string

// Switch values.
const (
	Auto Switch = "auto"
	On   Switch = "on"
	Off  Switch = "off"
)

// InputError is a plan that asks for what cannot be done: a bad flag or
// file, or something the server lacks (no /tokenize for the server
// tokenizer, an API the server does not speak). Its message names the
// bench flag.
type InputError struct{ Msg string }

func (e *InputError) Error() string { return e.Msg }

func inputErrorf(format string, args ...any) error {
	return &InputError{Msg: fmt.Sprintf(format, args...)}
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
}

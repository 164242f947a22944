package cli

import (
	"crypto/tls"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/tokbench/tokbench/api"
	"github.com/tokbench/tokbench/benchmark"
	"github.com/tokbench/tokbench/load"
	"github.com/tokbench/tokbench/metrics"
	"github.com/tokbench/tokbench/profile"
	"github.com/tokbench/tokbench/tokenize"
	"github.com/tokbench/tokbench/workload"
)

// benchOptions are bench's flags as given: each field is the value of
// the flag of the same name; plan turns them into a benchmark.Plan and its
// errors name the flag. defaultBenchOptions holds the flags' defaults.
type benchOptions struct {
	URL, API, Model string
	// Concurrency and Rate are comma lists ("1,4,16"); Rate, when set,
	// makes the levels open-loop.
	Concurrency, Rate string
	Arrival           string
	Burstiness        float64
	MaxConcurrency    int
	Requests          int
	Duration          time.Duration
	Warmup            int
	// Trace replays a production trace (Mooncake JSONL, Azure CSV or
	// tokbench's JSONL; TraceFormat "" detects it): each request at its
	// recorded instant, TraceSpeed (a comma list, one level each) times
	// as fast, TraceWindow ("A:B", trace time) a slice of it.
	Trace, TraceFormat, TraceSpeed, TraceWindow string

	// InputTokens is a length (N, MEAN:STDDEV, LO-HI) or a comma list of
	// them; OutputTokens one length.
	InputTokens, OutputTokens string
	Tokenizer                 string // a tokenize name, a tokenizer.json path, or "server"
	Dataset, DatasetFormat    string
	// DatasetBudget bounds the text a dataset's rows, and the copies of it
	// a level's requests make, hold together: a size ("1GiB").
	DatasetBudget string
	// Images of ImageSize ("WxH") in ImageFormat (png, jpeg) and
	// AudioSeconds of sound go with every request.
	Images                 int
	ImageSize, ImageFormat string
	AudioSeconds           float64
	PrefixTokens           int
	PrefixGroups           int
	MinTokens              int
	IgnoreEOS              bool
	ContinuousUsage        string
	LlamaCppMedia          string
	Seed                   uint64
	// EmbedInputs, Tools and ToolsFile are the requests' shape beyond
	// their prompts (requestShape).
	EmbedInputs, Tools int
	ToolsFile          string

	Headers    []string // "Name: value"
	APIKeyEnv  string
	APIKeyFile string
	Insecure   bool
	CACert     string // a PEM file
	HTTP2      bool
	// Connections is warm or cold; Redirects none or same-origin.
	Connections, Redirects       string
	Timeout, StallTimeout, Grace time.Duration
	Retry                        int
	MaxErrorRate                 float64
	KeepAwake                    bool

	SLO, Profile string
	Repeat       int
	Sweep        string // "" or auto
	SweepMax     int
	Shard        string // I/N
	StartAt      string // RFC 3339
	Workload     string // synthetic, agent or chat
	Steps        int
	Turns        int // chat: turns per conversation
	ThinkTime    time.Duration
	RampUp       time.Duration
	Lockstep     bool
	// SummaryEvery is the length of a level's periodic summaries; 0 is
	// every minute for levels of 10 minutes or more (--duration), none
	// for shorter ones.
	SummaryEvery time.Duration

	Hardware, Quant string
	// Remeasure measures --hardware local's bandwidth now, whatever is
	// cached.
	Remeasure     bool
	GPUs          int
	ParamsB       float64
	GGUF          string // the served model's file, for exact bytes per token
	Engine, Label string
	ServerMetrics bool
	// GPUTelemetry is auto, off, nvidia-smi or dcgm=URL; EnergyPrice a
	// price per kWh ("0.12/kWh").
	GPUTelemetry, EnergyPrice       string
	PriceIn, PriceOut, GPUHourPrice float64
}

// defaultBenchOptions are bench's defaults.
func defaultBenchOptions() benchOptions {
	return benchOptions{
		API: "openai-chat", Concurrency: "1,4,16", Arrival: string(load.ArrivalPoisson), Burstiness: 1,
		Warmup: 1, InputTokens: "512", OutputTokens: "128", Tokenizer: tokenize.Default,
		DatasetFormat: workload.FormatAuto, DatasetBudget: "1GiB", ImageSize: "512x512", ImageFormat: "jpeg", PrefixGroups: 1, ContinuousUsage: string(benchmark.Auto), Seed: 1,
		APIKeyEnv: "OPENAI_API_KEY", Connections: "warm", Redirects: "none",
		Timeout: 10 * time.Minute, Grace: 5 * time.Second,
		Repeat: 1, SweepMax: 512, GPUTelemetry: "auto", Workload: "synthetic", Steps: 5, Turns: 5, TraceSpeed: "1",
	}
}

// longLevel is the --duration from which a level is summarized every
// minute as well, unless --summary-every says otherwise.
const longLevel = 10 * time.Minute

// planEnv is what plan reads besides the flags.
type planEnv struct {
	// Given reports whether the user set a flag, by its name: a --profile
	// stands in for the flags not given, and a few checks refuse a given
	// value the default would allow (nil: none given).
	Given func(flag string) bool
	// Getenv reads the environment for --api-key-env (nil: os.Getenv).
	Getenv func(string) string
	// Version is the tool's version, for run.json.
	Version string
	// Host is what the machine allows (nil: benchmark.LocalHost()); a
	// plan it cannot run is refused (Plan.CheckHost).
	Host *benchmark.Host
}

// planning is one plan call's state: the options, what they parse to.
type planning struct {
	benchOptions
	planEnv
	prof       *profile.Profile
	slos       []metrics.SLO
	shard      load.Shard
	start      time.Time
	sweep      *load.AutoSweep
	inputs     []workload.Dist
	output     workload.Dist
	rows       []workload.Row
	copyBudget int64 // what --dataset-budget leaves besides the rows
	media      workload.MediaSpec
	format     string // the dataset's, once read
	serverTok  bool
	tok        tokenize.Tokenizer
	tls        *tls.Config
	keyEnv     string
	trace      *workload.Trace
	speeds     []float64
}

func (o *planning) given(flag string) bool { return o.Given != nil && o.Given(flag) }

// plan validates the options — reading the key file, the CA file, the
// tokenizer and every dataset row, so a bad input stops the run before any
// request — and returns the plan they describe. Its errors name the flag.
func (opts benchOptions) plan(env planEnv) (*benchmark.Plan, error) {
	o := &planning{benchOptions: opts, planEnv: env}
	if o.Getenv == nil {
		o.Getenv = os.Getenv
	}
	if o.given("url") && strings.TrimSpace(o.URL) == "" {
		// A CI script's unset variable must not gate on simulated numbers.
		return nil, usagef("--url: empty; leave it out to benchmark the embedded simulator")
	}
	for _, check := range []func() error{o.loadShape, o.checkLoad, o.readTrace, o.network, o.protocol, o.workload} {
		if err := check(); err != nil {
			return nil, err
		}
	}
	p := &benchmark.Plan{
		URL: o.URL, API: o.API, Model: o.Model, Header: http.Header{},
		Sim:             benchmark.SimOptions{Quant: o.Quant, Hardware: o.Hardware, GPUs: o.GPUs, Seed: o.Seed},
		ContinuousUsage: benchmark.Switch(o.ContinuousUsage), LlamaCppMedia: o.LlamaCppMedia, IgnoreEOS: o.IgnoreEOS, ServerMetrics: o.ServerMetrics,
		Client: benchmark.ClientOptions{
			Timeout: o.Timeout, StallTimeout: o.StallTimeout, Grace: o.Grace,
			Retry: o.Retry, MaxErrorRate: o.MaxErrorRate, Cold: o.Connections == "cold",
			HTTP2: o.HTTP2, TLS: o.tls, FollowRedirects: o.Redirects == "same-origin",
			KeepAwake: o.KeepAwake,
		},
		Sweep: o.sweep, Repeat: o.Repeat, SLOs: o.slos, StartAt: o.start, Shard: o.shard, Version: o.Version,
		Prices: metrics.Prices{InputPerMillion: o.PriceIn, OutputPerMillion: o.PriceOut, GPUHour: o.GPUHourPrice, GPUs: max(o.GPUs, 1)},
	}
	if o.prof != nil {
		p.Profile = o.prof.Name
	}
	if o.Hardware == "local" && o.URL == "" {
		return nil, usagef("--hardware local: judges a server on this machine; give its --url (the embedded simulator simulates catalog hardware)")
	}
	gpu, err := benchmark.ParseGPUTelemetry(o.GPUTelemetry, o.URL)
	if err != nil {
		return nil, err
	}
	price, err := benchmark.ParseEnergyPrice(o.EnergyPrice)
	if err != nil {
		return nil, err
	}
	if gpu != nil {
		gpu.PricePerKWh = price
		p.GPUTelemetry = gpu
	}
	if o.Remeasure && o.Hardware != "local" {
		return nil, usagef("--remeasure: measures --hardware local's bandwidth; --hardware is %q", o.Hardware)
	}
	if o.GGUF != "" && (o.Hardware == "" || o.URL == "") {
		return nil, usagef("--gguf: gives the model for the ceiling and MBU against a server's --hardware; give --url and --hardware too")
	}
	if o.URL != "" && o.Hardware != "" {
		in := benchmark.PhysicsInput{Model: o.Model, GGUF: o.GGUF, Quant: o.Quant, Hardware: o.Hardware, ParamsB: o.ParamsB, GPUs: o.GPUs, Remeasure: o.Remeasure}
		ph, note, err := benchmark.ResolvePhysics(in)
		if err != nil {
			return nil, err
		}
		if p.Physics = ph; ph == nil {
			p.PhysicsIn = &in // the run asks the server
		} else if note != "" {
			p.Notes = append(p.Notes, note)
		}
	}
	if o.trace != nil {
		p.Notes = append(p.Notes, o.trace.Notes...)
	}
	promptSeed := o.Seed // given, --seed fixes the prompts too
	if !o.given("seed") {
		promptSeed = rand.Uint64() | 1
	}
	p.Workload = o.plannedWorkload(promptSeed)
	if err := o.requestShape(p); err != nil {
		return nil, err
	}
	if err := o.credentials(p); err != nil {
		return nil, err
	}
	if p.Load, err = o.levelSpec(); err != nil {
		return nil, err
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	host := o.Host
	if host == nil {
		h := benchmark.LocalHost()
		host = &h
	}
	if err := p.CheckHost(*host); err != nil {
		return nil, err
	}
	p.Meta = o.meta()
	return p, nil
}

// credentials sets the plan's headers, API key and secrets: the key from
// --api-key-file, else from --api-key-env's variable.
func (o *planning) credentials(p *benchmark.Plan) error {
	for _, h := range o.Headers {
		name, value, ok := strings.Cut(h, ":")
		name = strings.TrimSpace(name)
		if !ok || name == "" || strings.ContainsAny(name, " \t") {
			return usagef("--header: want 'Name: value', got %q", redactHeaderArg(h))
		}
		if i := strings.IndexFunc(name, func(r rune) bool { return !headerNameRune(r) }); i >= 0 {
			return usagef("--header: name %q holds %q, which a header name cannot", name, name[i:i+1])
		}
		value = strings.TrimSpace(value)
		// A CR or LF would end the header and start another (or the
		// body): HTTP forbids them, and Go's client refuses to send one.
		if strings.ContainsAny(value, "\r\n\x00") {
			return usagef("--header: the value of %s holds a line break or NUL (CR, LF or NUL), which a header value cannot", name)
		}
		p.Header.Add(name, value)
		if api.SensitiveHeader(name) {
			p.Secrets = append(p.Secrets, value)
		}
	}
	o.keyEnv = o.APIKeyEnv
	if o.API == "anthropic" && !o.given("api-key-env") {
		o.keyEnv = "ANTHROPIC_API_KEY"
	}
	if o.APIKeyFile != "" {
		b, err := os.ReadFile(o.APIKeyFile)
		if err != nil {
			// The error names the file, never its contents.
			return usagef("--api-key-file: %v", err)
		}
		key := strings.TrimSpace(string(b))
		if key == "" || strings.ContainsAny(key, "\r\n") {
			return usagef("--api-key-file: %s must hold one key on one line", o.APIKeyFile)
		}
		p.APIKey = key
		return nil
	}
	p.APIKeyEnv = o.keyEnv
	if o.keyEnv != "" {
		p.APIKey = strings.TrimSpace(o.Getenv(o.keyEnv))
		if p.APIKey == "" && o.given("api-key-env") {
			// Named on purpose, so a key is meant to go: a run without it
			// would measure 401s (or a different tier).
			return usagef("--api-key-env: $%s is not set or is empty", o.keyEnv)
		}
	}
	return nil
}

// levels are the configured levels (a shard runs its part of each); none
// when a sweep picks them.
func (o *planning) levels() (conc []int, rates []float64, err error) {
	if o.Rate != "" {
		rates, err = parseRates("--rate", o.Rate)
	} else if o.Sweep == "" {
		conc, err = parseCounts("--concurrency", o.Concurrency, 1)
	}
	return conc, rates, err
}

// levelSpec is the load the options ask for.
func (o *planning) levelSpec() (benchmark.LevelSpec, error) {
	spec := benchmark.LevelSpec{
		Arrival: metrics.Arrival(o.Arrival), Burstiness: o.Burstiness, MaxInFlight: o.MaxConcurrency,
		Requests: o.Requests, Duration: o.Duration, Warmup: o.Warmup, Seed: o.Seed,
		Steps: o.Steps, ThinkTime: o.ThinkTime, RampUp: o.RampUp, Lockstep: o.Lockstep, Shard: o.shard,
		SummaryEvery: o.SummaryEvery,
	}
	if spec.SummaryEvery == 0 && o.Duration >= longLevel {
		spec.SummaryEvery = time.Minute
	}
	for _, d := range o.inputs {
		spec.InputTokens = append(spec.InputTokens, int(d.Mean))
	}
	var err error
	if o.trace != nil {
		spec.Trace, spec.TraceSpeeds = o.trace, o.speeds
		return spec, nil
	}
	spec.Concurrency, spec.Rates, err = o.levels()
	return spec, err
}

// meta is run.json's like-for-like metadata from the options.
func (o *planning) meta() map[string]string {
	m := map[string]string{}
	for k, v := range map[string]string{"hardware": o.Hardware, "quant": o.Quant, "engine": o.Engine, "label": o.Label} {
		if v != "" {
			m[k] = v
		}
	}
	if o.GPUs > 0 {
		m["gpus"] = fmt.Sprint(o.GPUs)
	}
	return m
}

// parseCounts parses a comma list of whole numbers such as "1,4,16" given
// to flag, each at least lo; the error names flag.
func parseCounts(flag, s string, lo int) ([]int, error) {
	var out []int
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		v, err := strconv.Atoi(part)
		if err != nil {
			return nil, usagef("%s: %q is not a whole number (want a comma list like 1,4,16)", flag, part)
		}
		if v < lo {
			return nil, usagef("%s: %d is below %d", flag, v, lo)
		}
		out = append(out, v)
	}
	return out, nil
}

// parseRates parses a comma list of positive numbers such as "2,5.5"
// given to flag; the error names flag.
func parseRates(flag, s string) ([]float64, error) {
	var out []float64
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		v, err := strconv.ParseFloat(part, 64)
		if err != nil || !(v > 0) || v > 1e6 {
			return nil, usagef("%s: %q is not a positive number (want a comma list like 2,5)", flag, part)
		}
		out = append(out, v)
	}
	return out, nil
}

// headerNameRune reports whether r may be in a header name: RFC 9110's
// token characters.
func headerNameRune(r rune) bool {
	switch {
	case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
		return true
	}
	return strings.ContainsRune("!#$%&'*+-.^_`|~", r)
}

// redactHeaderArg shows a --header argument with a sensitive value hidden.
func redactHeaderArg(h string) string {
	name, _, ok := strings.Cut(h, ":")
	if !ok {
		if len(h) > 12 {
			return h[:4] + "…[REDACTED]"
		}
		return "[REDACTED]"
	}
	if api.SensitiveHeader(strings.TrimSpace(name)) {
		return strings.TrimSpace(name) + ": [REDACTED]"
	}
	return h
}

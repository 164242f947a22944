package benchmark

import (
	"crypto/tls"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/dustin/go-humanize"

	"github.com/tokbench/tokbench/api"
	"github.com/tokbench/tokbench/load"
	"github.com/tokbench/tokbench/metrics"
	"github.com/tokbench/tokbench/profile"
	"github.com/tokbench/tokbench/tokenize"
	"github.com/tokbench/tokbench/wire"
	"github.com/tokbench/tokbench/workload"
)

// Options are a benchmark as a user states it: each field is the value of
// the `tokbench bench` flag of the same name, and Options.Plan's errors
// name that flag. DefaultOptions holds the flags' defaults.
type Options struct {
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
	DatasetBudget   string
	PrefixTokens    int
	PrefixGroups    int
	MinTokens       int
	IgnoreEOS       bool
	ContinuousUsage string
	Seed            uint64

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

	// Given reports whether the user set an option, by its flag name: a
	// --profile stands in for the options not given, and a few checks
	// refuse a given value the default would allow (nil: none given).
	Given func(flag string) bool
	// Getenv reads the environment for --api-key-env (nil: os.Getenv).
	Getenv func(string) string
	// Version is the tool's version, for run.json.
	Version string
	// Host is what the machine allows (nil: LocalHost()); a plan it
	// cannot run is refused (Plan.CheckHost).
	Host *Host
}

// DefaultOptions are `tokbench bench`'s defaults.
func DefaultOptions() Options {
	return Options{
		API: "openai-chat", Concurrency: "1,4,16", Arrival: string(load.ArrivalPoisson), Burstiness: 1,
		Warmup: 1, InputTokens: "512", OutputTokens: "128", Tokenizer: tokenize.Default,
		DatasetFormat: workload.FormatAuto, DatasetBudget: "1GiB", PrefixGroups: 1, ContinuousUsage: string(Auto), Seed: 1,
		APIKeyEnv: "OPENAI_API_KEY", Connections: "warm", Redirects: "none",
		Timeout: 10 * time.Minute, Grace: 5 * time.Second,
		Repeat: 1, SweepMax: 512, GPUTelemetry: "auto", Workload: "synthetic", Steps: 5, Turns: 5, TraceSpeed: "1",
	}
}

// LongLevel is the --duration from which a level is summarized every
// minute as well, unless --summary-every says otherwise.
const LongLevel = 10 * time.Minute

// options is one Plan call's state: the options, what they parse to.
type options struct {
	Options
	prof       *profile.Profile
	slos       []metrics.SLO
	shard      load.Shard
	start      time.Time
	sweep      *load.AutoSweep
	inputs     []workload.Dist
	output     workload.Dist
	rows       []workload.Row
	copyBudget int64  // what --dataset-budget leaves besides the rows
	format     string // the dataset's, once read
	serverTok  bool
	tok        tokenize.Tokenizer
	tls        *tls.Config
	keyEnv     string
	trace      *workload.Trace
	speeds     []float64
}

func (o *options) given(flag string) bool { return o.Given != nil && o.Given(flag) }

// Plan validates the options — reading the key file, the CA file, the
// tokenizer and every dataset row, so a bad input stops the run before any
// request — and returns the plan they describe. Its errors are
// InputErrors naming the flag.
func (opts Options) Plan() (*Plan, error) {
	o := &options{Options: opts}
	if o.Getenv == nil {
		o.Getenv = os.Getenv
	}
	if o.given("url") && strings.TrimSpace(o.URL) == "" {
		// A CI script's unset variable must not gate on simulated numbers.
		return nil, inputErrorf("--url: empty; leave it out to benchmark the embedded simulator")
	}
	for _, check := range []func() error{o.loadShape, o.checkLoad, o.readTrace, o.network, o.protocol, o.workload} {
		if err := check(); err != nil {
			return nil, err
		}
	}
	p := &Plan{
		URL: o.URL, API: o.API, Model: o.Model, Header: http.Header{},
		Sim:             SimOptions{Quant: o.Quant, Hardware: o.Hardware, GPUs: o.GPUs, Seed: o.Seed},
		ContinuousUsage: Switch(o.ContinuousUsage), IgnoreEOS: o.IgnoreEOS, ServerMetrics: o.ServerMetrics,
		Client: ClientOptions{
			Timeout: o.Timeout, StallTimeout: o.StallTimeout, Grace: o.Grace,
			Retry: o.Retry, MaxErrorRate: o.MaxErrorRate, Cold: o.Connections == "cold",
			HTTP2: o.HTTP2, TLS: o.tls, FollowRedirects: o.Redirects == "same-origin",
		},
		Sweep: o.sweep, Repeat: o.Repeat, SLOs: o.slos, StartAt: o.start, Shard: o.shard, Version: o.Version,
		Prices: metrics.Prices{InputPerMillion: o.PriceIn, OutputPerMillion: o.PriceOut, GPUHour: o.GPUHourPrice, GPUs: max(o.GPUs, 1)},
	}
	if o.prof != nil {
		p.Profile = o.prof.Name
	}
	if o.Hardware == "local" && o.URL == "" {
		return nil, inputErrorf("--hardware local: judges a server on this machine; give its --url (the embedded simulator simulates catalog hardware)")
	}
	gpu, err := ParseGPUTelemetry(o.GPUTelemetry, o.URL)
	if err != nil {
		return nil, err
	}
	price, err := ParseEnergyPrice(o.EnergyPrice)
	if err != nil {
		return nil, err
	}
	if gpu != nil {
		gpu.PricePerKWh = price
		p.GPUTelemetry = gpu
	}
	if o.Remeasure && o.Hardware != "local" {
		return nil, inputErrorf("--remeasure: measures --hardware local's bandwidth; --hardware is %q", o.Hardware)
	}
	if o.GGUF != "" && (o.Hardware == "" || o.URL == "") {
		return nil, inputErrorf("--gguf: gives the model for the ceiling and MBU against a server's --hardware; give --url and --hardware too")
	}
	if o.URL != "" && o.Hardware != "" {
		in := PhysicsInput{Model: o.Model, GGUF: o.GGUF, Quant: o.Quant, Hardware: o.Hardware, ParamsB: o.ParamsB, GPUs: o.GPUs, Remeasure: o.Remeasure}
		ph, note, err := ResolvePhysics(in)
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
	if err := o.credentials(p); err != nil {
		return nil, err
	}
	spec, err := o.levelSpec()
	if err != nil {
		return nil, err
	}
	p.Levels, p.SweepLevel = spec.Levels(), spec.SweepLevel()
	if p.Sweep != nil {
		p.Levels = nil // the sweep picks its levels from results
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if err := p.checkDataset(filepath.Base(o.Dataset)); err != nil {
		return nil, err
	}
	host := o.Host
	if host == nil {
		h := LocalHost()
		host = &h
	}
	if err := p.CheckHost(*host); err != nil {
		return nil, err
	}
	p.Meta = o.meta(p.Workload)
	p.Config = o.config(p)
	return p, nil
}

// loadShape checks the load-shaping options; a --profile sets the SLOs,
// workload and steps the user did not give (and, in workload, the token
// lengths).
func (o *options) loadShape() error {
	if o.Profile != "" {
		p, err := profile.Lookup(o.Profile)
		if err != nil {
			return inputErrorf("--profile: %v", err)
		}
		o.prof = &p
		if !o.given("slo") {
			o.SLO = p.SLOs
		}
		if p.Steps > 1 && !o.given("workload") {
			o.Workload = "agent"
			if !o.given("steps") {
				o.Steps = p.Steps
			}
		}
	}
	if o.SLO != "" {
		slos, err := metrics.ParseSLOs(o.SLO)
		if err != nil {
			return inputErrorf("--slo: %v", err)
		}
		o.slos = slos
	}
	switch {
	case o.PriceIn < 0 || o.PriceOut < 0 || o.GPUHourPrice < 0:
		return inputErrorf("--price-in, --price-out and --gpu-hour-price must not be negative")
	case o.GPUHourPrice > 0 && (o.PriceIn > 0 || o.PriceOut > 0):
		return inputErrorf("--gpu-hour-price: prices a run you host; --price-in/--price-out price a provider's tokens; give one or the other")
	case o.SweepMax < 1:
		return inputErrorf("--sweep-max: must be at least 1, got %d", o.SweepMax)
	case o.ThinkTime < 0:
		return inputErrorf("--think-time: must not be negative")
	case o.RampUp < 0:
		return inputErrorf("--ramp-up: must not be negative")
	case o.SummaryEvery < 0 || o.SummaryEvery > 0 && o.SummaryEvery < time.Second:
		return inputErrorf("--summary-every: want 1s or more, got %s", o.SummaryEvery)
	}
	if o.Shard != "" {
		sh, err := load.ParseShard(o.Shard)
		if err != nil {
			return inputErrorf("--shard: %v", err)
		}
		o.shard = sh
		if o.Sweep != "" {
			return inputErrorf("--shard: an automatic sweep decides its levels from results; give the levels explicitly")
		}
	}
	if o.StartAt != "" {
		t, err := time.Parse(time.RFC3339Nano, o.StartAt)
		if err != nil {
			return inputErrorf("--start-at: want an RFC 3339 instant like 2026-01-02T15:04:05Z, got %q", o.StartAt)
		}
		o.start = t
	}
	switch o.Workload {
	case "synthetic":
		o.Steps = 1
	case "agent":
		if o.Steps < 2 {
			return inputErrorf("--steps: an agent chain needs at least 2 calls, got %d", o.Steps)
		}
	case "chat":
		// A conversation is a chain whose every turn carries the whole
		// history, as an agent's calls do; --turns counts them.
		if o.Turns < 2 {
			return inputErrorf("--turns: a conversation needs at least 2 turns, got %d", o.Turns)
		}
		if o.given("steps") {
			return inputErrorf("--steps: counts an agent chain's calls; a chat's are --turns")
		}
		o.Steps = o.Turns
	default:
		return inputErrorf("--workload: unknown %q (known: synthetic, agent, chat)", o.Workload)
	}
	if o.given("turns") && o.Workload != "chat" {
		return inputErrorf("--turns: counts a conversation's turns; give --workload chat")
	}
	switch o.Sweep {
	case "":
	case "auto":
		if o.Rate != "" {
			return inputErrorf("--sweep: auto sweeps concurrency; it does not combine with --rate")
		}
		if o.given("concurrency") {
			return inputErrorf("--sweep: auto chooses the concurrency levels; drop --concurrency")
		}
		o.sweep = &load.AutoSweep{Max: o.SweepMax, Refine: 2, SLOs: o.slos}
	default:
		return inputErrorf("--sweep: unknown %q (known: auto)", o.Sweep)
	}
	return nil
}

// checkLoad checks the level options: open-loop options need --rate,
// counts and durations are positive.
func (o *options) checkLoad() error {
	if o.Rate != "" {
		if o.given("concurrency") {
			return inputErrorf("--rate: give --concurrency (closed loop) or --rate (open loop), not both")
		}
		switch metrics.Arrival(o.Arrival) {
		case load.ArrivalConstant, load.ArrivalPoisson, load.ArrivalGamma:
		default:
			return inputErrorf("--arrival: unknown %q (known: constant, poisson, gamma)", o.Arrival)
		}
		if !(o.Burstiness > 0) {
			return inputErrorf("--burstiness: must be positive, got %g", o.Burstiness)
		}
		if o.MaxConcurrency < 0 {
			return inputErrorf("--max-concurrency: must be 0 or more, got %d", o.MaxConcurrency)
		}
	} else {
		for _, name := range []string{"arrival", "burstiness", "max-concurrency"} {
			if o.given(name) {
				return inputErrorf("--%s: applies to open-loop levels; give --rate too", name)
			}
		}
	}
	switch {
	case o.Requests < 0 || o.given("requests") && o.Requests == 0:
		return inputErrorf("--requests: must be at least 1, got %d (leave it out for the default)", o.Requests)
	case o.Duration < 0 || o.given("duration") && o.Duration == 0:
		return inputErrorf("--duration: must be positive, got %s", o.Duration)
	case o.Warmup < 0:
		return inputErrorf("--warmup: must be 0 or more, got %d", o.Warmup)
	case o.GPUs < 0:
		return inputErrorf("--gpus: must be positive, got %d", o.GPUs)
	case o.ParamsB < 0:
		return inputErrorf("--params: must be positive, got %g", o.ParamsB)
	}
	return nil
}

// network checks the transport options and reads the CA file.
func (o *options) network() error {
	switch {
	case o.Connections != "warm" && o.Connections != "cold":
		return inputErrorf("--connections: want warm or cold, got %q", o.Connections)
	case o.Redirects != "none" && o.Redirects != "same-origin":
		return inputErrorf("--redirects: want none or same-origin, got %q", o.Redirects)
	}
	cfg, err := wire.ClientTLS(o.Insecure, o.CACert)
	if err != nil {
		return inputErrorf("--ca-cert: %v", err)
	}
	o.tls = cfg
	return nil
}

// protocol checks the URL, the API and the usage switch.
func (o *options) protocol() error {
	if o.URL != "" {
		if _, err := (api.OpenAI{}).Endpoint(o.URL); err != nil {
			return inputErrorf("--url: %v", err)
		}
		// Every API tokbench speaks runs over HTTP: another scheme is the
		// URL's mistake, not a server that is down.
		if u, _ := url.Parse(strings.TrimSpace(o.URL)); u.Scheme != "http" && u.Scheme != "https" {
			return inputErrorf("--url: scheme %q is not http or https: want http(s)://host[:port][/v1]", u.Scheme)
		}
	}
	if o.API != "auto" {
		if _, err := api.ByName(o.API); err != nil {
			return inputErrorf("--api: %v", err)
		}
	}
	switch Switch(o.ContinuousUsage) {
	case Auto, On, Off:
	default:
		return inputErrorf("--continuous-usage: unknown %q (known: auto, on, off)", o.ContinuousUsage)
	}
	return CheckContinuousUsage(o.API, Switch(o.ContinuousUsage))
}

// workload parses the prompt and length options, loads the tokenizer and
// reads every dataset row. A --profile's lengths stand in for
// --input-tokens and --output-tokens when they are not given.
func (o *options) workload() error {
	var err error
	prof := o.prof
	if prof != nil && !o.given("input-tokens") && prof.InputTokens > 0 {
		o.inputs = []workload.Dist{workload.Fixed(prof.InputTokens)}
	} else if o.inputs, err = workload.ParseDists(o.InputTokens); err != nil {
		return inputErrorf("--input-tokens: %v", err)
	}
	if prof != nil && !o.given("output-tokens") && prof.OutputTokens > 0 {
		o.output = workload.Fixed(prof.OutputTokens)
	} else if o.output, err = workload.ParseDist(o.OutputTokens); err != nil {
		return inputErrorf("--output-tokens: %v", err)
	}
	switch {
	case len(o.inputs) > 1 && o.Sweep != "":
		return inputErrorf("--input-tokens: a list sweeps input length; it does not combine with --sweep")
	case len(o.inputs) > 1 && o.Dataset != "":
		return inputErrorf("--input-tokens: a list sweeps synthetic input length; it does not combine with --dataset")
	case o.PrefixTokens < 0:
		return inputErrorf("--prefix-tokens: must be 0 or more, got %d", o.PrefixTokens)
	case o.PrefixGroups < 1:
		return inputErrorf("--prefix-groups: must be at least 1, got %d", o.PrefixGroups)
	case o.MinTokens < 0:
		return inputErrorf("--min-tokens: must be 0 or more, got %d", o.MinTokens)
	}
	name := o.Tokenizer
	if name == "server" {
		o.serverTok = true
		name = tokenize.Default // builds prompts and counts output without usage
	}
	if o.tok, err = tokenize.Open(name); err != nil {
		return inputErrorf("--tokenizer: %v", err)
	}
	budget, err := humanize.ParseBytes(o.DatasetBudget)
	if err != nil || budget == 0 || budget > 1<<62 {
		return inputErrorf("--dataset-budget: want a size such as 512MiB or 4GiB, got %q", o.DatasetBudget)
	}
	if o.Dataset == "" {
		return nil
	}
	ds, err := workload.OpenDataset(o.Dataset, o.DatasetFormat, 100_000, o.Seed, workload.Limits{Tokenizer: o.tok, Budget: int64(budget)})
	switch {
	case errors.Is(err, workload.ErrFormat):
		return inputErrorf("--dataset-format: %v", err)
	case errors.Is(err, workload.ErrBudget):
		return inputErrorf("--dataset: %v; --dataset-budget raises it", err)
	case err != nil:
		return inputErrorf("--dataset: %v", err)
	}
	o.format, o.rows = ds.Format, ds.Rows
	o.copyBudget = max(1, int64(budget)-workload.RowsBytes(ds.Rows))
	return nil
}

// plannedWorkload is the validated workload as the plan's.
func (o *options) plannedWorkload(promptSeed uint64) Workload {
	wl := Workload{
		Inputs: o.inputs, Output: o.output, Rows: o.rows, CopyBudget: o.copyBudget,
		PrefixTokens: o.PrefixTokens, PrefixGroups: o.PrefixGroups, MinTokens: o.MinTokens,
		Tokenizer: o.tok, ServerTokenizer: o.serverTok, PromptSeed: promptSeed, Chat: o.Workload == "chat",
		// The first length stands for the run where one number is needed
		// (run.json, the physics context).
		InputTokens: int(o.inputs[0].Mean), OutputTokens: int(o.output.Mean),
	}
	if o.format == workload.FormatText {
		wl.Corpus = o.Dataset
	}
	if t := o.trace; t != nil {
		wl.Trace = t
		in, out := 0, 0
		for _, r := range t.Requests {
			in, out = in+r.InputTokens, out+r.OutputTokens
		}
		wl.InputTokens, wl.OutputTokens = in/len(t.Requests), out/len(t.Requests)
	}
	return wl
}

// readTrace reads --trace, its window and speeds; a trace is the load, so
// the options that make levels of their own are refused beside it.
func (o *options) readTrace() error {
	if o.Trace == "" {
		for _, name := range []string{"trace-format", "trace-speed", "trace-window"} {
			if o.given(name) {
				return inputErrorf("--%s: applies to a replayed trace; give --trace too", name)
			}
		}
		return nil
	}
	for _, name := range []string{"concurrency", "rate", "sweep", "requests", "duration", "dataset", "input-tokens", "output-tokens", "shard", "workload", "arrival", "burstiness"} {
		if o.given(name) {
			return inputErrorf("--%s: a --trace run sends the trace's requests at the trace's instants with its lengths; leave --%s out", name, name)
		}
	}
	t, err := workload.ReadTrace(o.Trace, o.TraceFormat)
	if err != nil {
		return inputErrorf("--trace: %v", err)
	}
	if o.TraceWindow != "" {
		a, b, ok := strings.Cut(o.TraceWindow, ":")
		from, err1 := traceInstant(a)
		to, err2 := traceInstant(b)
		if !ok || err1 != nil || err2 != nil || b != "" && to <= from {
			return inputErrorf("--trace-window: want A:B, trace time from its first request (seconds or durations: 600:1200, 10m:20m, 10m:), got %q", o.TraceWindow)
		}
		if t = t.Window(from, to); len(t.Requests) == 0 {
			return inputErrorf("--trace-window: %s holds no request of %s", o.TraceWindow, o.Trace)
		}
	}
	for _, f := range strings.Split(o.TraceSpeed, ",") {
		v, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil || !(v > 0) || v > 1e6 {
			return inputErrorf("--trace-speed: want positive factors (2 is twice as fast), got %q", o.TraceSpeed)
		}
		o.speeds = append(o.speeds, v)
	}
	o.trace = t
	o.IgnoreEOS = true // the trace's output lengths, exactly
	return nil
}

// traceInstant reads one end of --trace-window: seconds or a duration
// ("" is 0).
func traceInstant(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, nil
	}
	if v, err := strconv.ParseFloat(s, 64); err == nil && v >= 0 {
		return time.Duration(v * float64(time.Second)), nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, errors.New("bad instant")
	}
	return d, nil
}

// credentials sets the plan's headers, API key and secrets: the key from
// --api-key-file, else from --api-key-env's variable.
func (o *options) credentials(p *Plan) error {
	for _, h := range o.Headers {
		name, value, ok := strings.Cut(h, ":")
		name = strings.TrimSpace(name)
		if !ok || name == "" || strings.ContainsAny(name, " \t") {
			return inputErrorf("--header: want 'Name: value', got %q", redactHeaderArg(h))
		}
		if i := strings.IndexFunc(name, func(r rune) bool { return !headerNameRune(r) }); i >= 0 {
			return inputErrorf("--header: name %q holds %q, which a header name cannot", name, name[i:i+1])
		}
		value = strings.TrimSpace(value)
		// A CR or LF would end the header and start another (or the
		// body): HTTP forbids them, and Go's client refuses to send one.
		if strings.ContainsAny(value, "\r\n\x00") {
			return inputErrorf("--header: the value of %s holds a line break or NUL (CR, LF or NUL), which a header value cannot", name)
		}
		p.Header.Add(name, value)
		if sensitiveHeader(name) {
			p.Secrets = append(p.Secrets, value)
		}
	}
	p.Secrets = append(p.Secrets, api.URLSecrets(o.URL)...)
	o.keyEnv = o.APIKeyEnv
	if o.API == "anthropic" && !o.given("api-key-env") {
		o.keyEnv = "ANTHROPIC_API_KEY"
	}
	if o.APIKeyFile != "" {
		b, err := os.ReadFile(o.APIKeyFile)
		if err != nil {
			// The error names the file, never its contents.
			return inputErrorf("--api-key-file: %v", err)
		}
		key := strings.TrimSpace(string(b))
		if key == "" || strings.ContainsAny(key, "\r\n") {
			return inputErrorf("--api-key-file: %s must hold one key on one line", o.APIKeyFile)
		}
		p.APIKey = key
		return nil
	}
	if o.keyEnv != "" {
		p.APIKey = strings.TrimSpace(o.Getenv(o.keyEnv))
		if p.APIKey == "" && o.given("api-key-env") {
			// Named on purpose, so a key is meant to go: a run without it
			// would measure 401s (or a different tier).
			return inputErrorf("--api-key-env: $%s is not set or is empty", o.keyEnv)
		}
	}
	return nil
}

// levels are the configured levels (a shard runs its part of each); none
// when a sweep picks them.
func (o *options) levels() (conc []int, rates []float64, err error) {
	if o.Rate != "" {
		rates, err = ParseRates("--rate", o.Rate)
	} else if o.Sweep == "" {
		conc, err = ParseCounts("--concurrency", o.Concurrency, 1)
	}
	return conc, rates, err
}

// levelSpec is the load the options ask for.
func (o *options) levelSpec() (LevelSpec, error) {
	spec := LevelSpec{
		Arrival: metrics.Arrival(o.Arrival), Burstiness: o.Burstiness, MaxInFlight: o.MaxConcurrency,
		Requests: o.Requests, Duration: o.Duration, Warmup: o.Warmup, Seed: o.Seed,
		Steps: o.Steps, ThinkTime: o.ThinkTime, RampUp: o.RampUp, Lockstep: o.Lockstep, Shard: o.shard,
		SummaryEvery: o.SummaryEvery,
	}
	if spec.SummaryEvery == 0 && o.Duration >= LongLevel {
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
func (o *options) meta(wl Workload) map[string]string {
	m := map[string]string{}
	for k, v := range map[string]string{"hardware": o.Hardware, "quant": o.Quant, "engine": o.Engine, "label": o.Label} {
		if v != "" {
			m[k] = v
		}
	}
	if o.GPUs > 0 {
		m["gpus"] = fmt.Sprint(o.GPUs)
	}
	m["input_tokens"] = fmt.Sprint(wl.InputTokens)
	m["output_tokens"] = fmt.Sprint(wl.OutputTokens)
	return m
}

// config is run.json's configuration, without secrets: sensitive header
// values read "[REDACTED]".
func (o *options) config(p *Plan) Config {
	var hs []string
	for _, h := range o.Headers {
		hs = append(hs, redactHeaderArg(h))
	}
	conc, rates, _ := o.levels()
	var trace *TraceConfig
	if t := o.trace; t != nil {
		conc = nil
		trace = &TraceConfig{File: t.Path, Format: t.Format, Speed: o.speeds, Window: o.TraceWindow,
			Requests: len(t.Requests), SpanS: t.Span().Seconds()}
	}
	var in []string
	for _, d := range o.inputs {
		in = append(in, d.String())
	}
	return Config{
		URL: api.RedactURL(o.URL), API: o.API, Model: o.Model,
		Concurrency: conc, Rate: rates, Arrival: o.Arrival, Burstiness: o.Burstiness,
		MaxConcurrency: o.MaxConcurrency, Requests: o.Requests, Duration: o.Duration.String(),
		Warmup: o.Warmup, Trace: trace, InputTokens: p.Workload.InputTokens, OutputTokens: p.Workload.OutputTokens,
		Tokenizer: p.Workload.Tokenizer.Name(), IgnoreEOS: o.IgnoreEOS, Headers: hs,
		APIKeyEnv: o.keyEnv, Timeout: o.Timeout.String(), StallTimeout: o.StallTimeout.String(),
		Seed: o.Seed, PromptSeed: p.Workload.PromptSeed,
		Load: LoadConfig{
			SLO: strings.TrimSpace(o.SLO), Profile: o.Profile, Repeat: o.Repeat, Sweep: o.Sweep,
			StartAt: o.StartAt, Workload: o.Workload, Steps: o.Steps, ThinkTime: o.ThinkTime.String(),
			RampUp: o.RampUp.String(), Lockstep: o.Lockstep, SummaryEvery: o.SummaryEvery.String(),
			PriceIn: o.PriceIn, PriceOut: o.PriceOut, GPUHourPrice: o.GPUHourPrice,
		},
		HTTP2: o.HTTP2, Connections: o.Connections, Redirects: o.Redirects, Shard: o.Shard,
		Prompts: PromptConfig{
			InputTokens: in, OutputTokens: o.output.String(), Dataset: o.Dataset,
			DatasetFormat: o.format, PrefixTokens: o.PrefixTokens, PrefixGroups: o.PrefixGroups,
			MinTokens: o.MinTokens, TokenizerServer: o.serverTok,
		},
	}
}

// ParseCounts parses a comma list of whole numbers such as "1,4,16" given
// to flag, each at least lo; the error is an InputError naming flag.
func ParseCounts(flag, s string, lo int) ([]int, error) {
	var out []int
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		v, err := strconv.Atoi(part)
		if err != nil {
			return nil, inputErrorf("%s: %q is not a whole number (want a comma list like 1,4,16)", flag, part)
		}
		if v < lo {
			return nil, inputErrorf("%s: %d is below %d", flag, v, lo)
		}
		out = append(out, v)
	}
	return out, nil
}

// ParseRates parses a comma list of positive numbers such as "2,5.5"
// given to flag; the error is an InputError naming flag.
func ParseRates(flag, s string) ([]float64, error) {
	var out []float64
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		v, err := strconv.ParseFloat(part, 64)
		if err != nil || !(v > 0) || v > 1e6 {
			return nil, inputErrorf("%s: %q is not a positive number (want a comma list like 2,5)", flag, part)
		}
		out = append(out, v)
	}
	return out, nil
}

// sensitiveHeader reports whether a header's value is a credential.
func sensitiveHeader(name string) bool { return api.SensitiveHeader(name) }

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
	if sensitiveHeader(strings.TrimSpace(name)) {
		return strings.TrimSpace(name) + ": [REDACTED]"
	}
	return h
}

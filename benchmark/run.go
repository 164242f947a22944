package benchmark

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"time"

	"github.com/tokbench/tokbench/api"
	"github.com/tokbench/tokbench/load"
	"github.com/tokbench/tokbench/metrics"
	"github.com/tokbench/tokbench/probe"
	"github.com/tokbench/tokbench/report"
	"github.com/tokbench/tokbench/results"
	"github.com/tokbench/tokbench/sim"
	"github.com/tokbench/tokbench/tokenize"
	"github.com/tokbench/tokbench/wire"
	"github.com/tokbench/tokbench/workload"
)

// Hooks are how a caller watches a run; every field may be nil.
type Hooks struct {
	// Out receives run.json, every record as it completes, summary.json
	// and report.html.
	Out *results.Writer
	// Notice is told each line the user should read as the run sets up
	// ("benchmarking the embedded SIMULATED server…").
	Notice func(string)
	// Runner is called with the load runner and the run's target (its
	// model and API settled) before the first level: live metrics and
	// terminal charts chain onto its Sink.
	Runner func(*load.Runner, metrics.Target) error
	// Level is called as each run of a level starts; the function it
	// returns, when the run ends (a progress line).
	Level func(*load.Runner, load.Level) func()
	// Adapter, when set, wraps the protocol adapter the run settled on
	// (after probing), e.g. to read what a test server writes into each
	// chunk.
	Adapter func(api.Adapter) api.Adapter
	// Source, when set, makes each level's requests (idx: the level's
	// place in the order run) instead of the plan's workload; the plan's
	// Workload still gives the tokenizer that counts output without usage.
	Source func(idx int, lv load.Level) load.Source
	// Window is given each periodic summary of a level run with
	// SummaryEvery, as its window closes (idx: the level's place in the
	// order run).
	Window func(idx int, lv metrics.Load, w metrics.Window)
	// Hurry, closed once ctx has ended, cuts the grace short: streams in
	// flight are canceled now and the server is not scraped again, but
	// what was measured is written all the same. Nil: the grace runs.
	Hurry <-chan struct{}
}

// Result is what a run measured.
type Result struct {
	Summary metrics.Summary
	// NewIndex maps each level's place in the order run to its place in
	// Summary.Levels (load order, as a sweep runs 1, 2, 4, 8, then 3); nil
	// when the two orders agree.
	NewIndex []int
	// WriteErr is the first failure to write the run directory: what was
	// written is valid, but not whole.
	WriteErr error
}

// Completed counts the requests that completed over every level.
func (r *Result) Completed() int {
	n := 0
	for _, lv := range r.Summary.Levels {
		n += lv.Requests.Completed
	}
	return n
}

// run is one Run's state: what probing and set-up decided.
type run struct {
	p        *Plan
	hooks    Hooks
	current  metrics.Load // the level running, for Hooks.Window
	base     string       // the URL requests go to (the simulator's without Plan.URL)
	target   metrics.Target
	model    string
	adapter  api.Adapter
	header   http.Header
	key      string // the API key, and the header it went in
	keyHdr   string
	secrets  []string
	detected *probe.Detection
	// maxModelLen is vLLM's max_model_len from the model list.
	maxModelLen   int
	physics       *Physics
	notes         []string
	serverMetrics bool
	counter       workload.Counter
	http          *http.Client
	transport     *wire.Transport
	twinDone      bool // the text-only twin of a request with media was sent
	mediaCost     *metrics.MediaCost
}

func (r *run) notice(format string, args ...any) {
	if r.hooks.Notice != nil {
		r.hooks.Notice(fmt.Sprintf(format, args...))
	}
}

// Run validates the plan and runs it. Set-up failures (an InputError, a server that cannot
// be reached) are errors before any level; failed requests are
// measurements, in the Result. An interrupt (ctx canceled) ends the level
// in flight and returns what was measured, with Summary.Interrupted set.
func Run(ctx context.Context, p *Plan, hooks Hooks) (*Result, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	r := &run{
		p: p, hooks: hooks, base: p.URL, model: p.Model,
		header: p.Header.Clone(), secrets: append(api.URLSecrets(p.URL), p.Secrets...),
		notes: append([]string(nil), p.Notes...), serverMetrics: p.ServerMetrics,
	}
	// A credential in a header is a secret whoever set it: the CLI lists
	// its own in Secrets, a library caller need not.
	for name, vs := range p.Header {
		if api.SensitiveHeader(name) {
			r.secrets = append(r.secrets, vs...)
		}
	}
	// The run completes the deployment from the server (its slots): on a
	// copy, so that the plan stays as given and may be run again.
	if p.Physics != nil {
		ph := *p.Physics
		r.physics = &ph
	}
	if r.header == nil {
		r.header = http.Header{}
	}
	var err error
	if p.API == "auto" {
		r.adapter = api.OpenAI{Chat: true} // until probing picks one
	} else if r.adapter, err = api.ByName(p.API); err != nil {
		return nil, fieldErrorf("API", "%v", err)
	}
	r.setAPIKey(p.APIKey)
	if t := p.Workload.Trace; t != nil {
		for _, n := range t.Notes {
			r.notice("%s", n) // and in the summary's warnings, from the plan's notes
		}
	}
	r.target = metrics.Target{URL: api.RedactURL(p.URL), API: r.adapter.Name(), Model: p.Model}
	if p.URL == "" {
		simCtx, stopSim := context.WithCancel(context.WithoutCancel(ctx))
		defer stopSim()
		emb, err := startEmbedded(simCtx, p.Sim, p.Model)
		if err != nil {
			return nil, err
		}
		defer emb.srv.Close()
		r.base, r.target.URL, r.target.Simulated = emb.url, emb.url, true
		r.model = cmp.Or(r.model, emb.model)
		r.target.Model = r.model
		c := emb.srv.Config()
		if r.physics, _, err = ResolvePhysics(PhysicsInput{Model: c.Model, Quant: c.Quant, Hardware: c.Hardware, GPUs: c.GPUs}); err != nil {
			return nil, err
		}
		r.notice("no --url given: benchmarking the embedded SIMULATED server (%s) at %s", emb.desc, emb.url)
	}

	r.transport, r.http = NewTransport(p.Client)
	defer r.http.CloseIdleConnections()
	if err := r.setUp(ctx); err != nil {
		return nil, err
	}
	return r.measure(ctx)
}

// setUp probes the server and settles the protocol, the model and what
// the requests ask for.
func (r *run) setUp(ctx context.Context) error {
	p := r.p
	if err := r.detect(ctx); err != nil {
		return err
	}
	r.checkModel()
	if err := r.checkMedia(); err != nil {
		return err
	}
	if p.IgnoreEOS && !api.SendsIgnoreEOS(r.adapter) {
		note := fmt.Sprintf("--ignore-eos: the %s API has no way to generate past the end of sequence, so it is not sent; outputs may end before --output-tokens", r.adapter.Name())
		r.notes = append(r.notes, note)
		r.notice("%s", note)
	}
	if len(p.Workload.Tools) > 0 && !api.SendsTools(r.adapter) {
		note := fmt.Sprintf("--tools: the %s API takes no tool definitions, so the requests go without them", r.adapter.Name())
		r.notes = append(r.notes, note)
		r.notice("%s", note)
	}
	engine := "" // what the probes already made say the server is
	if d := r.detected; p.API == "auto" && d != nil {
		engine = d.Engine
		switch d.Engine {
		case "vllm", "sglang", "tgi", "llama.cpp", sim.EngineName:
			r.serverMetrics = true
		}
	}
	if r.target.Simulated {
		engine = sim.EngineName
	}
	if r.model == "" && r.adapter.Name() != api.EmbedTEI { // TEI serves one model and its requests name none
		models, err := probe.ListModels(ctx, r.http, r.base, r.header)
		if err != nil {
			return modelListError(err, r.secrets)
		}
		m := models[0]
		r.maxModelLen = m.MaxModelLen
		r.model, r.target.Model = m.ID, m.ID
		engine = cmp.Or(engine, m.OwnedBy)
	}
	if err := r.checkContext(); err != nil {
		return err
	}
	if err := r.serverPhysics(ctx); err != nil {
		return err
	}
	if err := r.setContinuousUsage(engine); err != nil {
		return err
	}
	if p.ContinuousUsage == Auto && r.continuousUsage() && engine == "vllm" {
		r.notice("the server is vLLM: asking for usage in every chunk, for exact tokens per chunk (--continuous-usage off stops it)")
	}
	if p.Workload.ServerTokenizer {
		// One word counted now: a server without /tokenize stops the run
		// before any level.
		srv := &tokenize.Server{BaseURL: r.base, Model: r.model, HTTP: r.http, Header: r.header}
		if _, err := srv.CountContext(ctx, "hello"); err != nil {
			if errors.Is(err, tokenize.ErrNoEndpoint) {
				return fieldErrorf("Workload.ServerTokenizer", "%v", err)
			}
			return fmt.Errorf("--tokenizer server: %w", err)
		}
		r.counter = srv
	}
	return nil
}

// checkContext refuses levels whose requests the server's context cannot
// hold (prompt and max_tokens past max_model_len, which vLLM and the
// simulator answer with a 400), by what the server said: its model list's
// max_model_len, or what detection found. A server that says nothing is
// not checked.
func (r *run) checkContext() error {
	limit := r.maxModelLen
	if d := r.detected; limit == 0 && d != nil {
		limit = d.MaxContext
	}
	wl := r.p.Workload
	if limit <= 0 || len(wl.Rows) > 0 || wl.Trace != nil {
		return nil
	}
	in0, out := wl.Lengths()
	for _, lv := range r.p.levels() {
		in := in0
		if lv.Load.InputTokens > 0 {
			in = lv.Load.InputTokens
		}
		if need := wl.PrefixTokens + in + out; need > limit {
			return fieldErrorf("Workload.Inputs", "%d prompt tokens and %d of output at %s are %d, past the server's context of %d tokens (max_model_len): the server would refuse every request",
				wl.PrefixTokens+in, out, lv.Load, need, limit)
		}
	}
	return nil
}

// modelListError words a failed model list: a server that cannot be
// reached is the run's failure, or the URL's (a name that does not
// resolve), not --model's; an answer that lists no model asks for --model.
func modelListError(err error, secrets []string) error {
	msg := api.Scrub(err.Error(), secrets)
	if ue, ok := errors.AsType[*probe.UnreachableError](err); ok {
		if ue.Class == api.ClassDNS {
			return fieldErrorf("URL", "%s", msg)
		}
		return errors.New(msg + " (is the server running at that address?)")
	}
	return fieldErrorf("Model", "not given, and the server did not list one: %s", msg)
}

// measure runs the levels and writes the run directory.
func (r *run) measure(ctx context.Context) (*Result, error) {
	p, w := r.p, r.hooks.Out
	tok := p.Workload.Tokenizer
	if r.hooks.Adapter != nil {
		r.adapter = r.hooks.Adapter(r.adapter)
	}
	mc := newClient(p.Client, r.transport, r.http, r.adapter, r.base, r.header, r.secrets, tok)
	runner := mc.Runner
	runner.SLOs = p.SLOs // judged over every record, however many the summary holds
	runner.Hurry = r.hooks.Hurry
	if hook := r.hooks.Window; hook != nil {
		runner.OnWindow = func(idx int, w metrics.Window) { hook(idx, r.current, w) }
	}
	res := &Result{}
	var sinkErr error
	var rec results.Run
	if w != nil {
		runner.Sink = func(m metrics.Record) {
			if err := w.Append(m); err != nil && sinkErr == nil {
				sinkErr = err
			}
		}
		rec = results.Run{
			Tool: "tokbench", Version: p.Version, StartedAt: time.Now().UTC(),
			Target: r.target, Meta: r.meta(), Config: results.ConfigMap(r.config()),
		}
		if err := w.WriteRun(rec); err != nil {
			return nil, fmt.Errorf("--out: %w", err) // the machine's failure (a full disk), not bad input
		}
	}
	if r.hooks.Runner != nil {
		if err := r.hooks.Runner(runner, r.target); err != nil {
			return nil, err
		}
	}
	summary := metrics.Summary{Schema: metrics.Schema, Target: r.target, Warnings: r.notes}
	var scrape *serverScrape
	if r.serverMetrics {
		scrape = &serverScrape{client: r.http, base: r.base, header: r.header, warn: &summary.Warnings, delta: probe.MetricsSnapshot{}, hurry: r.hooks.Hurry}
	}
	var gpu *gpuSampling
	if p.GPUTelemetry != nil {
		var err error
		if gpu, err = startGPUSampling(ctx, *p.GPUTelemetry, r.http, &summary.Warnings); err != nil {
			return nil, err
		}
		defer gpu.close()
	}
	runOnce := func(ctx context.Context, i int, lv load.Level) (load.Result, error) {
		src, err := r.source(ctx, i, lv)
		if err != nil {
			return load.Result{}, err
		}
		r.current = lv.Load // before the level's goroutines start
		r.twin(ctx, runner, src)
		if r.hooks.Level != nil {
			runner.Reset() // its watcher reads nothing of the level before
			defer r.hooks.Level(runner, lv)()
		}
		if scrape == nil && gpu == nil {
			return runner.RunLevel(ctx, i, lv, src)
		}
		// Scraped or sampled, the warm-up runs first (on the level's
		// runner, labelled so, counted nowhere), so the level's figures
		// hold the measured requests only.
		lv = warmUp(lv, func() { runner.WarmUp(ctx, i, lv, src) })
		measured := func(lv load.Level) (load.Result, error) { return runner.RunLevel(ctx, i, lv, src) }
		if gpu != nil {
			inner := measured
			measured = func(lv load.Level) (load.Result, error) { return gpu.around(lv, inner) }
		}
		if scrape == nil {
			return measured(lv)
		}
		return scrape.around(ctx, lv, measured)
	}
	annotate := func(lv *metrics.Level) {
		if !p.Workload.ServerTokenizer && !strings.HasSuffix(tok.Name(), ".json") {
			lv.NotCountedByModel() // a tiktoken encoding, not the model's own tokenizer
		}
		if r.physics != nil {
			r.physics.annotate(lv, r.contextTokens(lv))
		}
		if scrape != nil {
			scrape.annotate(lv)
		}
		if gpu != nil {
			gpu.annotate(lv)
		}
		lv.NameQueue(r.serverSlots())
		if p.Workload.Chat {
			lv.Conversations()
		}
	}
	var err error
	if !waitUntil(ctx, p.StartAt) {
		summary.Interrupted = true
	} else if summary.Levels, summary.Interrupted, err = r.runLevels(ctx, runOnce, annotate); err != nil {
		return nil, err
	}
	r.finish(&summary)
	if newIndex, moved := metrics.SortLevels(summary.Levels); moved {
		res.NewIndex = newIndex
		if w != nil {
			if err := w.RenumberLevels(newIndex); err != nil {
				summary.Warnings = append(summary.Warnings, err.Error())
			}
		}
	}
	if sinkErr != nil {
		summary.Warnings = append(summary.Warnings, "writing requests.jsonl failed: "+sinkErr.Error())
	}
	res.WriteErr = sinkErr
	if w != nil {
		// run.json again, now with what the run measured with.
		rec.Transport = r.measuredTransport(summary.Levels)
		if err := w.WriteRun(rec); err != nil {
			res.WriteErr = cmp.Or(res.WriteErr, err)
		}
		if err := w.WriteSummary(summary); err != nil {
			res.WriteErr = cmp.Or(res.WriteErr, err)
		} else if sinkErr == nil { // (a report of records that were not all written would mislead)
			if err := report.WriteHTMLFile(w.Dir()); err != nil {
				res.WriteErr = cmp.Or(res.WriteErr, err)
			}
		}
	}
	res.Summary = summary
	return res, nil
}

// waitUntil blocks until t (none when zero); false when ctx ended first.
func waitUntil(ctx context.Context, t time.Time) bool {
	if t.IsZero() {
		return true
	}
	timer := time.NewTimer(time.Until(t))
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-timer.C:
		return true
	}
}

// source makes the requests of level idx.
func (r *run) source(ctx context.Context, idx int, lv load.Level) (load.Source, error) {
	if r.hooks.Source != nil {
		return r.hooks.Source(idx, lv), nil
	}
	wl := r.p.Workload
	if wl.Trace != nil {
		src, err := workload.NewTraceSource(wl.Trace, wl.Tokenizer, r.model, r.p.Shard.Seed(wl.PromptSeed))
		if err != nil {
			return nil, fieldErrorf("Workload.Trace", "%v", err)
		}
		return r.shape(src), nil
	}
	cfg, n := r.p.sourceConfig(idx, lv)
	if wl.EmbedInputs > 1 {
		n *= wl.EmbedInputs // each request embeds that many prompts
	}
	cfg.Counter, cfg.Model = r.counter, r.model
	if wl.Corpus != "" {
		c, err := workload.OpenCorpus(wl.Corpus)
		if err != nil {
			return nil, fieldErrorf("Workload.Rows", "%v", err)
		}
		defer c.Close()
		cfg.Corpus = c
	}
	src, err := workload.NewSource(ctx, cfg, n)
	if errors.Is(err, workload.ErrBudget) {
		return nil, fieldErrorf("Workload.Rows", "%v; a larger Workload.CopyBudget raises it", err)
	}
	if err != nil {
		return nil, err
	}
	return r.shape(src), nil
}

// shape makes src's requests what the protocol sends: an embeddings API's
// inputs, a chat API's tools.
func (r *run) shape(src load.Source) load.Source {
	wl := r.p.Workload
	switch {
	case api.IsEmbeddings(r.adapter):
		return workload.NewEmbedSource(src, wl.EmbedInputs)
	case len(wl.Tools) > 0 && api.SendsTools(r.adapter):
		return workload.NewToolSource(src, wl.Tools)
	}
	return src
}

// sourceConfig is what level idx's requests are made of, and how many
// are made before it starts (warm-ups are variants of these:
// Source.WarmupRequest). The server's tokenizer and model are the run's
// to add.
func (p *Plan) sourceConfig(idx int, lv load.Level) (workload.Config, int) {
	wl := p.Workload
	in := wl.Inputs[0]
	if lv.Load.InputTokens > 0 {
		in = workload.Fixed(lv.Load.InputTokens)
	}
	return workload.Config{
		Tokenizer: wl.Tokenizer, Input: in, Output: wl.Output, Rows: wl.Rows,
		PrefixTokens: wl.PrefixTokens, PrefixGroups: wl.PrefixGroups,
		IgnoreEOS: p.IgnoreEOS, MinTokens: wl.MinTokens, Steps: lv.Steps,
		Seed: p.Shard.Seed(wl.PromptSeed), Level: idx, MaxBytes: wl.CopyBudget, Media: wl.Media,
	}, plannedRequests(lv)
}

// checkDataset refuses, before any request, a level whose requests would
// take more memory in copies of the dataset's rows than its budget leaves
// (workload.Config.CheckCopies). A sweep's levels, chosen as it runs, are
// checked as each is made.
func (p *Plan) checkDataset(levels []load.Level) error {
	if len(p.Workload.Rows) == 0 {
		return nil
	}
	name := filepath.Base(p.Workload.Dataset)
	for i, lv := range levels {
		cfg, n := p.sourceConfig(i, lv)
		if err := cfg.CheckCopies(n); err != nil {
			if errors.Is(err, workload.ErrBudget) {
				return fieldErrorf("Workload.Rows", "%s: %v (at %s); a larger Workload.CopyBudget raises it", name, err, lv.Load)
			}
			return fieldErrorf("Workload.Rows", "%v", err)
		}
	}
	return nil
}

// contextTokens is a level's typical context for the physics ceiling.
func (r *run) contextTokens(lv *metrics.Level) int {
	wl := r.p.Workload
	in, out := wl.Lengths()
	if lv.Load.InputTokens > 0 {
		in = lv.Load.InputTokens
	}
	return wl.PrefixTokens + in + out/2
}

// measuredTransport is run.json's account of what the run measured with:
// the client path for the target, the protocol versions the levels'
// answers came over, and the connection policy.
func (r *run) measuredTransport(levels []metrics.Level) *results.Transport {
	out := &results.Transport{Client: "tokbench", Connections: "warm"}
	if r.p.Client.Cold {
		out.Connections = "cold"
	}
	if u, err := url.Parse(r.base); err == nil && !r.transport.Runs(u) {
		out.Client = "net/http"
	}
	out.HTTP, out.TLS = metrics.Protocols(levels)
	return out
}

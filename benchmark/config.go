package benchmark

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/tokbench/tokbench/api"
)

// Config is run.json's configuration, derived from the plan, without
// secrets: sensitive header values read "[REDACTED]". Run adds what
// probing decided (the protocol, the model, what the requests ask for).
func (p *Plan) Config() Config {
	s, wl := p.Load, p.Workload
	inTokens, outTokens := wl.Lengths()
	var hs []string
	names := make([]string, 0, len(p.Header))
	for name := range p.Header {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		for _, v := range p.Header[name] {
			if api.SensitiveHeader(name) {
				v = "[REDACTED]"
			}
			hs = append(hs, name+": "+v)
		}
	}
	var trace *TraceConfig
	if t := wl.Trace; t != nil {
		trace = &TraceConfig{File: t.Path, Format: t.Format, Speed: s.TraceSpeeds, Window: t.Kept,
			Requests: len(t.Requests), SpanS: t.Span().Seconds()}
	}
	var in []string
	for _, d := range wl.Inputs {
		in = append(in, d.String())
	}
	var slos []string
	for _, s := range p.SLOs {
		slos = append(slos, s.Expr)
	}
	kind := "synthetic"
	switch {
	case wl.Chat:
		kind = "chat"
	case s.Steps > 1:
		kind = "agent"
	}
	var sweep, startAt, shard string
	if p.Sweep != nil {
		sweep = "auto"
	}
	if !p.StartAt.IsZero() {
		startAt = p.StartAt.Format(time.RFC3339Nano)
	}
	if p.Shard.Count > 0 {
		shard = fmt.Sprintf("%d/%d", p.Shard.Index, p.Shard.Count)
	}
	conns, redirects := "warm", "none"
	if p.Client.Cold {
		conns = "cold"
	}
	if p.Client.FollowRedirects {
		redirects = "same-origin"
	}
	var tokName string
	if wl.Tokenizer != nil {
		tokName = wl.Tokenizer.Name()
	}
	var imgSize, imgFormat string
	if m := wl.Media; m.Images > 0 {
		imgSize, imgFormat = fmt.Sprintf("%dx%d", m.Width, m.Height), m.Format
	}
	return Config{
		URL: api.RedactURL(p.URL), API: p.API, Model: p.Model,
		Concurrency: s.Concurrency, Rate: s.Rates, Arrival: string(s.Arrival), Burstiness: s.Burstiness,
		MaxConcurrency: s.MaxInFlight, Requests: s.Requests, Duration: s.Duration.String(),
		Warmup: s.Warmup, Trace: trace, InputTokens: inTokens, OutputTokens: outTokens,
		Tokenizer: tokName, IgnoreEOS: p.IgnoreEOS, Headers: hs,
		APIKeyEnv: p.APIKeyEnv, Timeout: p.Client.Timeout.String(), StallTimeout: p.Client.StallTimeout.String(),
		Seed: s.Seed, PromptSeed: wl.PromptSeed,
		Load: LoadConfig{
			SLO: strings.Join(slos, ","), Profile: p.Profile, Repeat: p.Repeat, Sweep: sweep,
			StartAt: startAt, Workload: kind, Steps: s.Steps, ThinkTime: s.ThinkTime.String(),
			RampUp: s.RampUp.String(), Lockstep: s.Lockstep, SummaryEvery: s.SummaryEvery.String(),
			PriceIn: p.Prices.InputPerMillion, PriceOut: p.Prices.OutputPerMillion, GPUHourPrice: p.Prices.GPUHour,
		},
		HTTP2: p.Client.HTTP2, Connections: conns, Redirects: redirects, Shard: shard,
		Prompts: PromptConfig{
			InputTokens: in, OutputTokens: wl.Output.String(), Dataset: wl.Dataset,
			DatasetFormat: wl.DatasetFormat, PrefixTokens: wl.PrefixTokens, PrefixGroups: wl.PrefixGroups,
			MinTokens: wl.MinTokens, TokenizerServer: wl.ServerTokenizer,
			EmbedInputs: wl.EmbedInputs, Tools: len(wl.Tools), ToolsFile: wl.ToolsFile,
			Images: wl.Media.Images, ImageSize: imgSize, ImageFormat: imgFormat, AudioSeconds: wl.Media.AudioSeconds,
		},
	}
}

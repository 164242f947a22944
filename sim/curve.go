package sim

import (
	"cmp"
	"context"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/tokbench/tokbench/metrics"
)

// CurveConfig is a concurrency curve to compute in virtual time: one
// closed-loop level per entry of Users, Requests each (0: max(4×users, 16)),
// every request PromptTokens in and MaxTokens out.
type CurveConfig struct {
	Users                   []int
	Requests                int
	PromptTokens, MaxTokens int
	// Lockstep starts each level's users at the same instant; otherwise
	// their starts are spread over one request's duration on an idle
	// engine, as tokbench bench spreads them.
	Lockstep bool
	// Phases, above 1, runs each level that many times with its users'
	// first requests at random instants of that duration (seeded by the
	// engine's seed) and reports the mean of the runs' statistics
	// (metrics.MeanOfRuns). Simulated users whose requests are alike keep
	// the rhythm they start in; a real server's small perturbations move
	// them, and two users whose prompts meet in one step stay together
	// (their answers end in the same step), so a real level settles in
	// one grouping or another. The mean over phases is the level's
	// expected statistics; one evenly spread run is the best case.
	Phases int
	// Media go with every request: their tokens join PromptTokens, and
	// their encoders' time comes before each request reaches the engine.
	Media MediaLoad
	// Embed, when its Inputs are set, makes every request an embeddings
	// request of that many inputs of PromptTokens each, run as the
	// server runs one (EmbedRequest); MaxTokens is then unused.
	Embed EmbedLoad
}

// EmbedLoad is the shape of a curve's embeddings requests.
type EmbedLoad struct {
	// Inputs are the texts of each request (0: the requests are not
	// embeddings requests).
	Inputs int
	// Dims is the answers' vector dimension (0: the server's, 384).
	Dims int
	// NoUsage is a protocol whose answer counts no tokens (TEI's): the
	// records count the inputs sent, as bench does against it.
	NoUsage bool
}

// request is the engine's request of one of the curve's requests, before
// its ID and arrival: an embeddings request's summed inputs ending at
// their first token, else the prompt and its media and MaxTokens.
func (c CurveConfig) request(mediaTokens int) Request {
	if c.Embed.Inputs > 0 {
		inputs := make([]int, c.Embed.Inputs)
		for i := range inputs {
			inputs[i] = c.PromptTokens
		}
		return EmbedRequest(0, inputs)
	}
	return Request{PromptTokens: c.PromptTokens + mediaTokens, MaxTokens: c.MaxTokens}
}

// Curve runs each level of c through the engine in virtual time and
// summarizes it with the metrics code bench uses.
func Curve(ctx context.Context, eng EngineConfig, cost Cost, c CurveConfig) ([]metrics.Level, error) {
	mc := c.Media.Cost()
	req, enc := c.request(mc.Tokens), EncoderTime(mc.EncoderFLOPs, c.Media.Hardware, c.Media.GPUs)
	records := func(level int, traces []Trace) []metrics.Record {
		if c.Embed.Inputs > 0 {
			return c.Embed.records(level, traces)
		}
		return c.Media.mark(Records(level, traces), c.PromptTokens)
	}
	var spread time.Duration
	if !c.Lockstep {
		one, err := RunClosedLoop(ctx, eng, cost, ClosedLoop{Users: 1, Requests: 1, PromptTokens: req.PromptTokens, Encode: enc, MaxTokens: req.MaxTokens, IgnoreEOS: req.IgnoreEOS})
		if err != nil {
			return nil, err
		}
		if at := one[0].ChunkAt; len(at) > 0 {
			spread = at[len(at)-1] - one[0].Arrival
		}
	}
	var levels []metrics.Level
	for i, u := range c.Users {
		n := c.Requests
		if n == 0 {
			n = max(4*u, 16)
		}
		load := metrics.Load{Mode: metrics.ModeConcurrency, Concurrency: u}
		cl := ClosedLoop{Users: u, Requests: n, PromptTokens: req.PromptTokens, Encode: enc, MaxTokens: req.MaxTokens, IgnoreEOS: req.IgnoreEOS, StartSpread: spread}
		var lv metrics.Level
		if c.Phases > 1 && u > 1 && !c.Lockstep {
			rng := rand.New(rand.NewPCG(eng.Seed, uint64(u)))
			runs := make([]metrics.Level, c.Phases)
			for k := range runs {
				cl.Starts = make([]time.Duration, u)
				for j := range cl.Starts {
					cl.Starts[j] = time.Duration(rng.Int64N(int64(spread) + 1))
				}
				slices.Sort(cl.Starts)
				traces, err := RunClosedLoop(ctx, eng, cost, cl)
				if err != nil {
					return nil, err
				}
				runs[k] = metrics.Summarize(load, records(i, traces), 0)
			}
			lv = metrics.MeanOfRuns(runs, nil)
			onePhase(&lv, c.Phases)
		} else {
			traces, err := RunClosedLoop(ctx, eng, cost, cl)
			if err != nil {
				return nil, err
			}
			lv = metrics.Summarize(load, records(i, traces), 0)
		}
		if u > 1 {
			lv.Lockstep = c.Lockstep
			lv.StartSpreadMs = float64(spread) / float64(time.Millisecond)
		}
		levels = append(levels, lv)
	}
	return levels, nil
}

// Records turns engine traces into the records a real run of level
// produces: times are milliseconds from each request's arrival (its t0),
// and token counts are exact, as a server's usage report gives them.
func Records(level int, traces []Trace) []metrics.Record {
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	recs := make([]metrics.Record, len(traces))
	for i, t := range traces {
		r := metrics.Record{
			ID: int(t.ID), Level: level, OffsetMs: ms(t.Arrival),
			OK: len(t.ChunkAt) > 0, FinishReason: t.Finish.String(),
			InputTokens: t.PromptTokens, InputTokensRequested: t.PromptTokens,
			OutputTokens: t.OutputTokens, TokenSource: metrics.SourceUsage,
			ChunkMs: make([]float64, len(t.ChunkAt)), ChunkTokens: t.ChunkTokens,
		}
		for j, at := range t.ChunkAt {
			r.ChunkMs[j] = ms(at - t.Arrival)
		}
		if r.OK {
			r.TTFTMs = r.ChunkMs[0]
			r.TTFVTMs = r.TTFTMs
			r.E2EMs = r.ChunkMs[len(r.ChunkMs)-1]
			r.DoneMs = r.E2EMs
		} else {
			r.ErrorClass = "not_run"
		}
		recs[i] = r
	}
	return recs
}

// records turns the traces of embeddings requests into the records bench
// makes of their answers: no token stream, each request's latency (its
// DoneMs) from its arrival to the end of the step that ran the last of
// its prefill, its inputs and their tokens.
func (e EmbedLoad) records(level int, traces []Trace) []metrics.Record {
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	dims := cmp.Or(e.Dims, defaultEmbedDims)
	src := metrics.SourceUsage
	if e.NoUsage {
		src = metrics.SourceTokenizer
	}
	recs := make([]metrics.Record, len(traces))
	for i, t := range traces {
		r := metrics.Record{
			ID: int(t.ID), Level: level, OffsetMs: ms(t.Arrival), OK: len(t.ChunkAt) > 0,
			InputTokens: t.PromptTokens, InputTokensRequested: t.PromptTokens,
			EmbedInputs: e.Inputs, EmbedDims: dims, TokenSource: src,
		}
		if r.OK {
			r.DoneMs = ms(t.ChunkAt[len(t.ChunkAt)-1] - t.Arrival)
		} else {
			r.ErrorClass = "not_run"
		}
		recs[i] = r
	}
	return recs
}

// onePhase makes a level folded from k phase replicas count as one run of
// it, the requests asked for: the replicas are one level's expected run,
// not k runs of it (metrics.MeanOfRuns sums their counts, as repeated
// runs' are). Counts are the replicas' mean, rounded; a warning every
// replica gave is said once.
func onePhase(lv *metrics.Level, k int) {
	per := func(n int) int { return int(math.Round(float64(n) / float64(k))) }
	r := &lv.Requests
	r.Sent, r.Completed, r.Failed = per(r.Sent), per(r.Completed), per(r.Failed)
	for c, n := range r.Errors {
		r.Errors[c] = max(per(n), 1)
	}
	lv.InputTokens, lv.OutputTokens = per(lv.InputTokens), per(lv.OutputTokens)
	for _, st := range []*metrics.Stats{&lv.TTFT, &lv.TTFVT, &lv.DecodeTPS, &lv.TPOT, &lv.ITL, &lv.E2E, &lv.E2ETPS, &lv.ChunkGap, &lv.TokensPerChunk} {
		st.Count = per(st.Count)
	}
	if e := lv.Embeddings; e != nil {
		e.Inputs, e.Tokens, e.Latency.Count = per(e.Inputs), per(e.Tokens), per(e.Latency.Count)
	}
	s := &lv.Shortfall
	s.RequestedTokens, s.ReceivedTokens, s.ShortRequests = per(s.RequestedTokens), per(s.ReceivedTokens), per(s.ShortRequests)
	seen := map[string]bool{}
	lv.Warnings = slices.DeleteFunc(lv.Warnings, func(w string) bool {
		dup := seen[w]
		seen[w] = true
		return dup
	})
}

package metrics

import (
	"cmp"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"
)

// Summarize folds the records of one level into its summary. durationS is
// the level's wall time; when it is 0 or less it is taken from the records
// (level start to the end of the last response).
func Summarize(load Load, recs []Record, durationS float64) Level {
	a := NewAccumulator(load, nil)
	for i := range recs {
		a.Add(&recs[i])
	}
	return a.Level(durationS)
}

// Accumulator folds a level's records into its summary one at a time, in
// bounded memory: every count and sum is exact; each distribution is held
// exactly up to RequestLimit requests or TokenLimit tokens and then in a
// sketch of SketchAccuracy (the level's Precision says which). Below those
// limits its Level is exactly what Summarize gives. It is not safe for
// concurrent use.
type Accumulator struct {
	load Load
	slos []SLO
	lv   Level // the counts, as they add up
	good int   // completed requests that met every SLO

	sources                                      map[string]bool
	end                                          float64
	ttft, ttfvt, dtps, tpot, e2e, e2etps, server Sample
	itl, gaps                                    Sample
	perChunk                                     Counts
	queue, ttftS, e2eS                           Sample
	scratch                                      []float64

	every   float64 // window length in ms (0: no windows)
	emit    func(Window)
	win     *Accumulator // the window being filled
	winFrom float64      // its start, ms from the level's start
	windows []Window

	steady steadyAcc
	srv    serverAcc
	conn   connAcc
	cache  cacheAcc
	chains chainAcc
	media  mediaAcc
	turns  []turnAcc // by Record.Step − 1
	embed  embedAcc
	tools  toolAcc
}

// turnAcc accumulates one turn of a level's conversations.
type turnAcc struct{ in, ttft, dtps Sample }

// maxTurns bounds the turns a level keeps figures of.
const maxTurns = 1024

// NewAccumulator starts the summary of a level of load. With slos, the
// level's goodput counts the requests that met every one (ApplySLOs's
// count, without keeping the records).
func NewAccumulator(load Load, slos []SLO) *Accumulator {
	a := &Accumulator{load: load, slos: slos, sources: map[string]bool{}}
	a.lv = Level{Load: load, Requests: Requests{Errors: map[string]int{}}}
	a.itl.Limit, a.gaps.Limit = tokenLimit, tokenLimit
	a.steady.k = 1
	if load.Mode != ModeRate && load.Concurrency > 1 {
		a.steady.k = load.Concurrency
	}
	return a
}

// Every makes the accumulator summarize the level in windows of d as
// well, by the instant each request ended (its OffsetMs + DoneMs; records
// come as requests end, and one that comes after its window closed counts
// in the window open then): emit,
// when not nil, is given each window as the first record past its end
// arrives, and the level's summary lists them all (Level.Windows).
func (a *Accumulator) Every(d time.Duration, emit func(Window)) {
	if d <= 0 {
		return
	}
	a.every, a.emit = float64(d)/float64(time.Millisecond), emit
	a.win = NewAccumulator(a.load, nil)
}

// maxEmptyWindows is the most windows one record closes; past them the
// accumulator skips to the record's window.
const maxEmptyWindows = 1000

// Window is one period of a long level (bench --summary-every): the
// requests that ended in it, summarized exactly as a level is.
type Window struct {
	// StartS and EndS bound the window, in seconds from the level's start.
	StartS   float64  `json:"start_s"`
	EndS     float64  `json:"end_s"`
	Requests Requests `json:"requests"`
	// OutputTokens are those of the requests that ended in the window;
	// OutputTPS them per second of it.
	OutputTokens int     `json:"output_tokens"`
	OutputTPS    float64 `json:"output_tps"`
	ErrorRate    float64 `json:"error_rate"`
	TTFT         Stats   `json:"ttft_ms"`
	TPOT         Stats   `json:"tpot_ms"`
	ITL          Stats   `json:"itl_ms"`
	E2E          Stats   `json:"e2e_ms"`
	// TTFTSched is TTFT from the scheduled instant (open loop).
	TTFTSched *Stats `json:"ttft_from_schedule_ms,omitempty"`
	// Embeddings are the window's embeddings figures, when requests of
	// it embedded (TTFT and the other stream figures are the token
	// streams' alone).
	Embeddings *Embeddings `json:"embeddings,omitempty"`
}

// closeWindow summarizes the window being filled, which ends at endMs.
func (a *Accumulator) closeWindow(endMs float64) {
	lv := a.win.Level((endMs - a.winFrom) / 1000)
	w := Window{
		StartS: a.winFrom / 1000, EndS: endMs / 1000, Requests: lv.Requests,
		OutputTokens: lv.OutputTokens, OutputTPS: lv.OutputTPS, ErrorRate: lv.ErrorRate,
		TTFT: lv.TTFT, TPOT: lv.TPOT, ITL: lv.ITL, E2E: lv.E2E, TTFTSched: lv.TTFTSched, Embeddings: lv.Embeddings,
	}
	a.windows = append(a.windows, w)
	if a.emit != nil {
		a.emit(w)
	}
	a.win, a.winFrom = NewAccumulator(a.load, nil), endMs
}

// Add folds in one record.
func (a *Accumulator) Add(r *Record) {
	if a.win != nil {
		end := r.OffsetMs + r.DoneMs
		for n := 0; end > a.winFrom+a.every; n++ { // (a request ending on a boundary is the earlier window's)
			if n == maxEmptyWindows {
				// A request ending far past the open window (a silent
				// server, a stalled stream): skip to its window rather
				// than close one empty window per period.
				a.winFrom += (math.Ceil((end-a.winFrom)/a.every) - 1) * a.every
				break
			}
			a.closeWindow(a.winFrom + a.every)
		}
		a.win.Add(r)
	}
	lv := &a.lv
	lv.Requests.Sent++
	lv.Retries += r.Retries
	a.end = max(a.end, r.OffsetMs+r.DoneMs)
	a.steady.add(r)
	a.chains.add(r)
	a.conn.add(r)
	if !r.OK && r.ErrorClass == ClassInterrupted {
		lv.Requests.Interrupted++
		return
	}
	if !r.OK {
		lv.Requests.Failed++
		if r.EmbedInputs > 0 {
			a.embed.failed++
		}
		cls := cmp.Or(r.ErrorClass, "unknown")
		lv.Requests.Errors[cls]++
		if _, ok := lv.Requests.ErrorSamples[cls]; !ok && r.Error != "" {
			if lv.Requests.ErrorSamples == nil {
				lv.Requests.ErrorSamples = map[string]string{}
			}
			lv.Requests.ErrorSamples[cls] = r.Error
		}
		return
	}
	a.srv.add(r)
	a.cache.add(r)
	a.media.add(r)
	if len(a.slos) > 0 && MeetsAll(r, a.slos) {
		a.good++
	}
	lv.Requests.Completed++
	lv.InputTokens += r.InputTokens
	lv.InputTokensRequested += r.InputTokensRequested
	if r.EmbedInputs > 0 {
		// No token stream: no output, TTFT or decode figures.
		a.embed.add(r)
		return
	}
	a.tools.add(r)
	lv.ReasoningTokens += r.ReasoningTokens
	lv.OutputTokens += r.OutputTokens
	if r.TokenSource != "" {
		a.sources[r.TokenSource] = true
	}
	if r.OutputTokensRequested > 0 {
		lv.Shortfall.RequestedTokens += r.OutputTokensRequested
		lv.Shortfall.ReceivedTokens += r.OutputTokens
		if r.OutputTokens < r.OutputTokensRequested {
			lv.Shortfall.ShortRequests++
		}
		if r.OutputTokens > r.OutputTokensRequested {
			lv.Shortfall.LongRequests++
		}
	}
	a.ttft.Add(r.TTFTMs)
	if r.TTFVTMs > 0 {
		a.ttfvt.Add(r.TTFVTMs)
	}
	a.e2e.Add(r.E2EMs)
	if v, ok := r.DecodeTPS(); ok {
		a.dtps.Add(v)
		a.tpot.Add(1000 / v)
	}
	if v, ok := r.E2ETPS(); ok {
		a.e2etps.Add(v)
	}
	a.scratch = r.AppendITL(a.scratch[:0])
	a.itl.AddAll(a.scratch)
	a.scratch = r.AppendChunkGaps(a.scratch[:0])
	a.gaps.AddAll(a.scratch)
	for _, k := range r.ChunkTokens {
		a.perChunk.Add(k)
	}
	if a.load.Mode == ModeRate {
		if r.LateMs() > LateSendMs {
			lv.LateSends++
		}
		a.queue.Add(r.QueueMs)
		a.ttftS.Add(r.TTFTMs + r.QueueMs)
		a.e2eS.Add(r.E2EMs + r.QueueMs)
	}
	if r.Server != nil && r.Server.DecodeTPS > 0 {
		a.server.Add(r.Server.DecodeTPS)
	}
	a.addTurn(r)
}

// addTurn counts a completed request of a conversation in its turn.
func (a *Accumulator) addTurn(r *Record) {
	if r.Step <= 0 || r.Step > maxTurns {
		return
	}
	for len(a.turns) < r.Step {
		a.turns = append(a.turns, turnAcc{})
	}
	t := &a.turns[r.Step-1]
	t.in.Add(float64(r.InputTokens))
	t.ttft.Add(r.TTFTMs)
	if v, ok := r.DecodeTPS(); ok {
		t.dtps.Add(v)
	}
}

// Level is the level's summary; it ends the accumulation (call it once).
// durationS is the level's wall time; when it is 0 or less it is taken
// from the records (level start to the end of the last response).
//
// It fills every statistic of the level, so it is long; split, the
// samples it reads would travel between the parts.
func (a *Accumulator) Level(durationS float64) Level {
	lv := a.lv
	if durationS <= 0 {
		durationS = a.end / 1000
	}
	lv.DurationS = durationS
	switch len(a.sources) {
	case 0:
	case 1:
		for s := range a.sources {
			lv.TokenSource = s
		}
	default:
		lv.TokenSource = SourceMixed
	}
	if durationS > 0 {
		lv.OutputTPS = float64(lv.OutputTokens) / durationS
		lv.RequestRPS = float64(lv.Requests.Completed) / durationS
		lv.GoodputRPS = lv.RequestRPS
	}
	if lv.Requests.Sent > 0 {
		lv.ErrorRate = float64(lv.Requests.Failed) / float64(lv.Requests.Sent)
	}
	lv.SteadyOutputTPS = a.steady.tps(durationS)
	lv.TTFT = a.ttft.Stats()
	lv.TTFVT = a.ttfvt.Stats()
	lv.DecodeTPS = a.dtps.Stats()
	lv.TPOT = a.tpot.Stats()
	lv.ITL = a.itl.Stats()
	lv.E2E = a.e2e.Stats()
	lv.E2ETPS = a.e2etps.Stats()
	lv.ChunkGap = a.gaps.Stats()
	lv.TokensPerChunk = a.perChunk.Stats()
	if a.load.Mode == ModeRate {
		q, t, e := a.queue.Stats(), a.ttftS.Stats(), a.e2eS.Stats()
		lv.QueueMs, lv.TTFTSched, lv.E2ESched = &q, &t, &e
	}
	lv.ServerTPS = a.server.somePtr()
	a.srv.apply(&lv)
	a.conn.apply(&lv)
	a.cache.apply(&lv)
	a.embed.apply(&lv)
	a.tools.apply(&lv)
	lv.ChainMs = a.chains.stats()
	for i := range a.turns {
		t := &a.turns[i]
		lv.Turns = append(lv.Turns, TurnStats{Turn: i + 1, Completed: t.ttft.Len(), InputTokens: t.in.Stats(), TTFT: t.ttft.Stats(), DecodeTPS: t.dtps.Stats()})
	}
	lv.Precision = a.precision()
	if a.win != nil {
		if a.win.lv.Requests.Sent > 0 {
			// The last window ends with the level, or with its last
			// request when that ended later: never before it starts.
			a.closeWindow(max(durationS*1000, a.win.end))
		}
		lv.Windows = a.windows
	}
	if lv.LateSends > 0 {
		lv.Warnings = append(lv.Warnings, fmt.Sprintf(
			"%d of %d requests went out more than 1 ms after their scheduled instant (client queue p99 %.1f ms); latency from the scheduled instant includes that wait",
			lv.LateSends, lv.Requests.Completed, lv.QueueMs.P99))
	}
	if lv.InputTokensRequested > 0 && lv.Requests.Completed > 0 {
		extra := float64(lv.InputTokens-lv.InputTokensRequested) / float64(lv.Requests.Completed)
		if extra > 0 {
			lv.TemplateTokensPerRequest = extra
		} else if extra < 0 {
			lv.Warnings = append(lv.Warnings, fmt.Sprintf(
				"input: the server counted %d prompt tokens for %d requested; the --tokenizer does not match the model's (try --tokenizer server or the model's tokenizer.json)",
				lv.InputTokens, lv.InputTokensRequested))
		}
	}
	a.media.apply(&lv)
	if lv.Shortfall.LongRequests > 0 {
		lv.Warnings = append(lv.Warnings, fmt.Sprintf(
			"%d of %d completed requests returned more tokens than max_tokens: the server ignores it, so output lengths are not what was asked",
			lv.Shortfall.LongRequests, lv.Requests.Completed))
	}
	if lv.Shortfall.ShortRequests > 0 {
		lv.Warnings = append(lv.Warnings, fmt.Sprintf(
			"output shortfall: %d of %d completed requests returned fewer tokens than requested (%d of %d tokens); use --ignore-eos for full-length outputs",
			lv.Shortfall.ShortRequests, lv.Requests.Completed, lv.Shortfall.ReceivedTokens, lv.Shortfall.RequestedTokens))
	}
	if len(a.slos) > 0 {
		JudgeSLOs(&lv, a.slos)
		if lv.DurationS > 0 {
			lv.GoodputRPS = float64(a.good) / lv.DurationS
		}
	}
	return lv
}

// Precision says which of a level's statistics are approximate. Every
// count, sum, rate, mean, standard deviation, minimum and maximum is
// exact; past RequestLimit requests or TokenLimit tokens a distribution's
// percentiles come from a sketch within RelativeAccuracy of a value at
// that rank.
type Precision struct {
	RelativeAccuracy float64 `json:"relative_accuracy"`
	// Sketched names the statistics whose percentiles are the sketch's
	// ("ttft_ms", "itl_ms", …).
	Sketched []string `json:"sketched"`
	Note     string   `json:"note"`
}

// precision is the level's Precision, nil when every figure is exact.
func (a *Accumulator) precision() *Precision {
	var names []string
	for _, s := range []struct {
		name string
		s    *Sample
	}{
		{"ttft_ms", &a.ttft}, {"ttfvt_ms", &a.ttfvt}, {"decode_tps", &a.dtps}, {"tpot_ms", &a.tpot},
		{"itl_ms", &a.itl}, {"e2e_ms", &a.e2e}, {"e2e_tps", &a.e2etps}, {"chunk_gap_ms", &a.gaps},
		{"queue_ms", &a.queue}, {"ttft_from_schedule_ms", &a.ttftS}, {"e2e_from_schedule_ms", &a.e2eS},
		{"server_decode_tps", &a.server}, {"chain_ms", &a.chains.done},
		{"server_prefill_ms", &a.srv.prefill}, {"server_ttft_ms", &a.srv.ttft}, {"server_aligned_tps", &a.srv.aligned},
		{"client_minus_server.ttft_ms and server_queue_ms", &a.srv.gapTTFT},
		{"client_minus_server.decode_tps", &a.srv.gapTPS}, {"client_minus_server.e2e_ms", &a.srv.gapE2E},
		{"connections.conn_wait_ms", &a.conn.wait}, {"connections.write_ms", &a.conn.write},
		{"connections.first_byte_ms", &a.conn.first}, {"connections.setup_ms", &a.conn.setup},
		{"connections.connect_ms", &a.conn.connect}, {"connections.tls_ms", &a.conn.tlsHS},
	} {
		if s.s.Sketched() {
			names = append(names, s.name)
		}
	}
	if len(names) == 0 && !a.steady.spilled {
		return nil
	}
	var parts []string
	if len(names) > 0 {
		parts = append(parts, fmt.Sprintf("percentiles of %s are within %.1f%% of the exact ones (a DDSketch past %d requests or %d tokens; server_queue_ms within that share of the TTFT gap it is taken from); counts, rates, means and extremes are exact",
			strings.Join(names, ", "), 100*SketchAccuracy, requestLimit, tokenLimit))
	}
	if a.steady.spilled {
		parts = append(parts, fmt.Sprintf("steady output tok/s counts the tokens after the last send in %d ms bins", steadyBinMs))
	}
	note := "a long level: " + strings.Join(parts, "; ")
	return &Precision{RelativeAccuracy: SketchAccuracy, Sketched: names, Note: note}
}

// steadyBinMs is the resolution of a long level's token arrivals, for
// the steady window's end.
const steadyBinMs = 100

// steadyAcc gathers what the steady output rate needs: when each request
// streamed, and when its tokens arrived. It holds them exactly up to
// RequestLimit requests and TokenLimit tokens; a longer level fixes the
// ramp-up's end from those (the ramp-up is long over by then) and counts
// later arrivals in steadyBinMs bins from it.
type steadyAcc struct {
	k        int // streams at once that end the ramp-up
	lastSend float64
	firsts   []float64
	edges    []edge
	at       []float64
	tokens   []int32

	spilled   bool
	from      float64 // the ramp-up's end, once spilled
	afterFrom int64   // tokens that arrived at or after from
	bins      []int64 // tokens per bin from from
}

type edge struct {
	at float64
	d  int // +1: a request starts streaming; −1: it ends
}

func (a *steadyAcc) add(r *Record) {
	a.lastSend = max(a.lastSend, r.OffsetMs)
	if !r.OK || len(r.ChunkMs) == 0 {
		return
	}
	if a.spilled {
		for j, t := range r.ChunkMs {
			a.bin(r.OffsetMs+t, r.ChunkTokens[j])
		}
		return
	}
	first := r.OffsetMs + r.ChunkMs[0]
	a.firsts = append(a.firsts, first)
	a.edges = append(a.edges, edge{first, 1}, edge{r.OffsetMs + max(r.DoneMs, r.ChunkMs[0]), -1})
	for j, t := range r.ChunkMs {
		a.at = append(a.at, r.OffsetMs+t)
		a.tokens = append(a.tokens, int32(r.ChunkTokens[j]))
	}
	if len(a.firsts) >= requestLimit || len(a.at) >= tokenLimit {
		a.spill()
	}
}

// rampEnd is the first instant k requests stream at once — every user is
// then streaming, however its start was spread (--ramp-up) — or, when
// they never do, the instant k requests have streamed.
func (a *steadyAcc) rampEnd() float64 {
	sort.Float64s(a.firsts)
	k := min(a.k, len(a.firsts))
	from := a.firsts[k-1]
	// Ends sort before starts at the same instant: a user's next request
	// does not overlap its last one.
	sort.Slice(a.edges, func(i, j int) bool {
		if a.edges[i].at != a.edges[j].at {
			return a.edges[i].at < a.edges[j].at
		}
		return a.edges[i].d < a.edges[j].d
	})
	streaming := 0
	for _, e := range a.edges {
		streaming += e.d
		if streaming >= k {
			return e.at
		}
	}
	return from
}

func (a *steadyAcc) spill() {
	a.from = a.rampEnd()
	a.spilled = true
	at, tokens := a.at, a.tokens
	a.firsts, a.edges, a.at, a.tokens = nil, nil, nil, nil
	for i, t := range at {
		a.bin(t, int(tokens[i]))
	}
}

func (a *steadyAcc) bin(at float64, tokens int) {
	if at < a.from {
		return
	}
	a.afterFrom += int64(tokens)
	i := int((at - a.from) / steadyBinMs)
	for len(a.bins) <= i {
		a.bins = append(a.bins, 0)
	}
	a.bins[i] += int64(tokens)
}

// tps counts the output tokens that arrived between ramp-up and drain
// (which starts at the last send), divided by that window. A window
// shorter than a tenth of the level yields 0: there is no steady state.
func (a *steadyAcc) tps(durationS float64) float64 {
	var from float64
	switch {
	case a.spilled:
		from = a.from
	case len(a.firsts) == 0:
		return 0
	default:
		from = a.rampEnd()
	}
	to := a.lastSend
	if to-from < durationS*1000/10 || to <= from {
		return 0
	}
	tokens := int64(0)
	if a.spilled {
		tokens = a.afterFrom
		for i := int((to-a.from)/steadyBinMs) + 1; i < len(a.bins); i++ {
			tokens -= a.bins[i]
		}
	} else {
		for i, t := range a.at {
			if t >= from && t <= to {
				tokens += int64(a.tokens[i])
			}
		}
	}
	return float64(tokens) / ((to - from) / 1000)
}

// chainAcc gathers the wall-clock of every agent chain whose calls all
// completed: the steps of a chain are consecutive, so a chain is complete
// when its steps run 1..n without a failure and n is the longest seen.
// Past RequestLimit calls the longest is taken as known, and chains leave
// the map as they complete.
type chainAcc struct {
	chains   map[int]*span
	maxSteps int
	calls    int
	frozen   bool
	done     Sample
}

type span struct {
	start, end float64
	steps      int
	failed     bool
}

// maxOpenChains bounds the incomplete chains a long level keeps: past it,
// the oldest (lowest ids, long abandoned) are dropped.
const maxOpenChains = 1 << 16

func (a *chainAcc) add(r *Record) {
	if r.Chain == 0 {
		return
	}
	if a.chains == nil {
		a.chains = map[int]*span{}
	}
	c := a.chains[r.Chain]
	if c == nil {
		c = &span{start: r.OffsetMs, end: r.OffsetMs + r.DoneMs}
		a.chains[r.Chain] = c
	}
	c.start = min(c.start, r.OffsetMs)
	c.end = max(c.end, r.OffsetMs+r.DoneMs)
	c.steps++
	c.failed = c.failed || !r.OK
	a.maxSteps = max(a.maxSteps, r.Step)
	if a.calls++; !a.frozen && a.calls >= requestLimit {
		a.frozen = true
		for id, c := range a.chains {
			a.close(id, c)
		}
	}
	if a.frozen {
		a.close(r.Chain, c)
		if len(a.chains) > maxOpenChains {
			a.dropOldest()
		}
	}
}

// close moves a complete chain out of the map.
func (a *chainAcc) close(id int, c *span) {
	if c.steps < a.maxSteps {
		return
	}
	if !c.failed {
		a.done.Add(c.end - c.start)
	}
	delete(a.chains, id)
}

func (a *chainAcc) dropOldest() {
	ids := make([]int, 0, len(a.chains))
	for id := range a.chains {
		ids = append(ids, id)
	}
	sort.Ints(ids)
	for _, id := range ids[:len(ids)/2] {
		delete(a.chains, id)
	}
}

// stats describes the complete chains' wall-clock (nil without any).
func (a *chainAcc) stats() *Stats {
	for _, c := range a.chains {
		if !c.failed && c.steps == a.maxSteps {
			a.done.Add(c.end - c.start)
		}
	}
	a.chains = nil
	return a.done.somePtr()
}

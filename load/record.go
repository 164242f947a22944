package load

import (
	"runtime"
	"strings"
	"time"

	"github.com/tokbench/tokbench/api"
	"github.com/tokbench/tokbench/metrics"
	"github.com/tokbench/tokbench/tokenize"
)

// RecordInfo is what the caller knows about a request beyond its response.
type RecordInfo struct {
	ID, Level             int
	LevelStart            time.Time
	Prompt                string
	InputTokensRequested  int
	OutputTokensRequested int
	// EmbedInputs are an embeddings request's inputs; EmbedTokens their
	// exact token count where the caller has it (tokbench proxy counts
	// its clients' inputs), used when the answer gives none. ToolsSent
	// are the tool definitions a request carried and ToolTokens their
	// token count.
	EmbedInputs, EmbedTokens int
	ToolsSent, ToolTokens    int
}

// yieldEvery is how long Record counts before it lets other goroutines
// run. A yield costs more than a short stream's whole count: it wakes an
// idle P's thread (a futex call, some 5 µs here), and yielding every 16
// chunks made a 32-chunk stream's record 39 µs rather than 28
// (BenchmarkRecordEnded) — work the proxy does beside every live stream.
const yieldEvery = 100 * time.Microsecond

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// Record turns a response into a metrics.Record. Output tokens come from the
// server's usage when it reports them, else from an exact count of the
// streamed text (answer and reasoning) with tok. When every token chunk
// carried the server's running completion_tokens (see usageDeltas), each
// chunk counts the difference from the one before; otherwise the total is
// spread over the chunks in proportion to each chunk's own count. Either
// way a chunk carrying k tokens counts k, never one.
func Record(resp *api.Response, tok tokenize.Tokenizer, info RecordInfo) metrics.Record {
	rec := metrics.Record{
		ID:                    info.ID,
		Level:                 info.Level,
		Start:                 resp.Start,
		OffsetMs:              ms(resp.Start.Sub(info.LevelStart)),
		DoneMs:                ms(resp.Done.Sub(resp.Start)),
		HTTPStatus:            resp.Status,
		ResponseID:            resp.ID,
		FinishReason:          resp.Finish,
		InputTokensRequested:  info.InputTokensRequested,
		OutputTokensRequested: info.OutputTokensRequested,
		Server:                serverTiming(resp.Server, resp.Start),
		Phases:                phases(resp),
		EmbedInputs:           info.EmbedInputs,
		ToolsSent:             info.ToolsSent,
		ToolTokens:            info.ToolTokens,
	}
	if resp.Failed() {
		rec.ErrorClass = string(resp.ErrorClass)
		rec.Error = resp.Error
		if resp.RetryAfter != "" {
			rec.Error += " (Retry-After: " + resp.RetryAfter + ")"
		}
		if len(resp.Chunks) == 0 {
			return rec
		}
		// A stream cut short (Ctrl-C, a drop, a stall) keeps what it
		// measured — its first token, its chunks, their tokens — though
		// a failed record never enters the level's statistics.
	} else {
		rec.OK = true
	}
	if resp.Embedding != nil {
		embedRecord(resp, tok, info, &rec)
		return rec
	}
	n := len(resp.Chunks)
	rec.ChunkMs = make([]float64, n)
	// The whole text is only needed when the server sent no usage, and
	// each chunk's own count only when the server's counts per chunk are
	// missing or inconsistent.
	usage := resp.Usage != nil && resp.Usage.CompletionTokens > 0
	var exact, estimate []int
	if usage {
		exact = usageDeltas(resp.Chunks, resp.Usage.CompletionTokens)
	}
	if exact == nil {
		estimate = make([]int, n)
	}
	var text, reasoning strings.Builder
	visible := -1
	yielded := time.Now()
	for i, c := range resp.Chunks {
		if i%16 == 15 && time.Since(yielded) >= yieldEvery {
			// Counting is CPU work beside live streams: let their readers
			// run so their arrival stamps are not delayed behind it.
			runtime.Gosched()
			yielded = time.Now()
		}
		rec.ChunkMs[i] = ms(c.At.Sub(resp.Start))
		if c.Text != "" {
			if estimate != nil {
				estimate[i] = chunkCount(tok, c.Text, usage)
			}
			if !usage {
				text.WriteString(c.Text)
			}
		}
		if c.Reasoning != "" {
			if estimate != nil {
				estimate[i] += chunkCount(tok, c.Reasoning, usage)
			}
			reasoning.WriteString(c.Reasoning)
		}
		if visible < 0 && c.Text != "" {
			visible = i
		}
	}
	rec.TTFTMs = rec.ChunkMs[0]
	rec.E2EMs = rec.ChunkMs[n-1]
	if visible >= 0 {
		rec.TTFVTMs = rec.ChunkMs[visible]
	}
	reasoningCount := 0
	if reasoning.Len() > 0 {
		reasoningCount = tok.Count(reasoning.String())
	}
	if u := resp.Usage; usage {
		rec.TokenSource = metrics.SourceUsage
		rec.OutputTokens = u.CompletionTokens
		rec.ReasoningTokens = u.ReasoningTokens
		if rec.ReasoningTokens == 0 {
			rec.ReasoningTokens = reasoningCount
		}
	} else {
		rec.TokenSource = metrics.SourceTokenizer
		rec.OutputTokens = tok.Count(text.String()) + reasoningCount
		rec.ReasoningTokens = reasoningCount
	}
	if u := resp.Usage; u != nil && u.CachedKnown {
		rec.CacheReported, rec.CachedTokens = true, u.CachedTokens
	}
	if u := resp.Usage; u != nil && u.PromptTokens > 0 {
		rec.InputTokens = u.PromptTokens
	} else if info.InputTokensRequested > 0 {
		rec.InputTokens = info.InputTokensRequested
	} else {
		rec.InputTokens = tok.Count(info.Prompt)
	}
	if exact != nil {
		rec.ChunkTokens = exact
	} else {
		rec.ChunkTokens = metrics.AssignTokens(estimate, rec.OutputTokens)
	}
	toolCall(resp, tok, &rec)
	return rec
}

// embedRecord fills the record of a completed embeddings request: no
// token stream, its latency is DoneMs; the tokens embedded are the
// server's count where it gave one, else the inputs' exact count.
func embedRecord(resp *api.Response, tok tokenize.Tokenizer, info RecordInfo, rec *metrics.Record) {
	em := resp.Embedding
	rec.EmbedInputs = max(info.EmbedInputs, em.Vectors)
	rec.EmbedDims = em.Dims
	rec.TokenSource = metrics.SourceTokenizer
	switch {
	case em.PromptTokens > 0:
		rec.InputTokens, rec.TokenSource = em.PromptTokens, metrics.SourceUsage
	case info.EmbedTokens > 0:
		rec.InputTokens = info.EmbedTokens
	case info.InputTokensRequested > 0:
		rec.InputTokens = info.InputTokensRequested
	default:
		rec.InputTokens = tok.Count(info.Prompt)
	}
}

// toolCall records whether and when the answer called a tool, and its
// arguments' tokens (a long one's bytes stand in, four to a token, as
// chunkCount's do).
func toolCall(resp *api.Response, tok tokenize.Tokenizer, rec *metrics.Record) {
	if resp.ToolCallAt.IsZero() {
		return
	}
	rec.ToolCalled = true
	rec.ToolCallMs = max(ms(resp.ToolCallAt.Sub(resp.Start)), 0)
	if n := len(resp.ToolArgs); n > maxCountedChunk {
		rec.ToolArgTokens = (n + 3) / 4
	} else if n > 0 {
		rec.ToolArgTokens = tok.Count(string(resp.ToolArgs))
	}
}

// maxTrailingTokens bounds the tokens usage may count after the last token
// chunk (an end-of-sequence token, a stop string's tokens); more means the
// running values do not describe the chunks.
const maxTrailingTokens = 8

// usageDeltas returns each token chunk's exact output tokens (answer and
// reasoning alike) when every one of them carried the server's running
// completion_tokens: the difference from the chunk before, the first
// chunk's being its own value. Tokens the answer's usage counts after the
// last token chunk — an end-of-sequence token or the tokens of a stop
// string, which have no text and arrive on the finish chunk — go to the
// last token chunk, as the estimate would also place them. It returns nil,
// and Record estimates, unless the values rise strictly from chunk to chunk
// and the last is at most total (the answer's usage) and at most
// maxTrailingTokens below it. A chunk without usage, a value that stands
// still (a token chunk of no tokens) or falls, or a last value above or far
// below the final usage means the server's counts do not describe its
// chunks. Usage on chunks without text (a role chunk, an empty finish
// chunk) is not looked at.
func usageDeltas(chunks []api.Chunk, total int) []int {
	if len(chunks) == 0 {
		return nil
	}
	if trailing := total - chunks[len(chunks)-1].Cumulative; trailing < 0 || trailing > maxTrailingTokens {
		return nil
	}
	prev := 0
	for _, c := range chunks {
		if c.Cumulative <= prev {
			return nil
		}
		prev = c.Cumulative
	}
	out := make([]int, len(chunks))
	prev = 0
	for i, c := range chunks {
		out[i] = c.Cumulative - prev
		prev = c.Cumulative
	}
	out[len(out)-1] += total - prev
	return out
}

// phases turns a response's phase instants into its record's durations;
// nil when the request never reached the transport.
func phases(resp *api.Response) *metrics.Phases {
	p := &resp.Phases
	if p.Begin.IsZero() {
		return nil
	}
	since := func(from, to time.Time) float64 {
		if from.IsZero() || to.IsZero() || to.Before(from) {
			return 0
		}
		return ms(to.Sub(from))
	}
	out := &metrics.Phases{
		ConnWaitMs:   since(p.Begin, p.GotConn),
		DNSMs:        since(p.DNSStart, p.DNSDone),
		ConnectMs:    since(p.ConnectStart, p.ConnectEnd),
		TLSMs:        since(p.TLSStart, p.TLSEnd),
		WriteMs:      since(resp.Start, p.Wrote),
		FirstByteMs:  since(resp.Start, p.FirstByte),
		Reused:       p.Reused,
		Reconnects:   p.Reconnects,
		Redirects:    p.Redirects,
		HTTP:         p.HTTP,
		TLS:          p.TLS,
		KernelStamps: resp.KernelStamps,
	}
	return out
}

// maxCountedChunk: with the server's usage known, a chunk's own count only
// spreads that total over the chunks, and a chunk longer than this is not
// tokenized for it (a hostile server's 50 MB chunk cost 30 s of CPU and
// 1.5 GB): its bytes stand in, at four to a token.
const maxCountedChunk = 16 << 10

// chunkCount is a chunk's local token count for spreading the output
// tokens over the chunks.
func chunkCount(tok tokenize.Tokenizer, s string, usage bool) int {
	if usage && len(s) > maxCountedChunk {
		return (len(s) + 3) / 4
	}
	return tok.Count(s)
}

// serverTiming is the record's copy of the server's own timing; t0 is
// the request's.
func serverTiming(t *api.ServerTiming, t0 time.Time) *metrics.ServerTiming {
	if t == nil {
		return nil
	}
	st := &metrics.ServerTiming{
		PromptMs: t.PromptMs, PredictedMs: t.PredictedMs, DecodeTPS: t.DecodeTPS, PrefillTPS: t.PrefillTPS,
		LoadMs: t.LoadMs, PromptTokens: t.PromptTokens, PredictedTokens: t.PredictedTokens,
		CachedTokens: t.CachedTokens, EvaluatedOnly: t.EvaluatedOnly,
	}
	if !t.FirstTokenAt.IsZero() && !t.LastTokenAt.IsZero() {
		// Wall clocks: the server's stamps carry no monotonic reading.
		wall := t0.Round(0)
		st.FirstTokenMs, st.LastTokenMs = ms(t.FirstTokenAt.Sub(wall)), ms(t.LastTokenAt.Sub(wall))
	}
	return st
}

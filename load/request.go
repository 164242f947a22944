package load

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/tokbench/tokbench/api"
	"github.com/tokbench/tokbench/metrics"
	"github.com/tokbench/tokbench/tokenize"
)

// prebuilt is a request of the level, built for sending.
type prebuilt struct {
	req   *api.Request
	prep  *api.Prepared
	inTok int
}

func (r *Runner) prebuild(src Source, i int) prebuilt {
	req, inTok := src.Request(i)
	return prebuilt{req: req, prep: r.Client.Prepare(req), inTok: inTok}
}

// one sends a request and turns the response into a record.
func (r *Runner) one(ctx context.Context, level int, levelStart time.Time, b prebuilt) metrics.Record {
	rec, _ := r.send(ctx, level, levelStart, b)
	return rec
}

// answerOf is the text of a response's chunks: the answer an agent
// chain carries into its next call.
func answerOf(resp *api.Response) string {
	var b strings.Builder
	for _, c := range resp.Chunks {
		b.WriteString(c.Text)
	}
	return b.String()
}

// send runs a request (with its retries) and records it.
func (r *Runner) send(ctx context.Context, level int, levelStart time.Time, b prebuilt) (metrics.Record, *api.Response) {
	req, inTok := b.req, b.inTok
	if r.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, r.Timeout)
		defer cancel()
	}
	r.Progress.InFlight.Add(1)
	defer r.Progress.InFlight.Add(-1)
	resp := r.Client.DoPrepared(ctx, b.prep)
	first := resp.Start
	var retryErrors []string
	for attempt := 0; attempt < r.Retry && retryable(resp) && ctx.Err() == nil; attempt++ {
		retryErrors = append(retryErrors, string(resp.ErrorClass))
		select {
		case <-ctx.Done():
		case <-time.After(backoff(resp.RetryAfter, attempt)):
		}
		if ctx.Err() != nil {
			break
		}
		resp = r.Client.DoPrepared(ctx, b.prep)
	}
	r.stamps.add(resp)
	id := int(r.nextID.Add(1))
	r.countOnce.Do(func() { r.counter = tokenize.Cached(r.Tokenizer, 1<<16) })
	rec := Record(resp, r.counter, RecordInfo{
		ID: id, Level: level, LevelStart: levelStart,
		Prompt: req.Prompt(), InputTokensRequested: inTok, OutputTokensRequested: req.MaxTokens,
		EmbedInputs: len(req.Inputs), ToolsSent: len(req.Tools), ToolTokens: r.toolTokens(req.Tools),
	})
	rec.Media = r.mediaRecord(req, b.prep, resp, &rec)
	if len(retryErrors) > 0 {
		rec.Retries = len(retryErrors)
		rec.RetryErrors = retryErrors
		rec.RetryWaitMs = ms(resp.Start.Sub(first))
	}
	return rec, resp
}

// requestContext is the context requests run on: it outlives ctx by the
// grace period, so an interrupt lets streams in flight finish instead of
// cutting every one at once. Call done when the level is over.
func (r *Runner) requestContext(ctx context.Context) (reqCtx context.Context, done func()) {
	reqCtx, cancelReqs := context.WithCancel(context.WithoutCancel(ctx))
	stopWatch := context.AfterFunc(ctx, func() {
		if r.Grace <= 0 {
			cancelReqs()
			return
		}
		t := time.NewTimer(r.Grace)
		defer t.Stop()
		select {
		case <-t.C:
		case <-r.Hurry:
		case <-reqCtx.Done(): // the level ended within the grace
		}
		cancelReqs()
	})
	return reqCtx, func() { stopWatch(); cancelReqs() }
}

// finish counts a finished request, keeps it and hands it to the sink;
// keep nil means a warm-up request, which is dropped.
func (r *Runner) finish(rec metrics.Record, keep func(metrics.Record), lastEnd *atomic.Int64) {
	end := int64(rec.OffsetMs*1e6) + int64(rec.DoneMs*1e6)
	for {
		old := lastEnd.Load()
		if end <= old || lastEnd.CompareAndSwap(old, end) {
			break
		}
	}
	if keep == nil {
		if r.onWarmup != nil {
			r.onWarmup(rec)
		}
		return
	}
	rec.Load = r.level
	r.Progress.Retries.Add(int64(rec.Retries))
	if rec.Phases != nil {
		r.Progress.Reconnects.Add(int64(rec.Phases.Reconnects))
	}
	if rec.OK {
		r.Progress.Done.Add(1)
		r.Progress.Tokens.Add(int64(rec.OutputTokens))
		r.Progress.DoneChunks.Add(int64(len(rec.ChunkMs)))
		if rec.EmbedInputs == 0 { // an embeddings answer has no first token
			r.Progress.addTTFT(rec.TTFTMs)
		}
	} else {
		r.Progress.Failed.Add(1)
		r.Progress.CountError(rec.ErrorClass)
	}
	if r.MaxErrorRate > 0 {
		failed, done := r.Progress.Failed.Load(), r.Progress.Done.Load()
		if n := failed + done; n >= 10 && float64(failed)/float64(n) > r.MaxErrorRate {
			r.abort.Store(true)
			r.stopOnce.Do(func() { close(r.stop) })
		}
	}
	keep(rec)
	if r.Sink != nil {
		r.sinkMu.Lock()
		r.Sink(rec)
		r.sinkMu.Unlock()
	}
}

// retryable reports whether a failed response may be sent again: the server
// shed load or broke before producing a token.
func retryable(resp *api.Response) bool {
	if !resp.Failed() || len(resp.Chunks) > 0 {
		return false
	}
	if code, ok := resp.ErrorClass.HTTPStatus(); ok {
		switch code {
		case http.StatusTooManyRequests, http.StatusInternalServerError, http.StatusBadGateway,
			http.StatusServiceUnavailable, http.StatusGatewayTimeout:
			return true
		}
		return false
	}
	switch resp.ErrorClass {
	case api.ClassConnectionRefused, api.ClassConnectionReset, api.ClassConnectionDropped:
		return true
	}
	return false
}

// backoff is the wait before retry attempt (0-based): Retry-After when the
// server gave one in seconds (at most 60 s), else 250 ms doubling, at most 8 s.
func backoff(retryAfter string, attempt int) time.Duration {
	if s, err := strconv.Atoi(strings.TrimSpace(retryAfter)); err == nil && s >= 0 {
		return min(time.Duration(s)*time.Second, time.Minute)
	}
	return min(250*time.Millisecond<<attempt, 8*time.Second)
}

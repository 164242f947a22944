// Package load drives requests at an endpoint: closed-loop users (a fixed
// number of concurrent streams, each sending its next request when the last
// one ends), one level after another. Every finished request becomes a
// metrics.Record handed to the sink at once, so nothing measured is lost if
// the run is cut short.
//
// When the run's context is canceled, no new request is sent; streams in
// flight get Grace to finish, then are canceled and recorded as
// "interrupted".
package load

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tokbench/tokbench/api"
	"github.com/tokbench/tokbench/metrics"
	"github.com/tokbench/tokbench/tokenize"
)

// Level is one load level to run.
type Level struct {
	Load metrics.Load
	// Requests to send (recorded); with Duration set, the level instead
	// keeps sending until Duration has passed (Requests then caps it if > 0).
	Requests int
	Duration time.Duration
	// Warmup requests run first at the same concurrency and are not recorded.
	Warmup int
}

// Source supplies the requests of a level; it is called from several
// goroutines and must be safe for concurrent use.
type Source interface {
	// Request returns the i-th request of the level, with the prompt's
	// token count as the generator intended it (0 if unknown).
	Request(i int) (req *api.Request, inputTokens int)
}

// Runner runs levels against one client.
type Runner struct {
	Client *api.Client
	// Tokenizer counts output tokens when the server sends no usage, and
	// spreads tokens over chunks.
	Tokenizer tokenize.Tokenizer
	// Timeout bounds one whole request; 0 means none.
	Timeout time.Duration
	// Grace is how long streams in flight may finish after an interrupt.
	Grace time.Duration
	// Sink receives every recorded request as it finishes; calls are
	// serialized by the runner.
	Sink func(metrics.Record)

	// Progress of the current level, readable while it runs.
	Progress Progress

	sinkMu sync.Mutex
	nextID atomic.Int64
}

// Progress counts the current level's requests and tokens.
type Progress struct {
	Done, Failed, Tokens atomic.Int64
	Start                atomic.Int64 // level start, unix nanoseconds
}

// ErrInterrupted is returned when the run's context was canceled.
var ErrInterrupted = errors.New("interrupted")

// Result is one finished level.
type Result struct {
	Level   metrics.Level
	Records []metrics.Record
}

// RunLevel runs one level. idx is recorded in each Record. It returns
// ErrInterrupted (with what was measured) when ctx was canceled.
func (r *Runner) RunLevel(ctx context.Context, idx int, lv Level, src Source) (Result, error) {
	if lv.Warmup > 0 && ctx.Err() == nil {
		w := Level{Load: lv.Load, Requests: lv.Warmup}
		r.closedLoop(ctx, idx, w, src, nil)
	}
	var (
		mu   sync.Mutex
		recs []metrics.Record
	)
	r.Progress.Done.Store(0)
	r.Progress.Failed.Store(0)
	r.Progress.Tokens.Store(0)
	wall := r.closedLoop(ctx, idx, lv, src, func(rec metrics.Record) {
		mu.Lock()
		recs = append(recs, rec)
		mu.Unlock()
	})
	res := Result{Records: recs, Level: metrics.Summarize(lv.Load, recs, wall.Seconds())}
	if ctx.Err() != nil {
		return res, ErrInterrupted
	}
	return res, nil
}

// closedLoop runs lv.Load.Concurrency users until the level's requests or
// duration are used up. It returns the level's wall time, from its start to
// the end of the last request.
func (r *Runner) closedLoop(ctx context.Context, idx int, lv Level, src Source, keep func(metrics.Record)) time.Duration {
	users := max(lv.Load.Concurrency, 1)
	// Requests run on their own context so an interrupt lets them finish
	// within the grace period instead of cutting every stream at once.
	reqCtx, cancelReqs := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelReqs()
	stopWatch := context.AfterFunc(ctx, func() {
		grace := r.Grace
		if grace <= 0 {
			cancelReqs()
			return
		}
		t := time.AfterFunc(grace, cancelReqs)
		<-reqCtx.Done()
		t.Stop()
	})
	defer stopWatch()

	start := time.Now()
	r.Progress.Start.Store(start.UnixNano())
	var deadline time.Time
	if lv.Duration > 0 {
		deadline = start.Add(lv.Duration)
	}
	var issued atomic.Int64
	var wg sync.WaitGroup
	var lastEnd atomic.Int64
	for u := 0; u < users; u++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				if !deadline.IsZero() && !time.Now().Before(deadline) {
					return
				}
				i := int(issued.Add(1)) - 1
				if lv.Requests > 0 && i >= lv.Requests {
					return
				}
				if lv.Requests <= 0 && deadline.IsZero() {
					return
				}
				req, inTok := src.Request(i)
				rec := r.one(reqCtx, idx, start, req, inTok)
				end := int64(rec.OffsetMs*1e6) + int64(rec.DoneMs*1e6)
				for {
					old := lastEnd.Load()
					if end <= old || lastEnd.CompareAndSwap(old, end) {
						break
					}
				}
				if keep == nil {
					continue
				}
				if rec.OK {
					r.Progress.Done.Add(1)
					r.Progress.Tokens.Add(int64(rec.OutputTokens))
				} else {
					r.Progress.Failed.Add(1)
				}
				keep(rec)
				if r.Sink != nil {
					r.sinkMu.Lock()
					r.Sink(rec)
					r.sinkMu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	return time.Duration(lastEnd.Load())
}

// one sends a request and turns the response into a record.
func (r *Runner) one(ctx context.Context, level int, levelStart time.Time, req *api.Request, inTok int) metrics.Record {
	if r.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, r.Timeout)
		defer cancel()
	}
	resp := r.Client.Do(ctx, req)
	id := int(r.nextID.Add(1))
	return Record(resp, r.Tokenizer, RecordInfo{
		ID: id, Level: level, LevelStart: levelStart,
		Prompt: req.Prompt(), InputTokensRequested: inTok, OutputTokensRequested: req.MaxTokens,
	})
}

package load

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tokbench/tokbench/api"
	"github.com/tokbench/tokbench/metrics"
)

// closedLoop runs lv.Load.Concurrency users until the level's requests or
// duration are used up. It returns the level's wall time, from its start to
// the end of the last request.
func (r *Runner) closedLoop(ctx context.Context, idx int, lv Level, src Source, keep func(metrics.Record)) time.Duration {
	users := lv.Load.Concurrency
	if users <= 0 {
		return 0 // a shard whose part of this level is no user at all
	}
	// Requests run on their own context so an interrupt lets them finish
	// within the grace period instead of cutting every stream at once.
	reqCtx, done := r.requestContext(ctx)
	defer done()

	// The level's first request for every user is built before the clock
	// starts, so the users can all write within moments of each other.
	var firsts []prebuilt
	if lv.Steps <= 1 {
		n := users
		if lv.Requests > 0 {
			n = min(n, lv.Requests)
		}
		firsts = make([]prebuilt, n)
		for u := range firsts {
			firsts[u] = r.prebuild(src, u)
		}
	}
	start := time.Now()
	r.Progress.Start.Store(start.UnixNano())
	var deadline time.Time
	if lv.Duration > 0 {
		deadline = start.Add(lv.Duration)
	}
	var issued atomic.Int64
	var wg sync.WaitGroup
	var lastEnd atomic.Int64
	// spent closes when the level's last request is issued, so users still
	// waiting for their place in the ramp need not wait any longer.
	spent := make(chan struct{})
	var spentOnce sync.Once
	var started atomic.Int64
	for u := 0; u < users; u++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if lv.RampUp > 0 {
				at := start.Add(lv.userStart(u))
				if !deadline.IsZero() && deadline.Before(at) {
					at = deadline
				}
				if !waitUntil(ctx, at, r.stop, spent) {
					return
				}
			}
			first := true
			for ctx.Err() == nil && !r.abort.Load() {
				if !deadline.IsZero() && !time.Now().Before(deadline) {
					return
				}
				i := int(issued.Add(1)) - 1
				if lv.Requests > 0 && i >= lv.Requests {
					return
				}
				var pre *prebuilt
				if i < len(firsts) {
					pre = &firsts[i]
				}
				if lv.Requests > 0 && i == lv.Requests-1 {
					spentOnce.Do(func() { close(spent) })
				}
				if first {
					first = false
					started.Add(1)
				}
				if lv.Requests <= 0 && deadline.IsZero() {
					return
				}
				if lv.Steps > 1 {
					r.chain(ctx, reqCtx, idx, start, lv, src, i, func(rec metrics.Record) { r.finish(rec, keep, &lastEnd) })
					continue
				}
				if pre == nil {
					b := r.prebuild(src, i)
					pre = &b
				}
				rec := r.one(reqCtx, idx, start, *pre)
				r.finish(rec, keep, &lastEnd)
			}
		}()
	}
	wg.Wait()
	if lv.RampUp > 0 && int(started.Load()) < users && ctx.Err() == nil && !r.abort.Load() {
		if refused := r.Progress.Errors()[string(api.ClassConnectionRefused)]; refused > 0 {
			// The requests were spent by a server that refused them
			// (killed, restarted): more requests would not have helped.
			r.addWarning(fmt.Sprintf("ramp-up: only %d of %d users sent a request: the server went away (%d requests found it refusing connections, connection_refused), and their quick failures spent the level's requests", started.Load(), users, refused))
		} else {
			r.addWarning(fmt.Sprintf("ramp-up: only %d of %d users sent a request before the level's requests or time ran out; the level did not reach its concurrency (give it more requests or --duration, or a shorter --ramp-up)", started.Load(), users))
		}
	}
	return time.Duration(lastEnd.Load())
}

// users is how many users the level's whole closed loop has (a shard's
// part of it counts the whole).
func (lv Level) users() int {
	if lv.ramp.total > 0 {
		return lv.ramp.total
	}
	return lv.Load.Concurrency
}

// userStart is when closed-loop user u sends its first request, from the
// level's start: spread evenly over RampUp (0: all at once). A shard's
// users keep their places in the whole level's ramp.
func (lv Level) userStart(u int) time.Duration {
	first, stride, total := 0, 1, lv.Load.Concurrency
	if lv.ramp.total > 0 {
		first, stride, total = lv.ramp.first, lv.ramp.stride, lv.ramp.total
	}
	if lv.RampUp <= 0 || total <= 0 {
		return 0
	}
	return time.Duration(int64(lv.RampUp) * int64(first+u*stride) / int64(total))
}

// waitUntil sleeps until t; false when ctx ended or stop closed first, true
// at t or as soon as done closes.
func waitUntil(ctx context.Context, t time.Time, stop, done <-chan struct{}) bool {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err() == nil
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-stop:
		return false
	case <-done:
		return true
	case <-timer.C:
		return true
	}
}

// thinkLead is how long before a conversation turn's instant its send
// stops sleeping (a Go timer, which wakes up to a few ms late on a busy or
// virtual machine) and waits awake.
const thinkLead = 3 * time.Millisecond

// chain runs one agent chain: Steps dependent calls, each carrying the
// conversation so far (every earlier prompt and answer, and ToolResult
// after an answer that called a tool) plus a new user turn, with
// ThinkTime between them. A failed step ends the chain.
func (r *Runner) chain(ctx, reqCtx context.Context, level int, levelStart time.Time, lv Level, src Source, chainIdx int, finish func(metrics.Record)) {
	var history []api.Message
	for step := 0; step < lv.Steps; step++ {
		var due time.Time // the turn's instant, after the think time
		if step > 0 && lv.ThinkTime > 0 {
			due = time.Now().Add(lv.ThinkTime)
		}
		if ctx.Err() != nil {
			return
		}
		turn, inTok := src.Request(chainIdx*lv.Steps + step)
		req := *turn
		req.Messages = append(append([]api.Message(nil), history...), turn.Messages...)
		if step > 0 {
			inTok = 0 // the tokenizer or usage counts the whole conversation
		}
		// The turn is built (its whole conversation encoded) within the
		// think time; the send sleeps until shortly before its instant
		// and waits the rest awake (api.SendAt), as the open loop's do.
		prep := r.Client.Prepare(&req)
		sendCtx := reqCtx
		if !due.IsZero() {
			if !waitUntil(ctx, due.Add(-thinkLead), nil, nil) {
				return
			}
			sendCtx = api.SendAt(reqCtx, due, r.thinkSpin.Until)
		}
		rec, resp := r.send(sendCtx, level, levelStart, prebuilt{req: &req, prep: prep, inTok: inTok})
		answer := answerOf(resp)
		rec.Chain, rec.Step = chainIdx+1, step+1
		finish(rec)
		if !rec.OK {
			return
		}
		history = append(req.Messages, api.Message{Role: "assistant", Content: answer})
		if !resp.ToolCallAt.IsZero() {
			history = append(history, ToolResult) // the tool ran: its result opens the next turn
		}
	}
}

package proxy

import (
	"log"
	"runtime/debug"
	"sync"
)

// backlog runs the work of recording ended streams — decoding each one's
// kept bytes, making its record, appending it — on one goroutine at a
// time, after the handler has returned. That work (some 60 µs a
// 32-token stream, BenchmarkRecordEnded) then holds neither the client's
// connection, whose next request waited for it, nor more than one core:
// done by each handler as its stream ended, streams ending together took
// both of a 2-core machine's, and the chunks of those still open waited.
//
// What waits is bounded (maxBacklog bytes of kept answers, and
// jobOverhead a job besides): past that a handler does its own work, as
// before, beside the backlog's goroutine, so records may then reach the
// sink out of their streams' order. A job that panics is logged, as
// net/http's server logs a handler's panic, and the proxy goes on.
type backlog struct {
	// logf logs a job's panic (nil: the standard logger); the proxy's
	// scrubs the line of the credentials it knows.
	logf    func(format string, args ...any)
	mu      sync.Mutex
	jobs    []job
	bytes   int64 // of the jobs waiting
	running bool  // a goroutine is draining jobs
}

type job struct {
	do    func()
	bytes int64
}

// maxBacklog bounds the bytes the answers waiting to be recorded keep;
// jobOverhead is what a job holds besides (its response and record).
const (
	maxBacklog  = 64 << 20
	jobOverhead = 1 << 10
)

// add runs do later, on the backlog's goroutine; do holds bytes of kept
// answer until it has run. When the backlog is full, add runs do itself.
func (q *backlog) add(bytes int64, do func()) {
	bytes += jobOverhead
	q.mu.Lock()
	if q.bytes+bytes > maxBacklog {
		q.mu.Unlock()
		do()
		return
	}
	q.jobs = append(q.jobs, job{do, bytes})
	q.bytes += bytes
	start := !q.running
	q.running = true
	q.mu.Unlock()
	if start {
		go q.drain()
	}
}

// drain runs the jobs in order until there are none, then ends (so a
// proxy with no work has no goroutine).
func (q *backlog) drain() {
	for {
		q.mu.Lock()
		if len(q.jobs) == 0 {
			q.running = false
			q.jobs = nil
			q.mu.Unlock()
			return
		}
		j := q.jobs[0]
		q.jobs[0] = job{}
		q.jobs = q.jobs[1:]
		q.mu.Unlock()
		j.run(q.logf)
		q.mu.Lock()
		q.bytes -= j.bytes
		q.mu.Unlock()
	}
}

// run runs the job; a panic is logged with its stack, by logf.
func (j job) run(logf func(format string, args ...any)) {
	defer func() {
		if v := recover(); v != nil {
			if logf == nil {
				logf = log.Printf
			}
			logf("tokbench proxy: making a record panicked: %v\n%s", v, debug.Stack())
		}
	}()
	j.do()
}

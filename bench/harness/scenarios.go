package main

import (
	"cmp"
	"crypto/tls"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/tokbench/tokbench/load"
	"github.com/tokbench/tokbench/metrics"
)

// paced: c streams, 64 tokens each one chunk at a time, at a gap that keeps
// the offered load near -offered tokens/s (25,000: 25 tokens/s a stream at
// 1,000 streams); measures the timing error. The users start evenly over
// one answer's length (bench --ramp-up), so the level is c streams in
// steady state: about c/(answer length) request starts a second rather
// than c at one instant (that is the burst scenario).
func (h *harness) paced(c int) (Result, error) { return h.streams("paced", c, true, h.offered) }

// stress: the paced load at -stress-offered tokens/s (50,000: 50 tokens/s a
// stream at 1,000 streams), where the server and the client together need
// most of a 2-core machine: it shows what an overloaded machine does to
// the figures, and that the self-check says so.
func (h *harness) stress(c int) (Result, error) {
	return h.streams("stress", c, true, h.stressOffered)
}

// burst: the paced load with every user starting at the same instant, two
// rounds in lockstep: c request starts at once, twice.
func (h *harness) burst(c int) (Result, error) { return h.streams("burst", c, false, h.offered) }

func (h *harness) streams(name string, c int, ramp bool, offered float64) (Result, error) {
	// Two answers per stream: every user's second answer runs with all c
	// streams open. Shorter answers at 5,000 streams keep the level short.
	tokens, rounds := 64, 2
	if c >= 5000 {
		tokens = 16
	}
	gap := max(2*time.Millisecond, time.Duration(float64(c)/offered*float64(time.Second)))
	// Warm-up requests (one per stream, not recorded) open the connections
	// first, so that the figures are the steady state, not c dials at once.
	src := source{tokens: tokens, ttft: 5 * time.Millisecond, gap: gap, burst: 1, step: h.step}
	warm := load.Level{Load: metrics.Load{Mode: metrics.ModeConcurrency, Concurrency: c}, Requests: c, Lockstep: true}
	ad := &stampAdapter{steadyFrom: min(16, tokens/2)}
	// Without a ramp (burst), every user starts in the same instant.
	lv := load.Level{Load: metrics.Load{Mode: metrics.ModeConcurrency, Concurrency: c}, Requests: max(c*rounds, 20), Lockstep: !ramp}
	if ramp {
		lv.RampUp = src.ttft + time.Duration(tokens)*gap
	}
	out, _, err := h.level(name, levelRun{client: h.options(), base: h.base, ad: ad,
		warm: warm, warmSrc: source{tokens: 2, ttft: time.Millisecond, gap: time.Millisecond}, lv: lv, src: src})
	if err != nil {
		return out, err
	}
	if ad.bad > 0 {
		out.Warnings = append(out.Warnings, fmt.Sprintf("%d chunks without a send stamp", ad.bad))
	}
	slices.Sort(ad.errs)
	slices.Sort(ad.first)
	out.ErrP50Ms, out.ErrP99Ms = metrics.Percentile(ad.errs, 50), metrics.Percentile(ad.errs, 99)
	if len(ad.errs) > 0 {
		out.ErrMinMs, out.ErrMaxMs = ad.errs[0], ad.errs[len(ad.errs)-1]
	}
	out.TTFTErrP50, out.TTFTErrP99 = metrics.Percentile(ad.first, 50), metrics.Percentile(ad.first, 99)
	slices.Sort(ad.steady)
	out.SteadyP99Ms = metrics.Percentile(ad.steady, 99)
	out.SteadyFrom = ad.steadyFrom
	out.Offered = offered
	return out, nil
}

// requests: c closed-loop users of one-token answers with no server delay;
// measures the request rate the client sustains and its CPU per request.
func (h *harness) requests(c int) (Result, error) {
	lv := load.Level{Load: metrics.Load{Mode: metrics.ModeConcurrency, Concurrency: c}, Requests: max(20*c, 2000), Lockstep: true}
	out, _, err := h.level("requests", levelRun{client: h.options(), base: h.base, lv: lv, src: source{tokens: 1}})
	if done := out.Requests - out.Failed; done > 0 && out.WallS > 0 {
		out.CPUUsPerReq = out.CPUSPerMTok * float64(out.Tokens) / float64(done) // s per million tokens × tokens per request
		out.ReqPerS = float64(done) / out.WallS
	}
	return out, err
}

// flat: c streams of 2,000 tokens written as fast as the socket takes them,
// 16 chunks (one token each) per write; measures ingest rate and CPU.
func (h *harness) flat(c int) (Result, error) {
	const tokens = 2000
	requests := max(2*c, 100)
	if c >= 1000 {
		requests = c
	}
	lv := load.Level{Load: metrics.Load{Mode: metrics.ModeConcurrency, Concurrency: c}, Requests: requests, Lockstep: true}
	out, _, err := h.level("flat", levelRun{client: h.options(), base: h.base, lv: lv, src: source{tokens: tokens, burst: 16}})
	return out, err
}

// first: c closed-loop users on a fresh transport, with no warm-up, all
// starting at the same instant, two short answers each (8 tokens, the first
// 100 ms after the request, then one every 5 ms), over mode: http
// (tokbench's own HTTP/1.1 connections), https (HTTP/1.1 over TLS) or h2
// (HTTP/2 over TLS), each against a server process of its own (srv). Every
// user's first request opens a connection (the dial, and the TLS
// handshake), as a real run's first requests do; its second should find
// that connection open. The truth is the server's: the request's arrival
// (the kernel receive stamp of its last byte) and the first chunk's send
// instant, both carried in the first chunk. The TTFT error of a request is
// its record's TTFT − (send − arrival): the request's way to the server
// after the client's t0 (whatever of connection set-up, writing and the
// kernel the t0 leaves inside the TTFT) plus the first chunk's way back
// (the same as the paced TTFT error).
func (h *harness) first(srv *serverProc, mode string, c int) (Result, error) {
	o := h.options()
	scheme := "http"
	if mode != "http" {
		scheme = "https"
		o.TLS = &tls.Config{RootCAs: srv.roots}
	}
	o.HTTP2 = mode == "h2"
	ad := &stampAdapter{}
	before, err := srv.stats()
	if err != nil {
		return Result{}, err
	}
	lv := load.Level{Load: metrics.Load{Mode: metrics.ModeConcurrency, Concurrency: c}, Requests: 2 * c, Lockstep: true} // all users at once, on purpose
	src := source{tokens: 8, ttft: 100 * time.Millisecond, gap: 5 * time.Millisecond, burst: 1}
	out, res, err := h.level("first", levelRun{client: o, base: scheme + "://" + srv.addr + "/v1", ad: ad, lv: lv, src: src})
	if err != nil {
		return out, err
	}
	after, err := srv.stats()
	if err != nil {
		return out, err
	}
	out.Mode = mode
	// Each stats call opens a connection of its own, counted in what it
	// returns: the level's are those between the two, less the second's.
	out.Accepted = after.Accepted - before.Accepted - 1
	if n := after.Requests - before.Requests; n != out.Requests {
		out.Warnings = append(out.Warnings, fmt.Sprintf("the server read %d requests, the client sent %d", n, out.Requests))
	}
	if n := after.H2Requests - before.H2Requests; mode == "h2" && n != out.Requests || mode != "h2" && n != 0 {
		out.Warnings = append(out.Warnings, fmt.Sprintf("%d of %d requests came to the server over HTTP/2", n, out.Requests))
	}
	if ad.bad > 0 {
		out.Warnings = append(out.Warnings, fmt.Sprintf("%d chunks without a send stamp", ad.bad))
	}

	// Pair each record with its answer's truth (by Start, the same
	// time.Time in both; several answers of one Start instant by their
	// recorded TTFT).
	type request struct {
		start      time.Time
		doneMs     float64
		has        bool
		err, truth float64
	}
	reqs := make([]request, 0, len(res.Records))
	var unmatched, mismatched int
	for _, rec := range res.Records {
		q := request{start: rec.Start, doneMs: rec.DoneMs}
		if k := rec.Start.UnixNano(); rec.OK {
			ts := ad.truth[k]
			if len(ts) == 0 {
				unmatched++
			} else {
				j := 0
				for i := range ts {
					if math.Abs(ts[i].recorded-rec.TTFTMs) < math.Abs(ts[j].recorded-rec.TTFTMs) {
						j = i
					}
				}
				if math.Abs(ts[j].recorded-rec.TTFTMs) > 1e-6 {
					mismatched++
				}
				q.has, q.truth, q.err = true, ts[j].truth, rec.TTFTMs-ts[j].truth
				ad.truth[k] = slices.Delete(ts, j, j+1)
			}
		}
		reqs = append(reqs, q)
	}
	if unmatched > 0 {
		out.Warnings = append(out.Warnings, fmt.Sprintf("%d answers without the server's arrival instant in their first chunk", unmatched))
	}
	if mismatched > 0 {
		out.Warnings = append(out.Warnings, fmt.Sprintf("%d answers whose record's TTFT is not the one their first chunk gave", mismatched))
	}

	// Which request of its user each one is. The runner does not say, but
	// a closed loop has an order that does: a user sends its next request
	// only after its previous one ended, so a user's k-th request starts at
	// least k−1 shortest requests (DoneMs, t0 to the end of the response)
	// after the level's first start. Sorted by start, then, the first c
	// requests are exactly the users' first ones when the c-th started
	// within one shortest request of the first (every user has sent its
	// first request before any sends a second), and the rest are exactly
	// the second ones when the last started within two (no user got to a
	// third and left another with one). Both hold by a wide margin here:
	// c users start at one instant and a request takes over 135 ms. When
	// they do not, the split is by start order and the result says so.
	slices.SortFunc(reqs, func(a, b request) int { return a.start.Compare(b.start) })
	if len(reqs) == 2*c {
		shortest := math.Inf(1)
		for _, q := range reqs {
			shortest = min(shortest, q.doneMs)
		}
		t0 := reqs[0].start
		if spreadMs := float64(reqs[c-1].start.Sub(t0)) / 1e6; spreadMs >= shortest {
			out.Warnings = append(out.Warnings, fmt.Sprintf("first requests by start order: the %d-th request started %.1f ms after the first, more than the shortest request (%.1f ms)", c, spreadMs, shortest))
		}
		if spreadMs := float64(reqs[2*c-1].start.Sub(t0)) / 1e6; spreadMs >= 2*shortest {
			out.Warnings = append(out.Warnings, fmt.Sprintf("second requests by start order: the last request started %.1f ms after the first, more than two shortest requests (%.1f ms)", spreadMs, 2*shortest))
		}
	} else {
		out.Warnings = append(out.Warnings, fmt.Sprintf("%d records for %d users × 2 requests: first and second requests by start order", len(reqs), c))
	}
	var firstErr, secondErr, allErr, truths []float64
	nonFinite := 0
	for i, q := range reqs {
		if !q.has {
			continue
		}
		if math.IsNaN(q.err) || math.IsInf(q.err, 0) || math.IsNaN(q.truth) || math.IsInf(q.truth, 0) {
			nonFinite++
			continue
		}
		allErr = append(allErr, q.err)
		truths = append(truths, q.truth)
		if i < c {
			firstErr = append(firstErr, q.err)
		} else {
			secondErr = append(secondErr, q.err)
		}
	}
	if nonFinite > 0 {
		out.Warnings = append(out.Warnings, fmt.Sprintf("%d requests whose TTFT error is not a finite number", nonFinite))
	}
	out.FirstReqErr, out.SecondReqErr, out.AllReqErr = spread(firstErr), spread(secondErr), spread(allErr)
	if t := spread(truths); t != nil {
		out.TrueTTFTMinMs, out.TrueTTFTMaxMs = t.Min, t.Max
	}
	return out, nil
}

// idle: n streams whose server holds back the first token for 3 s; the
// client's memory is sampled once all are open and waiting.
func (h *harness) idle(n int) (Result, error) {
	heap0, rss0 := memNow()
	runner := make(chan *load.Runner, 1)
	type done struct {
		out Result
		err error
	}
	ch := make(chan done, 1)
	go func() {
		lv := load.Level{Load: metrics.Load{Mode: metrics.ModeConcurrency, Concurrency: n}, Requests: n, Lockstep: true}
		out, _, err := h.level("idle", levelRun{client: h.options(), base: h.base, lv: lv,
			src: source{tokens: 1, ttft: 3 * time.Second}, started: func(r *load.Runner) { runner <- r }})
		ch <- done{out, err}
	}()
	var r *load.Runner
	select {
	case r = <-runner:
	case d := <-ch:
		return d.out, cmp.Or(d.err, errors.New("idle: the level ended before it started"))
	}
	deadline := time.Now().Add(2500 * time.Millisecond)
	for r.Progress.InFlight.Load() < int64(n) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	open := r.Progress.InFlight.Load()
	time.Sleep(300 * time.Millisecond) // headers arrive at once; let every stream reach its first read
	heap1, rss1 := memNow()
	d := <-ch
	if d.err != nil {
		return d.out, d.err
	}
	d.out.IdleHeapKB = float64(heap1-heap0) / 1024 / float64(open)
	d.out.IdleRSSKB = float64(rss1-rss0) / 1024 / float64(open)
	if open < int64(n) {
		d.out.Warnings = append(d.out.Warnings, fmt.Sprintf("only %d of %d streams were open when memory was sampled", open, n))
	}
	return d.out, nil
}

// pacing: an open-loop constant schedule at rate req/s of short answers;
// the client's queue time (actual send − scheduled send) is the pacing error.
func (h *harness) pacing(rate float64, requests int) (Result, error) {
	lv := load.Level{Load: metrics.Load{Mode: metrics.ModeRate, RateRPS: rate, Arrival: load.ArrivalConstant}, Requests: requests}
	out, res, err := h.level("pacing", levelRun{client: h.options(), base: h.base, lv: lv,
		src: source{tokens: 2, ttft: time.Millisecond, gap: time.Millisecond}})
	if err != nil {
		return out, err
	}
	if q := res.Level.QueueMs; q != nil {
		out.QueueP50Ms, out.QueueP99Ms, out.QueueMaxMs = q.P50, q.P99, q.Max
	}
	out.SentPerS = sentRate(res.Records)
	return out, nil
}

// sentRate is the rate the sends kept: the requests after the first, over
// the time from the first send to the last; 0 with fewer than two sends.
func sentRate(recs []metrics.Record) float64 {
	if len(recs) < 2 {
		return 0
	}
	first, last := recs[0].OffsetMs, recs[0].OffsetMs
	for _, rec := range recs[1:] {
		first, last = min(first, rec.OffsetMs), max(last, rec.OffsetMs)
	}
	if last <= first {
		return 0
	}
	return float64(len(recs)-1) / ((last - first) / 1000)
}

package proxy

import (
	"context"
	"net/http"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tokbench/tokbench/api"
	"github.com/tokbench/tokbench/internal/fakellm"
	"github.com/tokbench/tokbench/metrics"
	"github.com/tokbench/tokbench/wire"
)

// BenchmarkProxyStreams sends 100 concurrent streams through the proxy
// and reports how far its recorded upstream TTFT is from the fake
// server's own first flush (p50, p99, in ms): the measurement's error at
// that load, against the truth no client can bend.
func BenchmarkProxyStreams(b *testing.B) {
	up := fakellm.New(fakellm.Script{TTFT: 30 * time.Millisecond, Gap: 5 * time.Millisecond, Tokens: 24, Usage: true})
	defer up.Close()
	base, records := proxied(b, up.URL)
	var errs []float64
	for b.Loop() {
		var wg sync.WaitGroup
		for range 100 {
			wg.Go(func() {
				if st, _ := chat(b, base, http.Header{}); st != 200 {
					b.Errorf("status %d", st)
				}
			})
		}
		wg.Wait()
	}
	first := map[string]time.Time{}
	for _, s := range up.Streams() {
		if len(s.Flushes) > 0 {
			first[s.ID] = s.Flushes[0]
		}
	}
	for _, r := range records() {
		if f, ok := first[r.ResponseID]; ok && r.OK {
			errs = append(errs, r.TTFTMs-float64(f.Sub(r.Start))/1e6)
		}
	}
	slices.Sort(errs)
	b.ReportMetric(metrics.Percentile(errs, 50), "ttft-err-p50-ms")
	b.ReportMetric(metrics.Percentile(errs, 99), "ttft-err-p99-ms")
}

// BenchmarkProxyOverhead: what the proxy adds to what a client gets, at
// 100 concurrent streams. Each round sends 100 streams straight to a fake
// server and 100 through the proxy, with tokbench's own client (kernel
// receive stamps on its connections); a chunk's delay is its arrival at
// the client minus the server's flush of it. Reported: the delay's p50 and
// p99 through the proxy less the same percentile direct, for the first
// chunk (TTFT) and for every chunk, and the proxy's CPU per chunk (the
// process's CPU time through the proxy less direct, per proxied chunk).
func BenchmarkProxyOverhead(b *testing.B) {
	up := fakellm.New(fakellm.Script{TTFT: 20 * time.Millisecond, Gap: 5 * time.Millisecond, Tokens: 32, Usage: true})
	defer up.Close()
	base, _ := proxied(b, up.URL)
	const streams = 100
	type side struct {
		first, every []float64
		cpu          time.Duration
		chunks       int
	}
	var direct, through side
	client := func(u string) *api.Client {
		return &api.Client{HTTP: &http.Client{Transport: wire.NewTransport()}, Adapter: api.OpenAI{Chat: true}, BaseURL: u + "/v1"}
	}
	cd, cp := client(up.URL), client(base)
	round := func(cl *api.Client, s *side) {
		flushes := func() map[string][]time.Time {
			m := map[string][]time.Time{}
			for _, st := range up.Streams() {
				m[st.ID] = st.Flushes
			}
			return m
		}
		before := cpuTime()
		resps := make([]*api.Response, streams)
		var wg sync.WaitGroup
		for i := range streams {
			wg.Go(func() {
				resps[i] = cl.Do(context.Background(), &api.Request{Model: "m", MaxTokens: 32, Messages: []api.Message{{Role: "user", Content: "hi"}}})
			})
		}
		wg.Wait()
		s.cpu += cpuTime() - before
		fl := flushes()
		for _, r := range resps {
			f := fl[r.ID]
			if r.Failed() || len(f) != len(r.Chunks) {
				b.Fatalf("stream %s: %s, %d chunks for %d flushes", r.ID, r.Error, len(r.Chunks), len(f))
			}
			for i, c := range r.Chunks {
				d := float64(c.At.Sub(f[i])) / 1e6
				if i == 0 {
					s.first = append(s.first, d)
				}
				s.every = append(s.every, d)
			}
			s.chunks += len(r.Chunks)
		}
	}
	round(cd, &direct) // connections open, code warm
	round(cp, &through)
	direct, through = side{}, side{}
	for b.Loop() {
		round(cd, &direct)
		round(cp, &through)
	}
	for _, s := range []*side{&direct, &through} {
		slices.Sort(s.first)
		slices.Sort(s.every)
	}
	added := func(p float64, pick func(*side) []float64) float64 {
		return metrics.Percentile(pick(&through), p) - metrics.Percentile(pick(&direct), p)
	}
	first := func(s *side) []float64 { return s.first }
	every := func(s *side) []float64 { return s.every }
	b.ReportMetric(added(50, first), "added-ttft-p50-ms")
	b.ReportMetric(added(99, first), "added-ttft-p99-ms")
	b.ReportMetric(added(50, every), "added-chunk-p50-ms")
	b.ReportMetric(added(99, every), "added-chunk-p99-ms")
	b.ReportMetric(float64(through.cpu-direct.cpu)/float64(through.chunks)/1e3, "proxy-cpu-µs/chunk")
	b.ReportMetric(0, "ns/op")
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

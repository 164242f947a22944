package main

import (
	"io"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tokbench/tokbench/api"
)

// source sends the same short prompt with the server's pacing in the body.
type source struct {
	tokens    int
	ttft, gap time.Duration
	burst     int
	step      bool   // writes on the server's step grid, as a batching engine
	prompt    string // the user's message ("": a short greeting)
}

func (s source) Request(int) (*api.Request, int) {
	prompt := s.prompt
	if prompt == "" {
		prompt = "hello there"
	}
	return &api.Request{Model: "fake", MaxTokens: s.tokens,
		Messages: []api.Message{{Role: "user", Content: prompt}},
		Extra: map[string]any{"bench": map[string]any{
			"ttft_us": s.ttft.Microseconds(), "gap_us": s.gap.Microseconds(), "burst": s.burst, "step": s.step}},
	}, 2
}

// stampAdapter is the OpenAI adapter plus the harness's measurement: after
// a stream is decoded, each chunk's text " t<unix ns>" gives the server's
// send instant, compared with the chunk's recorded arrival; the first
// chunk's " t<ns> r<ns>" also gives the request's arrival at the server.
// The text is then replaced by an ordinary word, so the runner's token
// counting sees what a real stream gives it (repeating short words) rather
// than unique numbers.
type stampAdapter struct {
	api.Adapter // the run's own (set by the Adapter hook)
	mu          sync.Mutex
	collect     bool      // from the measured level's start: warm-up answers are not figures
	errs        []float64 // ms, every token chunk
	steady      []float64 // ms, token chunks from a request's steadyFrom-th on
	steadyFrom  int
	first       []float64 // ms, the first token chunk of each request
	bad         int
	// truth holds, by the response's Start (unix ns), each answer's true
	// TTFT from the server's instants (first chunk sent − request
	// arrived) beside the TTFT the client records for it, so that the
	// first scenario can pair them with the level's records afterwards.
	truth map[int64][]firstTruth
}

// firstTruth is one answer's TTFT: as the record gives it (first chunk's
// recorded arrival − Start, as load.Record computes it) and as the server's
// instants give it, in ms.
type firstTruth struct {
	recorded, truth float64
	arrival         int64 // unix ns: the server's kernel receive stamp of the request
}

// parseStamp reads a chunk's " t<send ns>", or " t<send ns> r<arrival ns>"
// when first (arrival 0 when the r part is absent).
func parseStamp(text string, first bool) (sent, arrival int64, err error) {
	s := strings.TrimPrefix(text, " t")
	if first {
		if st, r, ok := strings.Cut(s, " r"); ok {
			if arrival, err = strconv.ParseInt(r, 10, 64); err != nil {
				return 0, 0, err
			}
			s = st
		}
	}
	sent, err = strconv.ParseInt(s, 10, 64)
	return sent, arrival, err
}

// start collects from now on.
func (a *stampAdapter) start() {
	a.mu.Lock()
	a.collect = true
	a.mu.Unlock()
}

func (a *stampAdapter) Decode(body io.Reader, resp *api.Response) {
	a.Adapter.Decode(body, resp)
	a.mu.Lock()
	defer a.mu.Unlock()
	for i := range resp.Chunks {
		c := &resp.Chunks[i]
		sent, arrival, err := parseStamp(c.Text, i == 0)
		c.Text = " the"
		if err != nil {
			a.bad++
			continue
		}
		if !a.collect {
			continue
		}
		if i == 0 && arrival > 0 {
			if a.truth == nil {
				a.truth = make(map[int64][]firstTruth)
			}
			k := resp.Start.UnixNano()
			a.truth[k] = append(a.truth[k], firstTruth{
				recorded: float64(c.At.Sub(resp.Start)) / float64(time.Millisecond),
				truth:    float64(sent-arrival) / 1e6,
				arrival:  arrival,
			})
		}
		e := float64(c.At.UnixNano()-sent) / 1e6
		a.errs = append(a.errs, e)
		if i >= a.steadyFrom {
			a.steady = append(a.steady, e)
		}
		if i == 0 {
			a.first = append(a.first, e)
		}
	}
}

package sim

import (
	"context"
	"fmt"
	"slices"
	"time"
)

// Trace is one request as the engine served it, in engine time.
type Trace struct {
	ID           uint64
	User         int
	Arrival      time.Duration // when the request reached the engine (t0)
	PromptTokens int
	OutputTokens int
	Finish       Finish
	// ChunkAt[i] is the instant of the i-th output chunk and ChunkTokens[i]
	// the tokens it carried: the tokens of one step form one chunk.
	ChunkAt     []time.Duration
	ChunkTokens []int
}

// TTFT is the first chunk's instant minus arrival.
func (t *Trace) TTFT() time.Duration {
	if len(t.ChunkAt) == 0 {
		return 0
	}
	return t.ChunkAt[0] - t.Arrival
}

// ClosedLoop is a closed-loop load: Users users each send their next request
// the instant their previous one finishes, until Requests have been sent.
type ClosedLoop struct {
	// StartSpread spreads the users' first requests evenly over this time
	// (user u's at u×StartSpread/Users), as tokbench bench does over one
	// request's duration by default; 0 starts them all at time zero.
	StartSpread time.Duration
	// Starts, when set, are the users' first arrivals instead (one per
	// user, in increasing order).
	Starts       []time.Duration
	Users        int
	Requests     int
	PromptTokens int
	MaxTokens    int
	MinTokens    int
	IgnoreEOS    bool
	// Encode is how long each request's media take to encode before the
	// request reaches the engine (its trace's Arrival is when it was
	// sent, so TTFT counts it).
	Encode time.Duration
}

// RunClosedLoop runs a closed-loop load through a fresh engine in virtual
// time (no sleeping) and returns the traces in request-ID order. The first
// request of user u arrives at u×StartSpread/Users.
func RunClosedLoop(ctx context.Context, cfg EngineConfig, cost Cost, load ClosedLoop) ([]Trace, error) {
	if load.Users < 1 {
		return nil, fmt.Errorf("closed loop: users %d: must be >= 1", load.Users)
	}
	if load.Requests < 0 {
		return nil, fmt.Errorf("closed loop: requests %d: must be >= 0", load.Requests)
	}
	if load.Starts != nil && (len(load.Starts) != load.Users || !slices.IsSorted(load.Starts)) {
		return nil, fmt.Errorf("closed loop: %d starts for %d users, or not in order", len(load.Starts), load.Users)
	}
	e, err := NewEngine(cfg, cost)
	if err != nil {
		return nil, err
	}
	traces := make([]Trace, load.Requests)
	sent := 0
	submit := func(user int, at time.Duration) error {
		id := uint64(sent)
		traces[sent] = Trace{
			ID: id, User: user, Arrival: at, PromptTokens: load.PromptTokens,
			ChunkAt:     make([]time.Duration, 0, load.MaxTokens),
			ChunkTokens: make([]int, 0, load.MaxTokens),
		}
		sent++
		return e.Submit(Request{
			ID: id, Arrival: at + load.Encode, PromptTokens: load.PromptTokens,
			MaxTokens: load.MaxTokens, MinTokens: load.MinTokens, IgnoreEOS: load.IgnoreEOS,
		})
	}
	// Users not started yet, in order of their first arrival; they are
	// submitted once engine time reaches it (Submit takes arrivals in order).
	next := 0
	first := func(u int) time.Duration {
		if load.Starts != nil {
			return load.Starts[u]
		}
		return time.Duration(int64(load.StartSpread) * int64(u) / int64(load.Users))
	}
	start := func(upTo time.Duration) error {
		for ; next < load.Users && sent < load.Requests && first(next) <= upTo; next++ {
			if err := submit(next, first(next)); err != nil {
				return err
			}
		}
		return nil
	}
	if err := start(0); err != nil {
		return nil, err
	}
	for steps := 0; ; steps++ {
		if steps%1024 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, fmt.Errorf("closed loop: %w", err)
			}
		}
		if err := start(e.Now()); err != nil {
			return nil, err
		}
		if e.Idle() && next < load.Users && sent < load.Requests {
			if err := start(first(next)); err != nil { // nothing runs: jump to the next start
				return nil, err
			}
		}
		res, ok := e.Step()
		if !ok {
			break
		}
		for _, em := range res.Emits {
			tr := &traces[em.ID]
			tr.ChunkAt = append(tr.ChunkAt, res.Delivered)
			tr.ChunkTokens = append(tr.ChunkTokens, em.Tokens)
			tr.OutputTokens += em.Tokens
			if em.Finish != FinishNone {
				tr.Finish = em.Finish
				if err := start(res.Delivered); err != nil { // earlier first arrivals go first
					return nil, err
				}
				if sent < load.Requests {
					if err := submit(tr.User, res.Delivered); err != nil {
						return nil, err
					}
				}
			}
		}
	}
	return traces, nil
}

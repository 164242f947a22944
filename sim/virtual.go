package sim

import (
	"context"
	"fmt"
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
	Users        int
	Requests     int
	PromptTokens int
	MaxTokens    int
	MinTokens    int
	IgnoreEOS    bool
}

// RunClosedLoop runs a closed-loop load through a fresh engine in virtual
// time (no sleeping) and returns the traces in request-ID order. The first
// request of every user arrives at time zero.
func RunClosedLoop(ctx context.Context, cfg EngineConfig, cost Cost, load ClosedLoop) ([]Trace, error) {
	if load.Users < 1 {
		return nil, fmt.Errorf("closed loop: users %d: must be >= 1", load.Users)
	}
	if load.Requests < 0 {
		return nil, fmt.Errorf("closed loop: requests %d: must be >= 0", load.Requests)
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
			ID: id, Arrival: at, PromptTokens: load.PromptTokens,
			MaxTokens: load.MaxTokens, MinTokens: load.MinTokens, IgnoreEOS: load.IgnoreEOS,
		})
	}
	for u := 0; u < load.Users && sent < load.Requests; u++ {
		if err := submit(u, 0); err != nil {
			return nil, err
		}
	}
	for steps := 0; ; steps++ {
		if steps%1024 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, fmt.Errorf("closed loop: %w", err)
			}
		}
		res, ok := e.Step()
		if !ok {
			break
		}
		for _, em := range res.Emits {
			tr := &traces[em.ID]
			tr.ChunkAt = append(tr.ChunkAt, res.End)
			tr.ChunkTokens = append(tr.ChunkTokens, em.Tokens)
			tr.OutputTokens += em.Tokens
			if em.Finish != FinishNone {
				tr.Finish = em.Finish
				if sent < load.Requests {
					if err := submit(tr.User, res.End); err != nil {
						return nil, err
					}
				}
			}
		}
	}
	return traces, nil
}

package load

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/tokbench/tokbench/metrics"
)

// Shard is one of Count processes that share a run's load. Index is 0-based.
// The split is deterministic, so every shard computes its own part alone:
// users and requests are dealt out as evenly as integers allow (the first
// shards take one more), the rate is divided, and constant-rate schedules
// are phase-shifted so that the shards' sends interleave into one even
// stream at the full rate. Warm-up requests are dealt out too, but every
// shard warms up: one given, each shard runs at least one.
type Shard struct{ Index, Count int }

// ParseShard reads "I/N" (0 ≤ I < N).
func ParseShard(s string) (Shard, error) {
	is, ns, ok := strings.Cut(s, "/")
	i, err1 := strconv.Atoi(strings.TrimSpace(is))
	n, err2 := strconv.Atoi(strings.TrimSpace(ns))
	if !ok || err1 != nil || err2 != nil || n < 1 || i < 0 || i >= n {
		return Shard{}, fmt.Errorf("want I/N with 0 <= I < N, e.g. 0/4, got %q", s)
	}
	return Shard{Index: i, Count: n}, nil
}

// Active reports whether the run is split at all.
func (s Shard) Active() bool { return s.Count > 1 }

// Part returns this shard's share of n whole units (users, requests).
func (s Shard) Part(n int) int {
	if !s.Active() {
		return n
	}
	p := n / s.Count
	if s.Index < n%s.Count {
		p++
	}
	return p
}

// Rate returns this shard's share of a request rate.
func (s Shard) Rate(r float64) float64 {
	if !s.Active() {
		return r
	}
	return r / float64(s.Count)
}

// Phase is the offset of this shard's constant-rate schedule at total rate r.
func (s Shard) Phase(r float64) time.Duration {
	if !s.Active() || r <= 0 {
		return 0
	}
	return time.Duration(float64(s.Index) / r * float64(time.Second))
}

// Seed derives this shard's seed, so shards draw different prompts and
// arrival times from one configured seed.
func (s Shard) Seed(seed uint64) uint64 {
	if !s.Active() {
		return seed
	}
	return seed + uint64(s.Index)*0x9e3779b97f4a7c15
}

// Apply returns this shard's part of a level.
func (s Shard) Apply(lv Level) Level {
	if !s.Active() {
		return lv
	}
	switch lv.Load.Mode {
	case metrics.ModeRate:
		total := lv.Load.RateRPS
		lv.Load.RateRPS = s.Rate(total)
		if lv.Load.Arrival == ArrivalConstant {
			lv.Phase = s.Phase(total)
		}
		if lv.MaxInFlight > 0 {
			lv.MaxInFlight = max(s.Part(lv.MaxInFlight), 1)
		}
	default:
		total := lv.Load.Concurrency
		lv.Load.Concurrency = s.Part(total)
		// Shard I's users are users I, I+N, I+2N… of the whole level, so
		// with a ramp the shards' starts interleave into one even ramp.
		lv.ramp.first, lv.ramp.stride, lv.ramp.total = s.Index, s.Count, total
	}
	if lv.Requests > 0 {
		lv.Requests = s.Part(lv.Requests)
	}
	if lv.Warmup > 0 {
		// Every shard is a client of its own, with its own connections
		// and no request's duration yet known to spread its users'
		// starts over: each warms up, with its share of the warm-up
		// requests and at least one.
		lv.Warmup = max(s.Part(lv.Warmup), 1)
	}
	lv.Seed = s.Seed(lv.Seed)
	return lv
}

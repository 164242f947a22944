package load

import (
	"cmp"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tokbench/tokbench/metrics"
)

// Progress counts the current level's requests and tokens, the retries
// (--retry) and the sends on a new connection after a kept one closed.
type Progress struct {
	Done, Failed, Tokens atomic.Int64
	Retries, Reconnects  atomic.Int64
	// InFlight counts requests sent and not yet answered in full (all levels).
	InFlight atomic.Int64
	Start    atomic.Int64 // level start, unix nanoseconds
	// Warmup is set while the level's warm-up runs (its requests count in
	// none of the other counters).
	Warmup atomic.Bool
	// Chunks counts the token chunks streamed so far (as they arrive, the
	// warm-up's too); DoneChunks those of completed requests, whose
	// Tokens they carried.
	Chunks, DoneChunks atomic.Int64
	// LateTicks counts the client self-check's ticks that woke more than
	// LagWarnMs late during the level: a client too busy to stamp on time.
	LateTicks atomic.Int64

	mu     sync.Mutex
	errors map[string]int
	ttfts  [recentTTFTs]float64 // the latest completed requests' TTFTs, a ring
	nTTFT  int                  // how many were ever put in it
}

// recentTTFTs is how many of the latest TTFTs RecentTTFT looks at.
const recentTTFTs = 256

// addTTFT keeps a completed request's TTFT among the recent ones.
func (p *Progress) addTTFT(ms float64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.ttfts[p.nTTFT%recentTTFTs] = ms
	p.nTTFT++
}

// RecentTTFT is the median TTFT of the level's latest completed requests
// (up to 256), and how many that is.
func (p *Progress) RecentTTFT() (p50 float64, n int) {
	p.mu.Lock()
	n = min(p.nTTFT, recentTTFTs)
	v := slices.Clone(p.ttfts[:n])
	p.mu.Unlock()
	if n == 0 {
		return 0, 0
	}
	slices.Sort(v)
	return metrics.Percentile(v, 50), n
}

// Errors are the level's failed requests by error class so far.
func (p *Progress) Errors() map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return maps.Clone(p.errors)
}

// CountError counts one failed request of class in Errors.
func (p *Progress) CountError(class string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.errors == nil {
		p.errors = map[string]int{}
	}
	p.errors[cmp.Or(class, "unknown")]++
}

func (p *Progress) reset() {
	p.Done.Store(0)
	p.Failed.Store(0)
	p.Tokens.Store(0)
	p.DoneChunks.Store(0)
	p.LateTicks.Store(0)
	p.Retries.Store(0)
	p.Reconnects.Store(0)
	p.mu.Lock()
	p.errors, p.nTTFT = nil, 0
	p.mu.Unlock()
}

// StreamedTPS estimates the tokens per second streaming now from the
// chunks that arrived over d (chunksThen at its start): chunks at the
// tokens per chunk of the completed requests (1 before any completed).
func (p *Progress) StreamedTPS(chunksThen int64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	perChunk := 1.0
	if c := p.DoneChunks.Load(); c > 0 {
		perChunk = float64(p.Tokens.Load()) / float64(c)
	}
	return float64(p.Chunks.Load()-chunksThen) * perChunk / d.Seconds()
}

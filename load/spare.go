package load

import (
	"context"
	"net/url"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// spareKeeper is a transport that can keep connections open ahead of the
// requests that will need them (wire.Transport).
type spareKeeper interface {
	Spare(ctx context.Context, u *url.URL, n int) (int, error)
}

// Spare connections: the keeper looks every spareTick at the sends due
// within its horizon and keeps that many idle connections open, plus
// spareFloor; the horizon is spareHorizon, or four times the keeper's last
// round of dials when dialling takes longer (a distant server, TLS).
const (
	spareTick    = 5 * time.Millisecond
	spareHorizon = 50 * time.Millisecond
	spareFloor   = 2
	maxHorizon   = 2 * time.Second
)

// keepSpare keeps an open loop's spare connections open until ctx ends,
// so that no send dials as it is due: a request's connection is busy for
// its whole answer, so a rate times a request's duration are in use at
// once, more than a level can open before it starts when answers are long.
// It returns the count of connections it opened, which stays 0 for a
// transport that cannot, with --connections cold, or when the in-flight
// cap bounds the connections already opened.
func (r *Runner) keepSpare(ctx context.Context, lv Level, start time.Time, offsets []time.Duration, wg *sync.WaitGroup) *atomic.Int64 {
	opened := new(atomic.Int64)
	sk, ok := r.Client.HTTP.Transport.(spareKeeper)
	if !ok || r.Cold || lv.MaxInFlight > 0 {
		return opened
	}
	u, err := url.Parse(r.Client.BaseURL)
	if err != nil || u.Host == "" {
		return opened
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(spareTick)
		defer tick.Stop()
		horizon := spareHorizon
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			now := time.Since(start) - lv.Phase
			from := sort.Search(len(offsets), func(i int) bool { return offsets[i] >= now })
			if from == len(offsets) {
				return
			}
			to := sort.Search(len(offsets), func(i int) bool { return offsets[i] > now+horizon })
			t0 := time.Now()
			n, _ := sk.Spare(ctx, u, to-from+spareFloor)
			if n > 0 {
				opened.Add(int64(n))
				horizon = min(max(spareHorizon, 4*time.Since(t0)), maxHorizon)
			}
		}
	}()
	return opened
}

package load

import (
	"context"
	"math"
	"net/url"
	"time"

	"github.com/tokbench/tokbench/metrics"
)

// connections is how many connections a level needs open at its start:
// one per closed-loop user; for an open loop, the in-flight cap, or else
// one second of arrivals (at most 1,024) — more are opened as needed, and
// their set-up is the requests' own phase, outside TTFT.
func (lv Level) connections() int {
	n := lv.Requests
	if lv.Load.Mode != metrics.ModeRate {
		n = lv.Load.Concurrency
		if lv.Requests > 0 {
			n = min(n, lv.Requests)
		}
		return max(n, 0)
	}
	want := lv.MaxInFlight
	if want <= 0 {
		want = min(int(math.Ceil(lv.Load.RateRPS))+1, 1024)
	}
	if n > 0 {
		want = min(want, n)
	}
	return want
}

// preconnecter is a transport that can open connections ahead of requests
// (wire.Transport).
type preconnecter interface {
	Preconnect(ctx context.Context, u *url.URL, n int) (int, error)
}

// preconnect opens the level's connections before its clock starts, so
// that no measured request pays for connection set-up (DNS, TCP, TLS); a
// request that must open one mid-level records the set-up as its own
// phase. With Cold it closes the idle connections instead. It returns how
// many it opened.
func (r *Runner) preconnect(ctx context.Context, lv Level) (int, error) {
	rt := r.Client.HTTP.Transport
	if r.Cold {
		if ci, ok := rt.(interface{ CloseIdleConnections() }); ok {
			ci.CloseIdleConnections()
		}
		return 0, nil
	}
	pc, ok := rt.(preconnecter)
	if !ok || ctx.Err() != nil {
		return 0, nil
	}
	u, err := url.Parse(r.Client.BaseURL)
	if err != nil || u.Host == "" {
		return 0, nil // the requests will say what is wrong with it
	}
	ctx, cancel := context.WithTimeout(ctx, preconnectTimeout)
	defer cancel()
	return pc.Preconnect(ctx, u, lv.connections())
}

// preconnectTimeout bounds the set-up before a level.
const preconnectTimeout = 30 * time.Second

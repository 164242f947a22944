package load

import (
	"sync/atomic"
	"time"

	"github.com/tokbench/tokbench/metrics"
)

// sendSteps are the instants of one open-loop send's way from its
// schedule to the wire: the pacer reached it (reached: it had its body
// and the sends before it were started), woke for it (woke), its
// goroutine began (began), its last wait ended (waited), and its bytes
// were handed to the kernel (wrote, t0).
type sendSteps struct {
	due, reached, woke, began, waited, wrote time.Time
}

// Late-send causes: the step of a send's way that added most to its
// lateness (docs/metrics.md, "Late sends").
const (
	causeWake  = iota // the pacer woke after the instant
	causeStart        // the send began late: its goroutine, --max-in-flight, its body, the sends before it
	causeWait         // the send's last wait, awake, ended late: its thread lost the processor
	causeWrite        // the write itself, less any wait for a connection
	nCauses
)

// cause is the step that added most to a send late by lateMs (its
// lateness less its wait for a connection): each step's share is how much
// later than the instant it ended than the step before it. The pacer's
// share is its sleep's alone: a pacer that reached the send after its
// instant (held by --max-in-flight, or by the sends before it) made it
// start late. The write's share is what is left of lateMs, so a wait for
// a connection (not the client's lateness) is no step's.
func (s sendSteps) cause(lateMs float64) int {
	after := func(t time.Time) float64 { return max(ms(t.Sub(s.due)), 0) }
	reached, woke, began, waited := after(s.reached), after(s.woke), after(s.began), after(s.waited)
	woke = max(woke, reached)
	began = max(began, woke)
	waited = max(waited, began)
	shares := [nCauses]float64{
		causeWake:  woke - reached,
		causeStart: reached + began - woke,
		causeWait:  waited - began,
		causeWrite: lateMs - waited,
	}
	most := causeWake
	for c, v := range shares {
		if v > shares[most] {
			most = c
		}
	}
	return most
}

// lateCounts counts a level's late sends by cause; safe for concurrent use.
type lateCounts [nCauses]atomic.Int64

func (l *lateCounts) add(cause int) { l[cause].Add(1) }

// summary is the counts for summary.json, nil when no send was late.
func (l *lateCounts) summary() *metrics.LateBy {
	b := metrics.LateBy{
		Wake:  int(l[causeWake].Load()),
		Start: int(l[causeStart].Load()),
		Wait:  int(l[causeWait].Load()),
		Write: int(l[causeWrite].Load()),
	}
	if b == (metrics.LateBy{}) {
		return nil
	}
	return &b
}

package load

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/tokbench/tokbench/internal/fakellm"
	"github.com/tokbench/tokbench/metrics"
)

// TestOpenLoopNeverEarly: the pacer wakes ahead of each instant and the
// send's goroutine waits out the rest, so no request reaches the server
// before its scheduled instant (the server's kernel receive stamp), over
// gaps both longer and shorter than the pacer's lead; and each record's
// queue is its t0 after that instant, never before it.
func TestOpenLoopNeverEarly(t *testing.T) {
	for _, rate := range []float64{40, 400} {
		srv := fakellm.New(fakellm.Script{TTFT: 2 * time.Millisecond, Gap: time.Millisecond, Tokens: 2, Usage: true})
		r := newRunner(t, srv)
		lv := Level{Load: metrics.Load{Mode: metrics.ModeRate, RateRPS: rate, Arrival: ArrivalConstant}, Requests: 40}
		res, err := r.RunLevel(context.Background(), 0, lv, fixedSource{maxTokens: 2})
		streams := srv.Streams()
		srv.Close()
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Records) != 40 || len(streams) != 40 {
			t.Fatalf("%v req/s: %d records, %d requests at the server, want 40 of each", rate, len(res.Records), len(streams))
		}
		var due, arrived []time.Time
		for _, rec := range res.Records {
			if rec.QueueMs < 0 {
				t.Errorf("%v req/s: record %d left %.3f ms before its instant", rate, rec.ID, -rec.QueueMs)
			}
			due = append(due, rec.Start.Add(-time.Duration(rec.QueueMs*float64(time.Millisecond))))
		}
		for _, s := range streams {
			arrived = append(arrived, s.Arrived)
		}
		slices.SortFunc(due, time.Time.Compare)
		slices.SortFunc(arrived, time.Time.Compare)
		for i := range due {
			// The records' instants are rounded to the ns by their ms
			// figures: a microsecond is far below any early send.
			if early := due[i].Sub(arrived[i]); early > time.Microsecond {
				t.Errorf("%v req/s: request %d reached the server %v before its instant", rate, i, early)
			}
		}
	}
}

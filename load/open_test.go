package load

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/tokbench/tokbench/internal/busy"
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

// TestConversationTurnsOnTheirInstant: a conversation's later turn is
// built within its think time and sent on its instant (the previous
// answer's end and the think time): never before it, and, on a machine
// that let the test run, within a fraction of a millisecond of it (a Go
// timer alone wakes up to a millisecond late, and building the turn after
// it came on top).
func TestConversationTurnsOnTheirInstant(t *testing.T) {
	srv := fakellm.New(fakellm.Script{TTFT: 2 * time.Millisecond, Gap: time.Millisecond, Tokens: 3, Usage: true})
	defer srv.Close()
	r := newRunner(t, srv)
	const think = 12 * time.Millisecond
	// One conversation at a time: the test's own waits do not keep each
	// other off the cores.
	lv := Level{Load: metrics.Load{Mode: metrics.ModeConcurrency, Concurrency: 1}, Requests: 4, Steps: 4, ThinkTime: think}
	watch := busy.Start()
	res, err := r.RunLevel(context.Background(), 0, lv, fixedSource{maxTokens: 3})
	timed := watch.Stop().Judge(t, "the turns' lateness")
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Records) != 16 {
		t.Fatalf("%d records, want 4 conversations of 4 turns", len(res.Records))
	}
	ends := map[[2]int]time.Time{}
	for _, rec := range res.Records {
		ends[[2]int{rec.Chain, rec.Step}] = rec.Start.Add(time.Duration(rec.DoneMs * float64(time.Millisecond)))
	}
	var late []float64
	for _, rec := range res.Records {
		if rec.Step < 2 {
			continue
		}
		prev, ok := ends[[2]int{rec.Chain, rec.Step - 1}]
		if !ok {
			t.Fatalf("conversation %d has no turn %d", rec.Chain, rec.Step-1)
		}
		l := float64(rec.Start.Sub(prev.Add(think))) / 1e6
		if l < 0 {
			t.Errorf("conversation %d turn %d went %.3f ms before its instant", rec.Chain, rec.Step, -l)
		}
		late = append(late, l)
	}
	slices.Sort(late)
	if len(late) != 12 {
		t.Fatalf("%d later turns, want 12", len(late))
	}
	if p50 := late[len(late)/2]; timed && p50 > 0.3 {
		t.Errorf("later turns left p50 %.3f ms after their instants, want within 0.3 ms", p50)
	}
}

package load

import (
	"testing"
	"time"
)

func TestLateCauses(t *testing.T) {
	due := time.Unix(1000, 0)
	at := func(ms float64) time.Time { return due.Add(time.Duration(ms * float64(time.Millisecond))) }
	cases := []struct {
		name                         string
		reached, woke, began, waited float64 // ms after the instant (negative: before it)
		late                         float64
		want                         int
	}{
		{"pacer woke late", -10, 3, 3.01, 3.02, 3.05, causeWake},
		{"goroutine began late", -10, -0.3, 2.5, 2.5, 2.6, causeStart},
		{"held by --max-in-flight before the pacer slept", 40, 40, 40.1, 40.1, 40.2, causeStart},
		{"held after the wake by --max-in-flight", -5, -0.5, 48, 48, 48.1, causeStart},
		{"the awake wait lost its thread", -10, -0.3, -0.25, 4, 4.1, causeWait},
		{"the write was slow", -10, -0.3, -0.25, 0.01, 1.9, causeWrite},
		// A send that reached the pacer late, whose pacer then woke at
		// once, is the start's: the pacer's sleep added nothing.
		{"behind, pacer at once", 2, 2.01, 2.02, 2.03, 2.1, causeStart},
		// Shares, not instants: woke at 2.5 after reaching at 1.0 is a
		// share of 1.5 for the pacer, more than the start's 1 and the
		// wait's 1.3, though the wait ended latest.
		{"shares against instants", 1, 2.5, 2.5, 3.8, 3.9, causeWake},
		// The write's share is what is left of the lateness less the
		// wait for a connection: here nothing of the write is left.
		{"connection wait is no step's", -10, 0.2, 0.3, 1.2, 1.3, causeWait},
	}
	for _, c := range cases {
		s := sendSteps{due: due, reached: at(c.reached), woke: at(c.woke), began: at(c.began), waited: at(c.waited)}
		if got := s.cause(c.late); got != c.want {
			t.Errorf("%s: cause %d, want %d", c.name, got, c.want)
		}
	}
}

func TestLateCountsSummary(t *testing.T) {
	var l lateCounts
	if l.summary() != nil {
		t.Fatal("no late send: want no late_by")
	}
	for _, c := range []int{causeWake, causeStart, causeStart, causeWait, causeWrite, causeWrite, causeWrite} {
		l.add(c)
	}
	b := l.summary()
	if b == nil || b.Wake != 1 || b.Start != 2 || b.Wait != 1 || b.Write != 3 {
		t.Fatalf("late_by %+v, want wake 1, start 2, wait 1, write 3", b)
	}
}

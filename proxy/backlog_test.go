package proxy

import (
	"bytes"
	"log"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestBacklogOneAtATimeInOrder: jobs added from many goroutines run one at
// a time, each once, those of one goroutine in the order it added them,
// and once all have run no goroutine is left draining.
func TestBacklogOneAtATimeInOrder(t *testing.T) {
	var q backlog
	var running, most atomic.Int32
	var mu sync.Mutex
	ran := map[int][]int{}
	var all sync.WaitGroup
	var adders sync.WaitGroup
	for g := range 8 {
		adders.Go(func() {
			for i := range 50 {
				all.Add(1)
				q.add(100, func() {
					n := running.Add(1)
					if n > most.Load() {
						most.Store(n)
					}
					time.Sleep(10 * time.Microsecond)
					mu.Lock()
					ran[g] = append(ran[g], i)
					mu.Unlock()
					running.Add(-1)
					all.Done()
				})
			}
		})
	}
	adders.Wait()
	all.Wait()
	if most.Load() != 1 {
		t.Errorf("%d jobs ran at once, want 1", most.Load())
	}
	for g, is := range ran {
		for i, v := range is {
			if v != i || len(is) != 50 {
				t.Fatalf("goroutine %d's jobs ran as %v", g, is)
			}
		}
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		q.mu.Lock()
		idle := !q.running && q.bytes == 0 && len(q.jobs) == 0
		q.mu.Unlock()
		if idle {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the backlog still drains with nothing in it")
		}
	}
}

// TestBacklogFullRunsInline: while maxBacklog bytes wait, a job is run by
// the goroutine that adds it, before add returns.
func TestBacklogFullRunsInline(t *testing.T) {
	var q backlog
	release, started := make(chan struct{}), make(chan struct{})
	q.add(maxBacklog-jobOverhead, func() { close(started); <-release }) // fills it while it runs
	<-started
	inline := false
	q.add(0, func() { inline = true })
	if !inline {
		t.Error("a job past the bound did not run at once")
	}
	close(release)
}

// TestBacklogSurvivesAPanic: a job that panics is logged, and the jobs
// after it still run.
func TestBacklogSurvivesAPanic(t *testing.T) {
	var logged bytes.Buffer
	log.SetOutput(&logged)
	defer log.SetOutput(os.Stderr)
	var q backlog
	done := make(chan struct{})
	q.add(0, func() { panic("a bad stream") })
	q.add(0, func() { close(done) })
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the job after a panic never ran")
	}
	if !strings.Contains(logged.String(), "making a record panicked: a bad stream") {
		t.Errorf("logged %q", logged.String())
	}
}

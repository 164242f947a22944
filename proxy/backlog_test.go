package proxy

import (
	"bufio"
	"bytes"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tokbench/tokbench/internal/fakellm"
	"github.com/tokbench/tokbench/metrics"
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

// TestInFlightCountsUntilTheRecordIsIn: the in-flight gauge counts a
// measured request from its arrival until its record has reached the
// sink — also once the client has its whole answer and the record waits
// on the backlog — and then falls to 0.
func TestInFlightCountsUntilTheRecordIsIn(t *testing.T) {
	up := fakellm.New(fakellm.Script{TTFT: 5 * time.Millisecond, Gap: 20 * time.Millisecond, Tokens: 6, Usage: true})
	defer up.Close()
	u, _ := url.Parse(up.URL + "/v1")
	entered, release := make(chan struct{}), make(chan struct{})
	let := sync.OnceFunc(func() { close(release) })
	defer let() // a failed check does not leave the backlog waiting
	got := make(chan metrics.Record, 1)
	p, err := New(Config{Upstream: u, Sink: func(r metrics.Record) {
		close(entered)
		<-release
		got <- r
	}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(p)
	defer srv.Close()
	if n := p.InFlight.Load(); n != 0 {
		t.Fatalf("in flight before any request: %d", n)
	}
	// Mid-stream: the first chunk is in, five are to come, 20 ms apart.
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/chat/completions", strings.NewReader(
		`{"model":"m","stream":true,"max_tokens":6,"messages":[{"role":"user","content":"hi"}]}`))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(resp.Body)
	if _, err := br.ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	if n := p.InFlight.Load(); n != 1 {
		t.Errorf("in flight mid-stream: %d, want 1", n)
	}
	if _, err := io.Copy(io.Discard, br); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	select { // the client has its answer; the record is being made
	case <-entered:
	case <-time.After(5 * time.Second):
		t.Fatal("no record made 5 s after the client had its answer")
	}
	if n := p.InFlight.Load(); n != 1 {
		t.Errorf("in flight with the record not yet in: %d, want 1", n)
	}
	let()
	r := <-got // the sink sends once let
	if !r.OK || r.OutputTokens != 6 {
		t.Fatalf("record: ok %v, %d tokens, want 6", r.OK, r.OutputTokens)
	}
	for deadline := time.Now().Add(5 * time.Second); p.InFlight.Load() != 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("in flight 5 s after the record: %d, want 0", p.InFlight.Load())
		}
	}
}

package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/tokbench/tokbench/api"
	"github.com/tokbench/tokbench/internal/pace"
)

// bareSend is the send scenarios' floor: the most exact sender this
// machine allows, with none of tokbench in it. A goroutine locked to its
// thread waits for each instant of the scenario's schedule (wait: spinning
// to it, or sleeping until shortly before it and spinning the rest) and
// writes a request made once ahead on one of enough pre-opened
// connections; a reader per connection takes the server's kernel receive
// stamp of each request from its answer. Its lateness on the wire,
// measured the way the send scenarios measure tokbench's, is what the
// machine (its host's stalls, the kernel, loopback) costs a send that
// nothing in the client delays.
func (h *harness) bareSend(offsets []time.Duration, src source, wait func(due time.Time)) (*Spread, error) {
	req, _ := src.Request(0)
	hreq, err := api.OpenAI{Chat: true}.NewHTTPRequest(context.Background(), h.base, req)
	if err != nil {
		return nil, err
	}
	var raw bytes.Buffer
	if err := hreq.Write(&raw); err != nil {
		return nil, err
	}
	// Enough connections for the answers in flight at once (each takes
	// the script's TTFT and gaps, a few ms), and a margin.
	answer := src.ttft + time.Duration(src.tokens)*src.gap + 5*time.Millisecond
	most := 0
	for i, j := 0, 0; i < len(offsets); i++ {
		for offsets[i]-offsets[j] > answer {
			j++
		}
		most = max(most, i-j+1)
	}
	nconn := min(4*most+4, 256)
	free := make(chan *bareConn, nconn)
	var arrivals []int64
	var mu sync.Mutex
	var readers sync.WaitGroup
	conns := make([]*bareConn, 0, nconn)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
		readers.Wait()
	}()
	for range nconn {
		nc, err := net.Dial("tcp", hreq.URL.Host)
		if err != nil {
			return nil, err
		}
		c := &bareConn{Conn: nc, sent: make(chan struct{}, 1)}
		conns = append(conns, c)
		free <- c
		readers.Add(1)
		go func() {
			defer readers.Done()
			br := bufio.NewReader(c)
			for range c.sent {
				r, ok := readArrival(br)
				if !ok {
					return
				}
				mu.Lock()
				arrivals = append(arrivals, r)
				mu.Unlock()
				free <- c
			}
		}()
	}
	dues := make([]int64, 0, len(offsets))
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		start := time.Now().Add(50 * time.Millisecond)
		for _, off := range offsets {
			due := start.Add(off - offsets[0])
			wait(due)
			// A send that finds every connection busy (answers slowed by a
			// busy machine) waits for one, and is as late as that made it.
			var c *bareConn
			select {
			case c = <-free:
			case <-time.After(10 * time.Second):
				return // the connections' answers stopped: reported below as unread
			}
			dues = append(dues, due.UnixNano())
			if _, err := c.Write(raw.Bytes()); err != nil {
				return
			}
			c.sent <- struct{}{}
		}
	}()
	<-done
	deadline := time.Now().Add(5 * time.Second)
	for {
		mu.Lock()
		got := len(arrivals)
		mu.Unlock()
		if got >= len(dues) || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	for _, c := range conns {
		close(c.sent)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(arrivals) < len(dues) {
		return nil, fmt.Errorf("bare sender: %d of %d answers read", len(arrivals), len(dues))
	}
	// The sends went out in order, and on loopback reach the server in
	// order: the k-th arrival is the k-th send's.
	slices.Sort(arrivals)
	late := make([]float64, len(dues))
	for i := range dues {
		late[i] = float64(arrivals[i]-dues[i]) / 1e6
	}
	return spread(late), nil
}

// spinTo waits for due spinning, never sleeping or yielding: the
// spinning floor.
func spinTo(due time.Time) {
	for time.Now().Before(due) {
	}
}

// sleepLead is how early before each instant the sleeping floor wakes to
// spin the rest.
const sleepLead = time.Millisecond

// sleepThenSpin returns a wait that sleeps on the precise timer (the one
// tokbench's pacer sleeps on) until sleepLead before due, then spins: the
// floor of a sender that sleeps between instants, as tokbench does,
// rather than holding a core.
func sleepThenSpin(t *pace.Timer) func(time.Time) {
	return func(due time.Time) {
		t.Until(nil, due.Add(-sleepLead))
		spinTo(due)
	}
}

type bareConn struct {
	net.Conn
	sent chan struct{}
}

var arrivalStamp = regexp.MustCompile(` r(\d+)`)

// readArrival reads one answer and returns the request's arrival (unix ns)
// from its first chunk's " r<ns>".
func readArrival(br *bufio.Reader) (int64, bool) {
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return 0, false
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return 0, false
	}
	m := arrivalStamp.FindSubmatch(body)
	if m == nil {
		return 0, false
	}
	r, err := strconv.ParseInt(string(m[1]), 10, 64)
	return r, err == nil
}

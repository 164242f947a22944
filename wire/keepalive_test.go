package wire

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptrace"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// closingServer answers streamed POSTs with a short chunked answer and
// closes the connection as close says, after the answer to the n-th
// request of the connection (1-based): as llama.cpp's server does after a
// streamed answer, or after its keep-alive maximum.
func closingServer(t *testing.T, header func(n int) string, close func(n int) bool) *rawServer {
	return newRawServer(t, func(_ int, c net.Conn, br *bufio.Reader) {
		for n := 1; ; n++ {
			if _, _, err := readReq(br); err != nil {
				return
			}
			fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n%s\r\n", header(n))
			io.WriteString(c, "e\r\ndata: [DONE]\n\n\r\n0\r\n\r\n")
			if close(n) {
				return
			}
		}
	})
}

// sendAll sends users × each POSTs and returns how many failed and how many
// times the transport asked for a connection (a request sent again asks twice).
func sendAll(t *testing.T, tr *Transport, url string, users, each int, pause time.Duration) (failed, gets int64) {
	t.Helper()
	client := &http.Client{Transport: tr}
	var f, g atomic.Int64
	var wg sync.WaitGroup
	for range users {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{GetConn: func(string) { g.Add(1) }})
				req, _ := http.NewRequestWithContext(ctx, "POST", url, strings.NewReader(`{"stream":true}`))
				resp, err := client.Do(req)
				if err != nil {
					t.Log(err)
					f.Add(1)
					continue
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				time.Sleep(pause)
			}
		}()
	}
	wg.Wait()
	return f.Load(), g.Load()
}

func none(int) string { return "" }

// TestKeepAliveServers: servers that close kept connections — after k
// requests without a word, after the maximum their Keep-Alive header
// gives, with Connection: close, and at random — cost no request.
func TestKeepAliveServers(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var rmu sync.Mutex
	for _, c := range []struct {
		name   string
		header func(n int) string
		close  func(n int) bool
		// noResend: the transport knew in time, so no request went out twice.
		noResend bool
		conns    int32 // connections for 1 user × 20 requests; 0: not checked
	}{
		{name: "silent after 3", header: none, close: func(n int) bool { return n == 3 }},
		{name: "keep-alive max 3", header: func(int) string { return "Keep-Alive: timeout=5, max=3\r\n" }, close: func(n int) bool { return n == 3 }, noResend: true, conns: 7},
		{name: "keep-alive max counting down", header: func(n int) string { return fmt.Sprintf("Keep-Alive: timeout=5, max=%d\r\n", 4-n) }, close: func(n int) bool { return n == 3 }, noResend: true, conns: 7},
		{name: "connection close on the 3rd", header: func(n int) string {
			if n == 3 {
				return "Connection: close\r\n"
			}
			return ""
		}, close: func(n int) bool { return n == 3 }, noResend: true, conns: 7},
		{name: "at random", header: none, close: func(int) bool { rmu.Lock(); defer rmu.Unlock(); return rng.Float64() < 0.3 }},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := closingServer(t, c.header, c.close)
			tr := NewTransport()
			defer tr.CloseIdleConnections()
			users, each := 1, 20
			if c.conns == 0 {
				users = 8
			}
			failed, gets := sendAll(t, tr, srv.url("/v1/chat/completions"), users, each, 0)
			if failed != 0 {
				t.Errorf("%d of %d requests failed", failed, users*each)
			}
			if c.noResend && gets != int64(users*each) {
				t.Errorf("%d connection requests for %d requests: some went out twice", gets, users*each)
			}
			if c.conns > 0 && srv.conns.Load() != c.conns {
				t.Errorf("%d connections, want %d", srv.conns.Load(), c.conns)
			}
		})
	}
}

// TestKeepAliveIdleTimeout: a connection idle for close to the server's
// advertised keep-alive timeout is retired before the server would close
// it, so the next request opens a new one instead of racing the close.
func TestKeepAliveIdleTimeout(t *testing.T) {
	srv := closingServer(t, func(int) string { return "Keep-Alive: timeout=1, max=100\r\n" }, func(int) bool { return false })
	tr := NewTransport()
	defer tr.CloseIdleConnections()
	failed, gets := sendAll(t, tr, srv.url("/"), 1, 3, 600*time.Millisecond)
	if failed != 0 || gets != 3 {
		t.Errorf("%d failed, %d connection requests; want 0, 3", failed, gets)
	}
	if n := srv.conns.Load(); n != 3 {
		t.Errorf("%d connections; want 3 (each idle past half the 1 s timeout)", n)
	}
}

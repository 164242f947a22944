package wire

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// h2cServer starts a server speaking HTTP/1.1 and HTTP/2 with prior
// knowledge, counting the connections it accepts.
func h2cServer(t *testing.T) (*httptest.Server, *serverConns) {
	t.Helper()
	srv := httptest.NewUnstartedServer(http.HandlerFunc(sseHandler))
	var p http.Protocols
	p.SetHTTP1(true)
	p.SetUnencryptedHTTP2(true)
	srv.Config.Protocols = &p
	return srv, countingServer(t, srv, false)
}

// TestH2COneConnection: users that start together over HTTP/2 without TLS
// share one connection from their first request on (net/http's pool dials
// once per request that finds none open, and can dial again for a request
// that follows a short one), and each request after the first on it is
// reported as a reused connection.
func TestH2COneConnection(t *testing.T) {
	srv, conns := h2cServer(t)
	tr := trusting(srv)
	tr.HTTP2 = true
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	const users, each = 10, 3
	var wg sync.WaitGroup
	var fresh atomic.Int32
	for range users {
		wg.Go(func() {
			for range each {
				ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{
					GotConn: func(i httptrace.GotConnInfo) {
						if !i.Reused {
							fresh.Add(1)
						}
					},
				})
				req, _ := http.NewRequestWithContext(ctx, "POST", srv.URL+"/v1/chat/completions", strings.NewReader(`{}`))
				resp, err := client.Do(req)
				if err != nil {
					t.Error(err)
					return
				}
				if resp.ProtoMajor != 2 {
					t.Errorf("proto %s, want HTTP/2", resp.Proto)
				}
				readToDone(t, resp)
			}
		})
	}
	wg.Wait()
	if got := conns.Load(); got != 1 {
		t.Errorf("%d connections, want 1", got)
	}
	if got := fresh.Load(); got != 1 {
		t.Errorf("%d requests on a fresh connection, want 1", got)
	}
}

// TestH2CPreconnect: Preconnect opens the one connection, the first request
// finds it open (reused), and a closed connection is replaced.
func TestH2CPreconnect(t *testing.T) {
	srv, conns := h2cServer(t)
	tr := trusting(srv)
	tr.HTTP2 = true
	defer tr.CloseIdleConnections()
	u, _ := url.Parse(srv.URL + "/v1")
	for i, want := range []int{1, 0} {
		if n, err := tr.Preconnect(context.Background(), u, 8); n != want || err != nil {
			t.Fatalf("Preconnect %d = %d, %v; want %d, nil", i, n, err, want)
		}
	}
	var reused []bool
	ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{
		GotConn: func(i httptrace.GotConnInfo) { reused = append(reused, i.Reused) },
	})
	for range 2 {
		req, _ := http.NewRequestWithContext(ctx, "POST", srv.URL+"/v1/chat/completions", strings.NewReader(`{}`))
		resp, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		readToDone(t, resp)
		tr.CloseIdleConnections() // the second request must open a new one
	}
	if len(reused) != 2 || !reused[0] || reused[1] {
		t.Errorf("GotConn reused %v, want [true false]", reused)
	}
	if got := conns.Load(); got != 2 {
		t.Errorf("%d connections, want 2", got)
	}
}

package wire

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// sseHandler streams a short answer as streaming servers do: chunked, the
// end marker in its own flush, the chunked end after it.
func sseHandler(w http.ResponseWriter, r *http.Request) {
	io.Copy(io.Discard, r.Body)
	w.Header().Set("Content-Type", "text/event-stream")
	for i := range 3 {
		fmt.Fprintf(w, "data: {\"n\":%d}\n\n", i)
		w.(http.Flusher).Flush()
	}
	io.WriteString(w, "data: [DONE]\n\n")
	w.(http.Flusher).Flush()
}

// countingServer starts srv counting the connections it accepts.
func countingServer(t *testing.T, srv *httptest.Server, tlsOn bool) *serverConns {
	t.Helper()
	sc := &serverConns{}
	srv.Config.ConnState = func(c net.Conn, s http.ConnState) {
		if s == http.StateNew {
			sc.mu.Lock()
			sc.remotes = append(sc.remotes, c.RemoteAddr().String())
			sc.mu.Unlock()
		}
	}
	if tlsOn {
		srv.StartTLS()
	} else {
		srv.Start()
	}
	t.Cleanup(srv.Close)
	return sc
}

// serverConns are the connections a test server accepted.
type serverConns struct {
	mu      sync.Mutex
	remotes []string
}

// Load counts the accepted connections that this test's transports
// (trusting) dialed: a stray dial of an earlier test to a port this server
// now reuses does not count.
func (s *serverConns) Load() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := int64(0)
	for _, r := range s.remotes {
		if _, ours := dialedByTests.Load(r); ours {
			n++
		}
	}
	return n
}

// dialedByTests holds the local addresses of the connections trusting's
// transports dialed.
var dialedByTests sync.Map

func trusting(srv *httptest.Server) *Transport {
	tr := NewTransport()
	dial := tr.Fallback.DialContext
	tr.Fallback.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err == nil {
			dialedByTests.Store(c.LocalAddr().String(), true)
		}
		return c, err
	}
	if srv.TLS != nil {
		pool := x509.NewCertPool()
		pool.AddCert(srv.Certificate())
		tr.Fallback.TLSClientConfig = &tls.Config{RootCAs: pool}
	}
	return tr
}

// readToDone reads an SSE body up to its [DONE] event, as tokbench's
// stream decoders do, then to its end before closing it: the tests that
// count connections count them whatever the machine's load (Close's drain
// of the chunked end, which a busy server may send late, has its own
// test in package api: TestConnectionReused).
func readToDone(t *testing.T, resp *http.Response) {
	t.Helper()
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	for {
		line, err := br.ReadString('\n')
		if strings.HasPrefix(line, "data: [DONE]") {
			break
		}
		if err != nil {
			t.Errorf("body ended before [DONE]: %v", err)
			return
		}
	}
	io.Copy(io.Discard, br)
}

// TestTLSOneConnectionPerUser: over HTTPS, to a server that speaks HTTP/1.1
// only (as vLLM's uvicorn and llama.cpp do) and to one that offers HTTP/2
// too, users that read each stream to its [DONE] keep their connection: a
// level of 10 users × 5 requests opens at most 10 connections, not 50
// (fewer when a user starts after another's first answer has ended and
// takes its idle connection), all HTTP/1.1 over TLS with the negotiated
// state on each answer.
func TestTLSOneConnectionPerUser(t *testing.T) {
	for _, h2 := range []bool{false, true} {
		t.Run(fmt.Sprintf("server-h2=%v", h2), func(t *testing.T) {
			srv := httptest.NewUnstartedServer(http.HandlerFunc(sseHandler))
			srv.EnableHTTP2 = h2
			conns := countingServer(t, srv, true)
			tr := trusting(srv)
			defer tr.CloseIdleConnections()
			client := &http.Client{Transport: tr}
			const users, each = 10, 5
			var wg sync.WaitGroup
			for range users {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range each {
						req, _ := http.NewRequest("POST", srv.URL+"/v1/chat/completions", strings.NewReader(`{"stream":true}`))
						resp, err := client.Do(req)
						if err != nil {
							t.Error(err)
							return
						}
						if resp.ProtoMajor != 1 || resp.TLS == nil || (resp.TLS.NegotiatedProtocol != "http/1.1" && resp.TLS.NegotiatedProtocol != "") {
							t.Errorf("proto %s, TLS %+v", resp.Proto, resp.TLS)
						}
						readToDone(t, resp)
					}
				}()
			}
			wg.Wait()
			if got := conns.Load(); got < 1 || got > users {
				t.Errorf("%d connections for %d users × %d requests, want at most %d", got, users, each, users)
			}
		})
	}
}

// TestPreconnect: Preconnect opens the connections (TLS handshakes done)
// before the requests, which then open none; a second call with as many
// idle opens nothing. The TLS 1.3 session tickets a server sends after the
// handshake wait on the idle connections and must not condemn them.
func TestPreconnect(t *testing.T) {
	for _, tlsOn := range []bool{false, true} {
		t.Run(fmt.Sprintf("tls=%v", tlsOn), func(t *testing.T) {
			srv := httptest.NewUnstartedServer(http.HandlerFunc(sseHandler))
			conns := countingServer(t, srv, tlsOn)
			tr := trusting(srv)
			defer tr.CloseIdleConnections()
			u, _ := url.Parse(srv.URL + "/v1")
			n, err := tr.Preconnect(context.Background(), u, 8)
			if n != 8 || err != nil {
				t.Fatalf("Preconnect = %d, %v; want 8, nil", n, err)
			}
			if n, err := tr.Preconnect(context.Background(), u, 8); n != 0 || err != nil {
				t.Fatalf("second Preconnect = %d, %v; want 0, nil", n, err)
			}
			time.Sleep(20 * time.Millisecond) // the tickets reach the idle connections
			client := &http.Client{Transport: tr}
			var wg sync.WaitGroup
			var reused atomic.Int64
			for range 8 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range 3 {
						ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{
							GotConn: func(i httptrace.GotConnInfo) {
								if i.Reused {
									reused.Add(1)
								}
							},
						})
						req, _ := http.NewRequestWithContext(ctx, "POST", srv.URL+"/v1/chat/completions", strings.NewReader(`{}`))
						resp, err := client.Do(req)
						if err != nil {
							t.Error(err)
							return
						}
						readToDone(t, resp)
					}
				}()
			}
			wg.Wait()
			if got := conns.Load(); got != 8 {
				t.Errorf("%d connections, want the 8 Preconnect opened", got)
			}
			if reused.Load() != 24 {
				t.Errorf("%d of 24 requests on a reused connection", reused.Load())
			}
		})
	}
}

// TestTraceOrder: a request on a new HTTPS connection reports its phases
// in order — GetConn, connect, TLS, GotConn (t0, on the open connection),
// WroteRequest, first byte — and one on the same connection after it
// reports GotConn reused, with no connect or handshake.
func TestTraceOrder(t *testing.T) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(sseHandler))
	countingServer(t, srv, true)
	tr := trusting(srv)
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	for round := range 2 {
		var mu sync.Mutex
		var events []string
		at := func(e string) func() {
			return func() { mu.Lock(); events = append(events, e); mu.Unlock() }
		}
		var conn net.Conn
		ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{
			GetConn:              func(string) { at("get")() },
			ConnectStart:         func(string, string) { at("connect")() },
			ConnectDone:          func(string, string, error) { at("connected")() },
			TLSHandshakeStart:    at("tls"),
			TLSHandshakeDone:     func(tls.ConnectionState, error) { at("tls-done")() },
			GotConn:              func(i httptrace.GotConnInfo) { conn = i.Conn; at(fmt.Sprintf("got reused=%v", i.Reused))() },
			WroteRequest:         func(httptrace.WroteRequestInfo) { at("wrote")() },
			GotFirstResponseByte: at("first-byte"),
		})
		req, _ := http.NewRequestWithContext(ctx, "POST", srv.URL+"/v1/chat/completions", strings.NewReader(`{}`))
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		readToDone(t, resp)
		want := "get connect connected tls tls-done got reused=false wrote first-byte"
		if round == 1 {
			want = "get got reused=true wrote first-byte"
		}
		if got := strings.Join(events, " "); got != want {
			t.Errorf("round %d: events %q, want %q", round, got, want)
		}
		if _, ok := conn.(*tls.Conn); !ok {
			t.Errorf("GotConn's connection is %T, want *tls.Conn", conn)
		}
	}
}

// TestHTTP2OnRequest: with HTTP2 set, requests speak HTTP/2: over TLS by
// ALPN, over plain HTTP with prior knowledge.
func TestHTTP2OnRequest(t *testing.T) {
	for _, tlsOn := range []bool{true, false} {
		t.Run(fmt.Sprintf("tls=%v", tlsOn), func(t *testing.T) {
			srv := httptest.NewUnstartedServer(http.HandlerFunc(sseHandler))
			srv.EnableHTTP2 = true
			if !tlsOn {
				var p http.Protocols
				p.SetHTTP1(true)
				p.SetUnencryptedHTTP2(true)
				srv.Config.Protocols = &p
			}
			conns := countingServer(t, srv, tlsOn)
			tr := trusting(srv)
			tr.HTTP2 = true
			defer tr.CloseIdleConnections()
			client := &http.Client{Transport: tr}
			for range 3 {
				req, _ := http.NewRequest("POST", srv.URL+"/v1/chat/completions", strings.NewReader(`{}`))
				resp, err := client.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				if resp.ProtoMajor != 2 {
					t.Errorf("proto %s, want HTTP/2", resp.Proto)
				}
				readToDone(t, resp)
			}
			if got := conns.Load(); got != 1 {
				t.Errorf("%d connections, want 1 (HTTP/2 multiplexes)", got)
			}
		})
	}
}

// TestTLSIdleUnsolicited: over TLS too, an answer that reaches an idle
// connection after its answer ended is no answer to the next request,
// which goes on a new connection.
func TestTLSIdleUnsolicited(t *testing.T) {
	cert := httptest.NewTLSServer(http.NotFoundHandler()) // for its certificate
	cert.Close()
	cfg := &tls.Config{Certificates: cert.TLS.Certificates, NextProtos: []string{"http/1.1"}}
	idle, sent := make(chan struct{}), make(chan struct{})
	srv := newRawServer(t, func(n int, c net.Conn, _ *bufio.Reader) {
		tc := tls.Server(c, cfg)
		strayAnswer(n, tc, bufio.NewReader(tc), idle, sent)
	})
	tr := trusting(cert)
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	u := "https://" + srv.ln.Addr().String() + "/"
	if _, body := get(t, client, u); body != "ok" {
		t.Fatalf("first body %q", body)
	}
	close(idle) // the answer is read whole: the connection waits idle
	<-sent      // the stray answer is on its way (loopback: in the client's socket)
	if _, body := get(t, client, u); body != "fresh" {
		t.Errorf("second body %q, want %q: a stray answer was taken for it", body, "fresh")
	}
	if got := srv.conns.Load(); got != 2 {
		t.Errorf("%d connections, want 2", got)
	}
}

// TestPreconnectHTTP2: with HTTP2, Preconnect opens the one connection the
// streams then share; a second call finds it open.
func TestPreconnectHTTP2(t *testing.T) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(sseHandler))
	srv.EnableHTTP2 = true
	conns := countingServer(t, srv, true)
	tr := trusting(srv)
	tr.HTTP2 = true
	defer tr.CloseIdleConnections()
	u, _ := url.Parse(srv.URL + "/v1")
	if n, err := tr.Preconnect(context.Background(), u, 8); n != 1 || err != nil {
		t.Fatalf("Preconnect = %d, %v; want 1, nil", n, err)
	}
	if n, err := tr.Preconnect(context.Background(), u, 8); n != 0 || err != nil {
		t.Fatalf("second Preconnect = %d, %v; want 0, nil", n, err)
	}
	client := &http.Client{Transport: tr}
	for range 3 {
		req, _ := http.NewRequest("POST", srv.URL+"/v1/chat/completions", strings.NewReader(`{}`))
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		readToDone(t, resp)
	}
	if got := conns.Load(); got != 1 {
		t.Errorf("%d connections, want the one Preconnect opened", got)
	}
}

// TestPreconnectFreshTransport: Preconnect on a transport that never held
// a connection, then CloseIdleConnections, neither panics nor blocks.
func TestPreconnectFreshTransport(t *testing.T) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(sseHandler))
	countingServer(t, srv, false)
	tr := NewTransport()
	u, _ := url.Parse(srv.URL)
	if n, err := tr.Preconnect(context.Background(), u, 2); n != 2 || err != nil {
		t.Fatalf("Preconnect = %d, %v; want 2, nil", n, err)
	}
	tr.CloseIdleConnections()
	if n, err := tr.Preconnect(context.Background(), u, 0); n != 0 || err != nil {
		t.Fatalf("Preconnect(0) = %d, %v", n, err)
	}
}

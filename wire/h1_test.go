package wire

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// rawServer is a loopback server that answers each connection with a script
// of raw bytes, so the framing the transport meets is exactly known.
type rawServer struct {
	ln    net.Listener
	conns atomic.Int32
	wg    sync.WaitGroup
	mu    sync.Mutex
	open  []net.Conn
}

// newRawServer calls serve for every accepted connection, in its own goroutine.
func newRawServer(t testing.TB, serve func(n int, c net.Conn, br *bufio.Reader)) *rawServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &rawServer{ln: ln}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			n := int(s.conns.Add(1))
			s.mu.Lock()
			s.open = append(s.open, c)
			s.mu.Unlock()
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				defer c.Close()
				serve(n, c, bufio.NewReader(c))
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		s.mu.Lock()
		for _, c := range s.open {
			c.Close()
		}
		s.mu.Unlock()
		s.wg.Wait()
	})
	return s
}

func (s *rawServer) url(path string) string { return "http://" + s.ln.Addr().String() + path }

// readReq reads one request and its body off a server connection.
func readReq(br *bufio.Reader) (*http.Request, []byte, error) {
	req, err := http.ReadRequest(br)
	if err != nil {
		return nil, nil, err
	}
	body, err := io.ReadAll(req.Body)
	return req, body, err
}

func get(t *testing.T, c *http.Client, u string) (*http.Response, string) {
	t.Helper()
	resp, err := c.Get(u)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatalf("GET %s body: %v", u, err)
	}
	return resp, string(b)
}

// TestTransportFraming: every way an HTTP/1.1 answer marks its end, read
// to the byte; a connection is reused exactly when its answer allows it.
func TestTransportFraming(t *testing.T) {
	answers := map[string]string{
		"/chunked":   "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6;ext=1\r\n world\r\n0\r\nX-Trailer: t\r\n\r\n",
		"/length":    "HTTP/1.1 200 OK\r\nContent-Length: 11\r\n\r\nhello world",
		"/continue":  "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
		"/nocontent": "HTTP/1.1 204 No Content\r\n\r\n",
		"/empty":     "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
		"/close":     "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nuntil the end",
		"/http10":    "HTTP/1.0 200 OK\r\nContent-Length: 4\r\n\r\nold!",
		"/extra":     "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokHTTP/1.1 200 OK\r\n\r\n", // out of step
		// Chunked framing wins over a length sent with it, which is dropped.
		"/both": "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
	}
	srv := newRawServer(t, func(_ int, c net.Conn, br *bufio.Reader) {
		for {
			req, _, err := readReq(br)
			if err != nil {
				return
			}
			a := answers[req.URL.Path]
			io.WriteString(c, a)
			if strings.Contains(a, "close") || strings.HasPrefix(a, "HTTP/1.0") {
				return
			}
		}
	})
	tr := NewTransport()
	client := &http.Client{Transport: tr}
	cases := []struct {
		path, body string
		status     int
		newConn    bool // the next request needs a new connection
	}{
		{"/chunked", "hello world", 200, false},
		{"/length", "hello world", 200, false},
		{"/continue", "ok", 200, false},
		{"/nocontent", "", 204, false},
		{"/empty", "", 200, false},
		{"/close", "until the end", 200, true},
		{"/http10", "old!", 200, true},
		{"/extra", "ok", 200, true},
		{"/length", "hello world", 200, false},
		{"/both", "hello", 200, false},
	}
	wantConns := int32(1)
	for _, c := range cases {
		resp, body := get(t, client, srv.url(c.path))
		if resp.StatusCode != c.status || body != c.body {
			t.Errorf("%s: %d %q, want %d %q", c.path, resp.StatusCode, body, c.status, c.body)
		}
		if cl := resp.Header.Get("Content-Length"); c.path == "/both" && (cl != "" || resp.ContentLength != -1) {
			t.Errorf("%s: Content-Length %q (%d) kept beside chunked framing", c.path, cl, resp.ContentLength)
		}
		if got := srv.conns.Load(); got != wantConns {
			t.Errorf("%s: the server saw %d connections, want %d", c.path, got, wantConns)
		}
		if c.newConn {
			wantConns++
		}
	}
}

// TestTransportRequestHead: what goes on the wire is the request as built:
// method, path and query, Host, the caller's headers, an exact
// Content-Length and the body, inline or (large) after the head.
// seenHead is what a server saw of a request (TestTransportRequestHead).
type seenHead struct {
	method, uri, host, auth, ua, ctype string
	length                             int64
	body                               []byte
}

// TestTransportRequestHead: the request goes out as net/http writes it,
// its body whole, whether read from a bytes.Reader (copied) or set with
// SetBody (sent uncopied, in one vectored write with the head, over a
// plain connection and over one that takes receive stamps).
func TestTransportRequestHead(t *testing.T) {
	got := make(chan seenHead, 4)
	srv := newRawServer(t, func(_ int, c net.Conn, br *bufio.Reader) {
		for {
			req, body, err := readReq(br)
			if err != nil {
				return
			}
			got <- seenHead{req.Method, req.RequestURI, req.Host, req.Header.Get("Authorization"), req.Header.Get("User-Agent"),
				req.Header.Get("Content-Type"), req.ContentLength, body}
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
		}
	})
	stamped := NewTransport()
	stamped.Fallback.DialContext = ReceiveTimestampDialer(nil)
	forms := []struct {
		name   string
		client *http.Client
		set    func(*http.Request, []byte)
	}{
		{"bytes.Reader", &http.Client{Transport: NewTransport()}, func(r *http.Request, b []byte) {
			std, _ := http.NewRequest("POST", r.URL.String(), bytes.NewReader(b))
			r.Body, r.ContentLength, r.GetBody = std.Body, std.ContentLength, std.GetBody
		}},
		{"SetBody", &http.Client{Transport: NewTransport()}, SetBody},
		{"SetBody, stamped", &http.Client{Transport: stamped}, SetBody},
	}
	for _, f := range forms {
		for _, size := range []int{0, 300, h1Buffer + 1, h1InlineBody + 12345} {
			body := bytes.Repeat([]byte("x"), size)
			req, _ := http.NewRequest("POST", srv.url("/v1/chat/completions?a=b"), nil)
			f.set(req, body)
			req.Header.Set("Authorization", "Bearer sk-secret")
			req.Header.Set("Content-Type", "application/json")
			resp, err := f.client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			s := <-got
			if s.method != "POST" || s.uri != "/v1/chat/completions?a=b" || s.host != srv.ln.Addr().String() ||
				s.auth != "Bearer sk-secret" || s.ua != "Go-http-client/1.1" || s.ctype != "application/json" ||
				s.length != int64(size) || !bytes.Equal(s.body, body) {
				t.Errorf("%s, %d-byte body: server saw %s %s host %q auth %q ua %q type %q length %d body %d bytes",
					f.name, size, s.method, s.uri, s.host, s.auth, s.ua, s.ctype, s.length, len(s.body))
			}
		}
	}
}

// countingTransport is NewTransport with its dials counted: a dial happens
// before the request is written, so a refused request that dialed shows
// at once, with no wait for the server to accept.
func countingTransport() (*Transport, *atomic.Int64) {
	t := NewTransport()
	var n atomic.Int64
	dial := t.Fallback.DialContext
	t.Fallback.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		n.Add(1)
		return dial(ctx, network, addr)
	}
	return t, &n
}

// TestTransportRejectsHeaderInjection: a header value with a line break
// fails the request before anything is written.
func TestTransportRejectsHeaderInjection(t *testing.T) {
	srv := newRawServer(t, func(_ int, c net.Conn, br *bufio.Reader) { io.Copy(io.Discard, br) })
	req, _ := http.NewRequest("GET", srv.url("/"), nil)
	req.Header.Set("X-Evil", "a\r\nInjected: yes")
	tr, dials := countingTransport()
	if _, err := (&http.Client{Transport: tr}).Do(req); err == nil || !strings.Contains(err.Error(), "invalid header") {
		t.Errorf("err = %v, want an invalid header error", err)
	}
	if n := dials.Load(); n != 0 {
		t.Errorf("%d connections dialed for a refused request", n)
	}
}

// TestTransportRetriesStaleIdle: a server that closes its side of a kept
// connection after answering leaves a stale idle connection; the next
// request is not lost on it but goes, body intact, on a new connection
// (conn sees the close before sending).
func TestTransportRetriesStaleIdle(t *testing.T) {
	var bodies sync.Map
	closed := make(chan int, 3)
	srv := newRawServer(t, func(n int, c net.Conn, br *bufio.Reader) {
		_, body, err := readReq(br)
		if err != nil {
			return
		}
		bodies.Store(n, string(body))
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		c.Close() // without saying so
		closed <- n
	})
	client := &http.Client{Transport: NewTransport()}
	for i := range 3 {
		resp, err := client.Post(srv.url("/"), "text/plain", strings.NewReader(fmt.Sprintf("request %d", i)))
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(b) != "ok" {
			t.Fatalf("request %d: body %q", i, b)
		}
		<-closed // the server has closed (loopback: its FIN is at the client)
		if v, _ := bodies.Load(int(srv.conns.Load())); v != fmt.Sprintf("request %d", i) {
			t.Errorf("request %d: the last connection got %q", i, v)
		}
	}
	if n := srv.conns.Load(); n != 3 {
		t.Errorf("%d connections, want 3 (one per request)", n)
	}
}

// TestTransportCancel: a cancelled context ends a request waiting for its
// answer and one whose body is streaming, at once, and the connection is
// not kept.
func TestTransportCancel(t *testing.T) {
	closed := make(chan int, 4)
	srv := newRawServer(t, func(n int, c net.Conn, br *bufio.Reader) {
		req, _, err := readReq(br)
		if err != nil {
			return
		}
		if req.URL.Path == "/stream" {
			io.WriteString(c, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nfirst\r\n")
		}
		io.Copy(io.Discard, br) // hold the answer until the client goes
		closed <- n
	})
	tr := NewTransport()
	client := &http.Client{Transport: tr}

	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	req, _ := http.NewRequestWithContext(ctx, "GET", srv.url("/wait"), nil)
	t0 := time.Now()
	_, err := client.Do(req)
	if !errors.Is(err, context.Canceled) || time.Since(t0) > 2*time.Second {
		t.Errorf("waiting for the answer: %v after %v, want context.Canceled at once", err, time.Since(t0))
	}

	ctx, cancel = context.WithCancel(context.Background())
	req, _ = http.NewRequestWithContext(ctx, "GET", srv.url("/stream"), nil)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 16)
	if n, err := resp.Body.Read(buf); string(buf[:n]) != "first" {
		t.Fatalf("first read %q, %v", buf[:n], err)
	}
	time.AfterFunc(50*time.Millisecond, cancel)
	t0 = time.Now()
	_, err = resp.Body.Read(buf)
	if !errors.Is(err, context.Canceled) || time.Since(t0) > 2*time.Second {
		t.Errorf("streaming body: %v after %v, want context.Canceled at once", err, time.Since(t0))
	}
	resp.Body.Close()
	for i := range 2 {
		select {
		case <-closed:
		case <-time.After(2 * time.Second):
			t.Fatalf("connection %d of the cancelled requests is still open", i+1)
		}
	}
}

// TestTransportCloseDuringRead: Close from another goroutine (a stall
// timer) ends a Read waiting for data, and the connection is not reused.
func TestTransportCloseDuringRead(t *testing.T) {
	srv := newRawServer(t, func(_ int, c net.Conn, br *bufio.Reader) {
		if _, _, err := readReq(br); err != nil {
			return
		}
		io.WriteString(c, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
		io.Copy(io.Discard, br)
	})
	client := &http.Client{Transport: NewTransport()}
	resp, err := client.Get(srv.url("/"))
	if err != nil {
		t.Fatal(err)
	}
	time.AfterFunc(50*time.Millisecond, func() { resp.Body.Close() })
	done := make(chan error, 1)
	go func() {
		_, err := resp.Body.Read(make([]byte, 8))
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil {
			t.Error("Read after Close succeeded")
		}
	case <-time.After(2 * time.Second):
		t.Fatal("Close did not end the waiting Read")
	}
	resp2, err := client.Get(srv.url("/"))
	if err == nil {
		resp2.Body.Close()
	}
	if n := srv.conns.Load(); n != 2 {
		t.Errorf("%d connections, want 2: a closed body's connection is not reused", n)
	}
}

// TestTransportEarlyCloseThenReuse: a body closed before its end whose
// rest arrives at once (an SSE reader stops at [DONE], the chunked end
// follows) is read to its end by Close and its connection reused, as is
// one read to its end; many requests at once get connections of their own.
func TestTransportEarlyCloseThenReuse(t *testing.T) {
	hs := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for i := range 3 {
			fmt.Fprintf(w, "data: %d\n\n", i)
			w.(http.Flusher).Flush()
		}
	}))
	var conns atomic.Int32
	hs.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	hs.Start()
	defer hs.Close()
	client := &http.Client{Transport: NewTransport()}
	resp, err := client.Get(hs.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Read(make([]byte, 4))
	resp.Body.Close() // early: Close reads the rest
	for range 5 {
		if _, body := get(t, client, hs.URL); body != "data: 0\n\ndata: 1\n\ndata: 2\n\n" {
			t.Fatalf("body %q", body)
		}
	}
	if n := conns.Load(); n != 1 {
		t.Errorf("%d connections, want 1 (reused after the early Close and after each whole answer)", n)
	}
	var wg sync.WaitGroup
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := client.Get(hs.URL)
			if err != nil {
				t.Error(err)
				return
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if len(b) != 27 {
				t.Errorf("concurrent body %q", b)
			}
		}()
	}
	wg.Wait()
}

// TestTransportFallback: proxied requests go through net/http.
func TestTransportFallback(t *testing.T) {
	var proxied atomic.Bool
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		proxied.Store(r.URL.IsAbs()) // a proxy gets the absolute URL
		io.WriteString(w, "via proxy")
	}))
	defer proxy.Close()
	pu, _ := url.Parse(proxy.URL)
	tr := NewTransport()
	tr.Fallback.Proxy = http.ProxyURL(pu)
	if _, body := get(t, &http.Client{Transport: tr}, "http://model.internal/v1/models"); body != "via proxy" || !proxied.Load() {
		t.Errorf("proxied body %q (absolute URL %v)", body, proxied.Load())
	}
}

// TestTransportResendsOnClosedKeptConnection: a POST written whole on a
// kept connection that the server then closes without a byte of answer
// goes out again, once, on a new connection, where it gets its answer. A
// new connection that fails the same way is not tried again.
func TestTransportResendsOnClosedKeptConnection(t *testing.T) {
	var seen atomic.Int32
	srv := newRawServer(t, func(_ int, c net.Conn, br *bufio.Reader) {
		for i := 0; ; i++ {
			req, _, err := readReq(br)
			if err != nil {
				return
			}
			seen.Add(1)
			if req.URL.Path == "/hangup" && i > 0 || req.URL.Path == "/always" {
				return // read the request, then hang up without answering
			}
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		}
	})
	client := &http.Client{Transport: NewTransport()}
	get(t, client, srv.url("/"))
	resp, err := client.Post(srv.url("/hangup"), "application/json", strings.NewReader(`{"prompt":"x"}`))
	if err != nil {
		t.Fatalf("POST on a kept connection the server hung up on: %v", err)
	}
	resp.Body.Close()
	if n := seen.Load(); n != 3 {
		t.Errorf("the server got %d requests, want 3 (the POST twice: kept, then new connection)", n)
	}
	seen.Store(0)
	if _, err := client.Post(srv.url("/always"), "application/json", strings.NewReader(`{}`)); err == nil {
		t.Error("a POST every connection hangs up on succeeded")
	}
	if n := seen.Load(); n != 2 {
		t.Errorf("the server got %d requests, want 2 (kept connection, then one new)", n)
	}
}

// TestTransportIdleUnsolicited: bytes that reach an idle connection after
// its answer ended (a server out of step) are no answer to the next
// request, which goes on a new connection.
func TestTransportIdleUnsolicited(t *testing.T) {
	idle, sent := make(chan struct{}), make(chan struct{})
	srv := newRawServer(t, func(n int, c net.Conn, br *bufio.Reader) { strayAnswer(n, c, br, idle, sent) })
	client := &http.Client{Transport: NewTransport()}
	if _, body := get(t, client, srv.url("/")); body != "ok" {
		t.Fatalf("first body %q", body)
	}
	close(idle) // the answer is read whole: the connection waits idle
	<-sent      // the stray answer is on its way (loopback: in the client's socket)
	if _, body := get(t, client, srv.url("/")); body != "fresh" {
		t.Errorf("second body %q, want %q: a stray answer was taken for it", body, "fresh")
	}
}

// TestTransportCanceledBeforeSend: a request whose context already ended
// is not sent, even with an idle connection ready (net/http checks first).
func TestTransportCanceledBeforeSend(t *testing.T) {
	var seen atomic.Int32
	srv := newRawServer(t, func(_ int, c net.Conn, br *bufio.Reader) {
		for {
			if _, _, err := readReq(br); err != nil {
				return
			}
			seen.Add(1)
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		}
	})
	client := &http.Client{Transport: NewTransport()}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for range 10 {
		get(t, client, srv.url("/")) // a connection waits idle
		req, _ := http.NewRequestWithContext(ctx, "POST", srv.url("/v1/completions"), strings.NewReader(`{}`))
		if resp, err := client.Do(req); !errors.Is(err, context.Canceled) {
			if err == nil {
				resp.Body.Close()
			}
			t.Fatalf("err = %v, want context.Canceled", err)
		}
	}
	time.Sleep(50 * time.Millisecond)
	if n := seen.Load(); n != 10 {
		t.Errorf("the server got %d requests, want 10: %d canceled ones were sent", n, n-10)
	}
}

// TestTransportBadContentLength: a Content-Length the answer's framing
// cannot rest on (two that differ, a sign) fails the body, as net/http
// does, and the connection is not kept.
func TestTransportBadContentLength(t *testing.T) {
	answers := map[string]string{
		"/two":  "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 7\r\n\r\nokHTTP/1",
		"/sign": "HTTP/1.1 200 OK\r\nContent-Length: +2\r\n\r\nok",
		"/same": "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\nok",
	}
	srv := newRawServer(t, func(_ int, c net.Conn, br *bufio.Reader) {
		for {
			req, _, err := readReq(br)
			if err != nil {
				return
			}
			io.WriteString(c, answers[req.URL.Path])
		}
	})
	client := &http.Client{Transport: NewTransport()}
	for _, path := range []string{"/two", "/sign", "/same"} {
		resp, err := client.Get(srv.url(path))
		if err != nil {
			t.Errorf("%s: %v", path, err)
			continue
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if wantErr := path != "/same"; (err != nil) != wantErr || (!wantErr && string(b) != "ok") {
			t.Errorf("%s: body %q, err %v; want an error: %v", path, b, err, wantErr)
		}
	}
	if n := srv.conns.Load(); n != 3 {
		t.Errorf("%d connections, want 3 (a new one after each bad length)", n)
	}
}

// TestTransportRejectsTargetInjection: a Host or a request target with a
// line break fails the request before anything is written, as net/http's
// does, rather than adding lines to the request's head.
func TestTransportRejectsTargetInjection(t *testing.T) {
	var injected atomic.Bool
	srv := newRawServer(t, func(_ int, c net.Conn, br *bufio.Reader) {
		for {
			req, _, err := readReq(br)
			if err != nil {
				return
			}
			if req.Header.Get("X-Injected") != "" {
				injected.Store(true)
			}
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
		}
	})
	tr, dials := countingTransport()
	client := &http.Client{Transport: tr}
	req, _ := http.NewRequest("GET", srv.url("/"), nil)
	req.Host = "model.internal\r\nX-Injected: yes"
	if resp, err := client.Do(req); err == nil {
		resp.Body.Close()
		t.Error("a Host with a line break was sent")
	}
	req, _ = http.NewRequest("GET", srv.url("/"), nil)
	req.URL.RawQuery = "a=1 HTTP/1.1\r\nX-Injected: yes\r\nX-Rest:"
	if resp, err := client.Do(req); err == nil {
		resp.Body.Close()
		t.Error("a request target with a line break was sent")
	}
	if n := dials.Load(); n != 0 || injected.Load() {
		t.Errorf("%d connections dialed for refused requests; a header injected: %v", n, injected.Load())
	}
}

// TestTransportCloseGivesUpOnALiveStream: Close of a body whose stream goes
// on waits no more than drainWait for its end, then closes the connection,
// and the next request gets a new one.
func TestTransportCloseGivesUpOnALiveStream(t *testing.T) {
	gone := make(chan struct{}, 1)
	srv := newRawServer(t, func(n int, c net.Conn, br *bufio.Reader) {
		if _, _, err := readReq(br); err != nil {
			return
		}
		io.WriteString(c, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nfirst\r\n")
		if n == 1 {
			io.Copy(io.Discard, br) // the stream goes on until the client leaves
			gone <- struct{}{}
			return
		}
		io.WriteString(c, "0\r\n\r\n")
	})
	client := &http.Client{Transport: NewTransport()}
	resp, err := client.Get(srv.url("/"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Read(make([]byte, 5))
	t0 := time.Now()
	resp.Body.Close()
	if d := time.Since(t0); d < drainWait/2 || d > 2*time.Second {
		t.Errorf("Close took %v, want about %v", d, drainWait)
	}
	select {
	case <-gone:
	case <-time.After(2 * time.Second):
		t.Fatal("the connection of the abandoned stream is still open")
	}
	if _, body := get(t, client, srv.url("/")); body != "first" {
		t.Errorf("next request's body %q", body)
	}
	if n := srv.conns.Load(); n != 2 {
		t.Errorf("%d connections, want 2", n)
	}
}

// TestTransportBoundsTheHead: a server that answers with endless headers,
// or with an endless series of 103 Early Hints, fails the request instead
// of taking the client's memory or holding the request; a plain answer on
// the same transport still reads.
func TestTransportBoundsTheHead(t *testing.T) {
	srv := newRawServer(t, func(_ int, c net.Conn, br *bufio.Reader) {
		req, _, err := readReq(br)
		if err != nil {
			return
		}
		switch req.URL.Path {
		case "/headers":
			io.WriteString(c, "HTTP/1.1 200 OK\r\n")
			line := "X-Pad: " + strings.Repeat("a", 1000) + "\r\n"
			for range 4 << 10 { // 4 MB of headers, or until the client hangs up
				if _, err := io.WriteString(c, line); err != nil {
					return
				}
			}
		case "/hints":
			for range 1000 {
				if _, err := io.WriteString(c, "HTTP/1.1 103 Early Hints\r\nLink: </a>; rel=preload\r\n\r\n"); err != nil {
					return
				}
			}
		default:
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		}
	})
	client := &http.Client{Transport: NewTransport()}
	if _, err := client.Get(srv.url("/headers")); !errors.Is(err, ErrHeadTooLarge) {
		t.Errorf("4 MB of headers: error %v, want ErrHeadTooLarge", err)
	}
	if _, err := client.Get(srv.url("/hints")); !errors.Is(err, ErrTooManyInterim) {
		t.Errorf("endless 103s: error %v", err)
	}
	if _, body := get(t, client, srv.url("/")); body != "ok" {
		t.Errorf("a plain answer after: %q", body)
	}
}

// strayAnswer serves a connection's requests, the first connection's first
// one with an answer followed, 30 ms later, by a second nobody asked for
// ("stale"); every other request gets "fresh".
func strayAnswer(n int, w io.Writer, br *bufio.Reader, idle <-chan struct{}, sent chan<- struct{}) {
	for i := 0; ; i++ {
		if _, _, err := readReq(br); err != nil {
			return
		}
		if n == 1 && i == 0 {
			io.WriteString(w, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
			<-idle // the client has taken its answer: the stray one reaches an idle connection
			io.WriteString(w, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nstale")
			close(sent)
			continue
		}
		io.WriteString(w, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nfresh")
	}
}

// BenchmarkLongBody: a 35 KB request (a 7k-token prompt) sent and
// answered on a kept connection, its body in a bytes.Reader (read and
// copied into the head) or set with SetBody (sent uncopied, one vectored
// write): B/op shows the copies.
func BenchmarkLongBody(b *testing.B) {
	srv := newRawServer(b, func(_ int, c net.Conn, br *bufio.Reader) {
		for {
			if _, _, err := readReq(br); err != nil {
				return
			}
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
		}
	})
	body := bytes.Repeat([]byte("x"), 35000)
	for _, form := range []string{"bytes.Reader", "SetBody"} {
		b.Run(form, func(b *testing.B) {
			tr := NewTransport()
			defer tr.CloseIdleConnections()
			b.ReportAllocs()
			for b.Loop() {
				req, _ := http.NewRequest("POST", srv.url("/"), nil)
				if form == "SetBody" {
					SetBody(req, body)
				} else {
					req.Body, req.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
				}
				resp, err := tr.RoundTrip(req)
				if err != nil {
					b.Fatal(err)
				}
				resp.Body.Close()
			}
		})
	}
}

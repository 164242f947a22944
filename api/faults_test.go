package api

import (
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tokbench/tokbench/wire"
)

var req1 = &Request{Model: "m", Messages: []Message{{Role: "user", Content: "x"}}, MaxTokens: 4}

const okStream = "data: {\"id\":\"r\",\"choices\":[{\"delta\":{\"content\":\" a\"}}]}\n\n" +
	"data: {\"choices\":[{\"delta\":{\"content\":\" b\"},\"finish_reason\":\"length\"}]}\n\n" +
	"data: {\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":2}}\n\ndata: [DONE]\n\n"

func TestHTTPStatusesClassified(t *testing.T) {
	for _, code := range []int{400, 401, 403, 404, 413, 429, 500, 502, 503, 504} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if code == 429 || code == 503 {
				w.Header().Set("Retry-After", "3")
			}
			w.WriteHeader(code)
			fmt.Fprintf(w, `{"error":{"message":"status %d says why"}}`, code)
		}))
		c := &Client{HTTP: srv.Client(), Adapter: OpenAI{Chat: true}, BaseURL: srv.URL}
		r := c.Do(context.Background(), req1)
		srv.Close()
		if r.ErrorClass != HTTPClass(code) || r.Status != code || !strings.Contains(r.Error, fmt.Sprintf("status %d says why", code)) {
			t.Errorf("%d: class %q status %d error %q", code, r.ErrorClass, r.Status, r.Error)
		}
		if (code == 429 || code == 503) != (r.RetryAfter == "3") {
			t.Errorf("%d: Retry-After %q", code, r.RetryAfter)
		}
	}
}

func TestTransportFaults(t *testing.T) {
	// TLS: a server whose certificate the client does not trust.
	tlsSrv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, okStream) }))
	defer tlsSrv.Close()
	c := &Client{HTTP: &http.Client{}, Adapter: OpenAI{Chat: true}, BaseURL: tlsSrv.URL}
	if r := c.Do(context.Background(), req1); r.ErrorClass != "tls" {
		t.Errorf("untrusted TLS: class %q (%s)", r.ErrorClass, r.Error)
	}
	// The same server through a client that trusts its certificate.
	c.HTTP = tlsSrv.Client()
	if r := c.Do(context.Background(), req1); r.Failed() || len(r.Chunks) != 2 {
		t.Errorf("trusted TLS: %q %s", r.ErrorClass, r.Error)
	}
	// DNS: a dialer that fails the lookup the way the resolver does (no
	// query leaves the machine).
	dnsFail := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		return nil, &net.OpError{Op: "dial", Net: network, Err: &net.DNSError{Err: "no such host", Name: "llm.invalid", IsNotFound: true}}
	}}
	c = &Client{HTTP: &http.Client{Transport: dnsFail}, Adapter: OpenAI{Chat: true}, BaseURL: "http://llm.invalid/v1"}
	if r := c.Do(context.Background(), req1); r.ErrorClass != "dns" {
		t.Errorf("DNS failure: class %q (%s)", r.ErrorClass, r.Error)
	}
}

func TestHTTP2AndGzipStreams(t *testing.T) {
	h2 := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ProtoMajor != 2 {
			http.Error(w, "want HTTP/2", http.StatusHTTPVersionNotSupported)
			return
		}
		fmt.Fprint(w, okStream)
	}))
	h2.EnableHTTP2 = true
	h2.StartTLS()
	defer h2.Close()
	c := &Client{HTTP: h2.Client(), Adapter: OpenAI{Chat: true}, BaseURL: h2.URL}
	if r := c.Do(context.Background(), req1); r.Failed() || len(r.Chunks) != 2 || r.Usage.CompletionTokens != 2 {
		t.Errorf("HTTP/2: %q %s", r.ErrorClass, r.Error)
	}

	gz := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
			http.Error(w, "client did not offer gzip", 400)
			return
		}
		w.Header().Set("Content-Encoding", "gzip")
		zw := gzip.NewWriter(w)
		for _, part := range strings.SplitAfter(okStream, "\n\n") {
			zw.Write([]byte(part))
			zw.Flush()
			w.(http.Flusher).Flush()
			time.Sleep(50 * time.Millisecond) // far above a busy machine's scheduling lag
		}
		zw.Close()
	}))
	defer gz.Close()
	c = &Client{HTTP: &http.Client{}, Adapter: OpenAI{Chat: true}, BaseURL: gz.URL}
	r := c.Do(context.Background(), req1)
	if r.Failed() || len(r.Chunks) != 2 {
		t.Fatalf("gzip: %q %s", r.ErrorClass, r.Error)
	}
	if gap := r.Chunks[1].At.Sub(r.Chunks[0].At); gap < 25*time.Millisecond {
		t.Errorf("gzip chunks stamped %v apart: the stream was buffered, not decoded as it came", gap)
	}
}

func TestOddStreams(t *testing.T) {
	big := strings.Repeat("x", 1<<20+10)
	cases := []struct {
		name, body string
		class      string
		chunks     int
	}{
		{"1 MB line", "data: {\"choices\":[{\"delta\":{\"content\":\"" + big + "\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n", "", 1},
		{"invalid UTF-8", "data: {\"choices\":[{\"delta\":{\"content\":\"a\xff\xfeb\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n", "", 1},
		{"no [DONE], clean close", strings.TrimSuffix(okStream, "data: [DONE]\n\n"), "", 2},
		{"null content", "data: {\"choices\":[{\"delta\":{\"content\":null,\"role\":\"assistant\"}}]}\n\n" + okStream, "", 2},
	}
	for _, tr := range benchTransports() {
		for _, c := range cases {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, c.body) }))
			cl := &Client{HTTP: &http.Client{Transport: tr.rt}, Adapter: OpenAI{Chat: true}, BaseURL: srv.URL}
			r := cl.Do(context.Background(), req1)
			tr.rt.CloseIdleConnections()
			srv.Close()
			if string(r.ErrorClass) != c.class || len(r.Chunks) != c.chunks {
				t.Errorf("%s, %s transport: class %q (%s), %d chunks; want %q, %d", c.name, tr.name, r.ErrorClass, r.Error, len(r.Chunks), c.class, c.chunks)
			}
		}
	}
}

// TestNoDoneServerDoesNotHang: a server that sends the whole answer and its
// usage, then neither [DONE] nor a close, ends the request within the grace
// period, successfully, with the response's end at its last event.
func TestNoDoneServerDoesNotHang(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, strings.TrimSuffix(okStream, "data: [DONE]\n\n"))
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	cl := &Client{HTTP: &http.Client{Transport: wire.NewTransport()}, Adapter: OpenAI{Chat: true}, BaseURL: srv.URL} // what bench runs
	start := time.Now()
	r := cl.Do(context.Background(), req1)
	if r.Failed() || r.Usage == nil || len(r.Chunks) != 2 {
		t.Fatalf("class %q (%s)", r.ErrorClass, r.Error)
	}
	if waited := time.Since(start); waited > doneGrace+time.Second {
		t.Errorf("request held %v", waited)
	}
	if d := r.Done.Sub(r.Chunks[1].At); d > 100*time.Millisecond {
		t.Errorf("response end %v after the last chunk; want the last event's instant", d)
	}
}

// TestStallTimeoutCoversTheHead: a server that takes a request and never
// answers is cut at --stall-timeout, not held until the request's timeout.
func TestStallTimeoutCoversTheHead(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	defer srv.Close()
	defer close(release) // before Close, which waits for the handler
	cl := &Client{HTTP: &http.Client{Transport: wire.NewTransport()}, Adapter: OpenAI{Chat: true}, BaseURL: srv.URL, StallTimeout: 200 * time.Millisecond}
	t0 := time.Now()
	resp := cl.Do(context.Background(), req1)
	if took := time.Since(t0); resp.ErrorClass != "stall_timeout" || took > 2*time.Second {
		t.Errorf("class %q (%s) after %v, want stall_timeout after about 200 ms", resp.ErrorClass, resp.Error, took)
	}
}

// TestRedirectNotFollowed: a redirect is its own failure, naming where it
// pointed (without its query), and the API key never goes there.
func TestRedirectNotFollowed(t *testing.T) {
	var elsewhere atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { elsewhere.Add(1) }))
	defer other.Close()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+"/v1/chat/completions?token=s3cr3t", http.StatusTemporaryRedirect)
	}))
	defer srv.Close()
	noFollow := &http.Client{Transport: wire.NewTransport(), CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	cl := &Client{HTTP: noFollow, Adapter: OpenAI{Chat: true}, BaseURL: srv.URL, Header: http.Header{"Authorization": {"Bearer k-123456"}}}
	resp := cl.Do(context.Background(), req1)
	if resp.ErrorClass != "redirect" || !strings.Contains(resp.Error, other.URL+"/v1/chat/completions") || strings.Contains(resp.Error, "s3cr3t") {
		t.Errorf("class %q, error %q", resp.ErrorClass, resp.Error)
	}
	if elsewhere.Load() != 0 {
		t.Error("the request went to the server the redirect named")
	}
}

// TestOverlongStreamCut: a server that streams tokens for ever, past its
// max_tokens, with no finish and no [DONE], is cut and the request fails
// as overlong_stream, in bounded time and memory.
func TestOverlongStreamCut(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for i := 0; i < 1_000_000 && r.Context().Err() == nil; i++ {
			if _, err := io.WriteString(w, "data: {\"choices\":[{\"delta\":{\"content\":\" the\"}}]}\n\n"); err != nil {
				return
			}
			if i%64 == 0 {
				w.(http.Flusher).Flush()
			}
		}
	}))
	defer srv.Close()
	cl := &Client{HTTP: &http.Client{Transport: wire.NewTransport()}, Adapter: OpenAI{Chat: true}, BaseURL: srv.URL}
	resp := cl.Do(context.Background(), &Request{Model: "m", MaxTokens: 16, Messages: []Message{{Role: "user", Content: "hi"}}})
	if resp.ErrorClass != "overlong_stream" || len(resp.Chunks) > overlongChunks(16)+64 {
		t.Errorf("class %q (%s), %d chunks; want overlong_stream near %d", resp.ErrorClass, resp.Error, len(resp.Chunks), overlongChunks(16))
	}
}

// TestNotAStreamSaysWhatItWas: an HTML login page, one JSON document and
// a gzip-encoded stream are told apart in the failure, by what the server
// said the answer was.
func TestNotAStreamSaysWhatItWas(t *testing.T) {
	for _, c := range []struct {
		name, ctype, enc, body, class, want string
	}{
		{"html", "text/html; charset=utf-8", "", "<html><body>Sign in</body></html>", "", "an HTML page"},
		{"json", "application/json", "", `{"choices":[{"message":{"content":"hi"}}]}`, "", "one JSON document, not a stream"},
		{"gzip", "text/event-stream", "gzip", "\x1f\x8b\x08\x00", "encoded_stream", "gzip-encoded"},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", c.ctype)
				if c.enc != "" {
					w.Header().Set("Content-Encoding", c.enc)
				}
				io.WriteString(w, c.body)
			}))
			defer srv.Close()
			cl := &Client{HTTP: &http.Client{Transport: wire.NewTransport()}, Adapter: OpenAI{Chat: true}, BaseURL: srv.URL}
			resp := cl.Do(context.Background(), req1)
			if !resp.Failed() || !strings.Contains(resp.Error, c.want) || c.class != "" && string(resp.ErrorClass) != c.class {
				t.Errorf("class %q, error %q; want %q", resp.ErrorClass, resp.Error, c.want)
			}
		})
	}
}

// TestFollowSameOrigin: with FollowSameOrigin a 307 or 308 to the same
// origin is followed with its method, body and headers; the request's
// clock starts at the first hop, so TTFT counts the hop. A 302, another
// origin and a fourth hop are not followed, and nothing reaches another
// origin.
func TestFollowSameOrigin(t *testing.T) {
	var elsewhere atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { elsewhere.Add(1) }))
	defer other.Close()
	const hop = 40 * time.Millisecond
	var gotBody, gotAuth atomic.Value
	mux := http.NewServeMux()
	mux.HandleFunc("/a/v1/chat/completions", func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(hop)
		http.Redirect(w, r, "/b/v1/chat/completions", http.StatusTemporaryRedirect)
	})
	mux.HandleFunc("/b/v1/chat/completions", func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		gotBody.Store(string(b))
		gotAuth.Store(r.Header.Get("Authorization"))
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n\ndata: {\"choices\":[{\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n")
	})
	mux.HandleFunc("/found/v1/chat/completions", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/b/v1/chat/completions", http.StatusFound)
	})
	mux.HandleFunc("/away/v1/chat/completions", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+"/v1/chat/completions", http.StatusPermanentRedirect)
	})
	mux.HandleFunc("/loop/v1/chat/completions", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, r.URL.Path, http.StatusTemporaryRedirect)
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	follow := &http.Client{Transport: wire.NewTransport(), CheckRedirect: FollowSameOrigin}
	client := func(prefix string) *Client {
		return &Client{HTTP: follow, Adapter: OpenAI{Chat: true}, BaseURL: srv.URL + prefix + "/v1",
			Header: http.Header{"Authorization": {"Bearer k-123456"}, "X-Api-Key": {"k-123456"}}}
	}

	resp := client("/a").Do(context.Background(), req1)
	if resp.ErrorClass != "" || len(resp.Chunks) == 0 {
		t.Fatalf("followed 307: class %q (%s), %d chunks", resp.ErrorClass, resp.Error, len(resp.Chunks))
	}
	if resp.Phases.Redirects != 1 {
		t.Errorf("Phases.Redirects = %d, want 1", resp.Phases.Redirects)
	}
	if ttft := resp.Chunks[0].At.Sub(resp.Start); ttft < hop {
		t.Errorf("TTFT %v does not count the first hop's %v", ttft, hop)
	}
	if b, _ := gotBody.Load().(string); !strings.Contains(b, `"messages"`) {
		t.Errorf("the followed request's body = %q, want the POST's", b)
	}
	if a, _ := gotAuth.Load().(string); a != "Bearer k-123456" {
		t.Errorf("the followed request's Authorization = %q", a)
	}

	for _, c := range []struct{ prefix, why string }{
		{"/found", "a 302 would turn the POST into a GET"},
		{"/away", "another origin"},
		{"/loop", "more than 3 redirects"},
	} {
		resp := client(c.prefix).Do(context.Background(), req1)
		if resp.ErrorClass != "redirect" || !strings.Contains(resp.Error, c.why) {
			t.Errorf("%s: class %q, error %q; want redirect saying %q", c.prefix, resp.ErrorClass, resp.Error, c.why)
		}
	}
	if elsewhere.Load() != 0 {
		t.Error("a request went to another origin")
	}
}

// TestHostileHeadsClassified: endless response headers and endless 103s
// end the request at once, each in a class of its own.
func TestHostileHeadsClassified(t *testing.T) {
	for _, c := range []struct {
		class string
		serve func(net.Conn)
	}{
		{"head_too_large", func(c net.Conn) {
			_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\n")
			for {
				if _, err := io.WriteString(c, "X-Filler: "+strings.Repeat("y", 8000)+"\r\n"); err != nil {
					return
				}
			}
		}},
		{"too_many_interim", func(c net.Conn) {
			for {
				if _, err := io.WriteString(c, "HTTP/1.1 103 Early Hints\r\nLink: </a.css>\r\n\r\n"); err != nil {
					return
				}
			}
		}},
	} {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			for {
				conn, err := ln.Accept()
				if err != nil {
					return
				}
				go func() {
					defer conn.Close()
					buf := make([]byte, 4096)
					_, _ = conn.Read(buf)
					c.serve(conn)
				}()
			}
		}()
		cl := &Client{HTTP: &http.Client{Transport: wire.NewTransport()}, Adapter: OpenAI{Chat: true}, BaseURL: "http://" + ln.Addr().String()}
		resp := cl.Do(context.Background(), req1)
		ln.Close()
		if string(resp.ErrorClass) != c.class {
			t.Errorf("class %q (%s), want %s", resp.ErrorClass, resp.Error, c.class)
		}
	}
}

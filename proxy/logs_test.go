package proxy

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"log"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tokbench/tokbench/tokenize"
)

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// countPanics is a tokenizer that panics, quoting it, on a text that asks
// it to.
type countPanics struct{ tokenize.Tokenizer }

func (c countPanics) Count(s string) int {
	if strings.Contains(s, "count me") {
		panic("cannot count " + s)
	}
	return c.Tokenizer.Count(s)
}

// TestProxyLogsNoCredentials: three lines the proxy logs quote every
// credential its clients sent (Bearer, x-api-key, api-key, a query key,
// Basic auth, a cookie), in every form, and none of the forms is in its
// log: a panic serving a request (net/http's server would log its value
// as it is), a panic making a record (the tokenizer given a stream's
// text that holds them), and net/http's own line on an invalid
// Content-Length the upstream sent, through the server's ErrorLog. Each
// line is logged, with [REDACTED] where the credentials were.
func TestProxyLogsNoCredentials(t *testing.T) {
	basicUser := "probeuser:" + keyBasic
	var secrets [][]string
	for _, k := range []string{keyBearer, keyXAPI, keyAPIKey, keyQuery, keyBasic, keyCookie, basicUser} {
		secrets = append(secrets, forms(k))
	}
	var logs bytes.Buffer
	var logMu sync.Mutex
	log.SetOutput(writerFunc(func(b []byte) (int, error) { logMu.Lock(); defer logMu.Unlock(); return logs.Write(b) }))
	defer log.SetOutput(os.Stderr)

	jsonStr := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	// The upstream is a transport that answers as a careless one would.
	upstream := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		body, _ := io.ReadAll(r.Body)
		r.Body.Close()
		var req struct{ Model string }
		json.Unmarshal(body, &req)
		e := echoCredentials(r)
		answer := func(h http.Header, body string) *http.Response {
			return &http.Response{StatusCode: 200, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, Header: h,
				Body: io.NopCloser(strings.NewReader(body)), ContentLength: -1, Request: r}
		}
		switch req.Model {
		case "panic":
			panic("the transport choked on " + e)
		case "length":
			return answer(http.Header{"Content-Type": {"application/json"}, "Content-Length": {e}},
				`{"choices":[{"index":0,"message":{"content":"hi"},"finish_reason":"stop"}]}`), nil
		case "record":
			return answer(http.Header{"Content-Type": {"text/event-stream"}},
				`data: {"choices":[{"index":0,"delta":{"content":`+jsonStr("count me "+e)+`},"finish_reason":"stop"}]}`+"\n\ndata: [DONE]\n\n"), nil
		}
		return nil, io.ErrUnexpectedEOF
	})
	tok, err := tokenize.Open(tokenize.Default)
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse("http://127.0.0.1:1/v1")
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	ready := make(chan string, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if _, err := Run(ctx, Options{Listen: "127.0.0.1:0", Config: Config{Upstream: u, Transport: upstream, Tokenizer: countPanics{tok}},
			Grace: 5 * time.Second, Ready: func(p, _ string) { ready <- p }}); err != nil {
			t.Error(err)
		}
	}()
	var base string
	select {
	case base = <-ready:
	case <-time.After(10 * time.Second):
		t.Fatal("the proxy did not start")
	}
	basic := "Basic " + base64.StdEncoding.EncodeToString([]byte(basicUser))
	for _, model := range []string{"panic", "length", "record"} {
		for _, auth := range []string{"Bearer " + keyBearer, basic} {
			stream := model == "record"
			b, _ := json.Marshal(map[string]any{"model": model, "stream": stream, "messages": []any{}})
			req, _ := http.NewRequest(http.MethodPost, base+"/v1/chat/completions?key="+keyQuery, bytes.NewReader(b))
			req.Header.Set("Authorization", auth)
			req.Header.Set("X-Api-Key", keyXAPI)
			req.Header.Set("Api-Key", keyAPIKey)
			req.Header.Set("Cookie", "session="+keyCookie+"; theme=dark")
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			switch {
			case model == "panic" && err == nil:
				resp.Body.Close()
				t.Errorf("%s: %d, want the connection cut", model, resp.StatusCode)
			case model != "panic" && err != nil:
				t.Fatalf("%s: %v", model, err)
			case model != "panic":
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					t.Errorf("%s: status %d", model, resp.StatusCode)
				}
			}
		}
	}
	stop() // every handler, and record, is done once Run returns
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("the proxy did not stop")
	}
	logMu.Lock()
	text := logs.String()
	logMu.Unlock()
	for line, want := range map[string]int{"tokbench proxy: panic serving": 2, "tokbench proxy: making a record panicked": 2, "http: invalid Content-Length of": 2} {
		if n := strings.Count(text, line); n != want {
			t.Errorf("the log holds %d lines %q, want %d: the credentials did not reach it, so its search proves nothing", n, line, want)
		}
	}
	if n := strings.Count(text, "[REDACTED]"); n < 6*len(secrets) {
		t.Errorf("the log holds %d [REDACTED], want %d at least", n, 6*len(secrets))
	}
	if strings.Contains(text, "http: panic serving") {
		t.Error("net/http's server logged a panic itself")
	}
	for _, fs := range secrets {
		for _, f := range fs {
			if i := strings.Index(text, f); i >= 0 {
				t.Errorf("the log holds %q (a form of %q): …%s…", f, fs[0], text[max(0, i-60):min(len(text), i+len(f)+20)])
			}
		}
	}
}

package api

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestEndpoint(t *testing.T) {
	cases := []struct {
		base string
		chat bool
		want string
	}{
		{"http://h:8000/v1", true, "http://h:8000/v1/chat/completions"},
		{"http://h:8000/v1/", true, "http://h:8000/v1/chat/completions"},
		{"http://h:8000", true, "http://h:8000/v1/chat/completions"},
		{"http://h:8000/", false, "http://h:8000/v1/completions"},
		{"https://api.example.com/openai/v1", true, "https://api.example.com/openai/v1/chat/completions"},
		{"http://h/v1/chat/completions", true, "http://h/v1/chat/completions"},
	}
	for _, c := range cases {
		got, err := OpenAI{Chat: c.chat}.Endpoint(c.base)
		if err != nil || got != c.want {
			t.Errorf("Endpoint(%q) = %q, %v; want %q", c.base, got, err, c.want)
		}
	}
	if _, err := (OpenAI{}).Endpoint("localhost:8000"); err == nil {
		t.Error("Endpoint accepted a URL without scheme")
	}
}

func TestRedactURL(t *testing.T) {
	got := RedactURL("https://user:pass@h/v1?key=sk-secret#x")
	if strings.Contains(got, "pass") || strings.Contains(got, "sk-secret") {
		t.Errorf("RedactURL kept a secret: %s", got)
	}
}

// serveFile streams a capture file as the server sent it.
func serveFile(t *testing.T, path string) *httptest.Server {
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Write(raw)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func do(t *testing.T, url string, a Adapter) *Response {
	t.Helper()
	c := &Client{HTTP: http.DefaultClient, Adapter: a, BaseURL: url}
	return c.Do(context.Background(), &Request{Model: "m", Messages: []Message{{Role: "user", Content: "hi"}}, MaxTokens: 12})
}

func TestRealCaptures(t *testing.T) {
	cases := []struct {
		file   string
		chat   bool
		usage  bool
		chunks int
		cached int // prompt tokens less timings.prompt_n: llama.cpp served them from its cache
	}{
		{"testdata/llamacpp-openai-chat-usage.sse", true, true, 12, 0},
		{"testdata/llamacpp-openai-chat.sse", true, true, 12, 34}, // llama.cpp sends usage unasked; the prompt was cached but 1 token
		{"testdata/llamacpp-openai-completions.sse", false, true, 12, 0},
	}
	for _, c := range cases {
		resp := do(t, serveFile(t, c.file).URL, OpenAI{Chat: c.chat})
		if resp.Failed() {
			t.Fatalf("%s: failed: %s %s", c.file, resp.ErrorClass, resp.Error)
		}
		if len(resp.Chunks) != c.chunks || !resp.SawDone || resp.Finish != "length" {
			t.Errorf("%s: %d chunks, done %v, finish %q", c.file, len(resp.Chunks), resp.SawDone, resp.Finish)
		}
		if c.usage != (resp.Usage != nil) {
			t.Errorf("%s: usage %+v", c.file, resp.Usage)
		}
		if c.usage && resp.Usage.CompletionTokens != 12 {
			t.Errorf("%s: completion tokens %d, want 12", c.file, resp.Usage.CompletionTokens)
		}
		if c.usage && (!resp.Usage.CachedKnown || resp.Usage.CachedTokens != c.cached) {
			t.Errorf("%s: cached tokens %d (known %v), want %d", c.file, resp.Usage.CachedTokens, resp.Usage.CachedKnown, c.cached)
		}
	}
}

// TestReplayTimedCapture replays a real llama.cpp stream at its recorded
// instants and checks every chunk is stamped at its arrival.
func TestReplayTimedCapture(t *testing.T) {
	f, err := os.Open("testdata/llamacpp-openai-chat.timed.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	type piece struct {
		TMs  float64 `json:"t_ms"`
		Data string  `json:"data"`
	}
	var pieces []piece
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	sc.Scan() // status line
	for sc.Scan() {
		var p piece
		if err := json.Unmarshal(sc.Bytes(), &p); err != nil {
			t.Fatal(err)
		}
		pieces = append(pieces, p)
	}
	sent := make([]time.Time, len(pieces)) // the truth: when each piece left
	var mu sync.Mutex
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(200)
		for i, p := range pieces {
			time.Sleep(time.Until(start.Add(time.Duration(p.TMs * float64(time.Millisecond)))))
			mu.Lock()
			sent[i] = time.Now()
			mu.Unlock()
			fmt.Fprint(w, p.Data)
			w.(http.Flusher).Flush()
		}
	}))
	defer srv.Close()
	resp := do(t, srv.URL, OpenAI{Chat: true})
	if resp.Failed() || len(resp.Chunks) != 48 || resp.Usage == nil || resp.Usage.CompletionTokens != 48 {
		t.Fatalf("replay: failed %q, %d chunks, usage %+v", resp.ErrorClass, len(resp.Chunks), resp.Usage)
	}
	if resp.Server == nil || resp.Server.DecodeTPS < 96 || resp.Server.DecodeTPS > 97 {
		t.Errorf("server timing = %+v, want predicted_per_second 96.28", resp.Server)
	}
	var late []float64
	mu.Lock()
	defer mu.Unlock()
	for i, c := range resp.Chunks {
		d := c.At.Sub(sent[i])
		if d < 0 {
			t.Fatalf("chunk %d stamped %v before the server sent it", i, -d)
		}
		late = append(late, float64(d)/1e6)
	}
	slices.Sort(late)
	if p50 := late[len(late)/2]; p50 > 2 {
		t.Errorf("chunks stamped %.3f ms (median) after they were sent, want within 2 ms", p50)
	}
}

func TestFailures(t *testing.T) {
	const key = "sk-test-very-secret-123"
	mux := http.NewServeMux()
	mux.HandleFunc("/401/v1/chat/completions", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "7")
		w.WriteHeader(401)
		fmt.Fprintf(w, `{"error":{"message":"Incorrect API key provided: %s"}}`, r.Header.Get("Authorization"))
	})
	mux.HandleFunc("/stall/v1/chat/completions", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "data: {\"choices\":[{\"delta\":{\"content\":\" hi\"}}]}\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
	})
	mux.HandleFunc("/cut/v1/chat/completions", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "data: {\"choices\":[{\"delta\":{\"content\":\" hi\"}}]}\n\n")
	})
	mux.HandleFunc("/empty/v1/chat/completions", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "data: {\"choices\":[{\"delta\":{\"role\":\"assistant\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n")
	})
	mux.HandleFunc("/vllmerr/v1/chat/completions", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "data: {\"object\":\"error\",\"message\":\"out of memory\"}\n\n")
	})
	mux.HandleFunc("/eventerr/v1/chat/completions", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "event: error\ndata: {\"error\":{\"message\":\"overloaded\"}}\n\n")
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	for _, tr := range benchTransports() {
		t.Run("transport="+tr.name, func(t *testing.T) {
			hc := &http.Client{Transport: tr.rt}
			defer tr.rt.CloseIdleConnections()
			client := func(path string) *Client {
				return &Client{HTTP: hc, Adapter: OpenAI{Chat: true}, BaseURL: srv.URL + path,
					Header: http.Header{"Authorization": {"Bearer " + key}}, Secrets: []string{key}, StallTimeout: 100 * time.Millisecond}
			}
			req := &Request{Model: "m", Messages: []Message{{Role: "user", Content: "x"}}}

			r := client("/401/v1").Do(context.Background(), req)
			if r.ErrorClass != "http_401" || r.Status != 401 || r.RetryAfter != "7" || !strings.Contains(r.Error, "Incorrect API key") {
				t.Errorf("401: %+v", r)
			}
			if strings.Contains(r.Error, key) {
				t.Errorf("401 error message leaks the key: %s", r.Error)
			}
			if r := client("/stall/v1").Do(context.Background(), req); r.ErrorClass != "stall_timeout" {
				t.Errorf("stall: class %q (%s)", r.ErrorClass, r.Error)
			}
			if r := client("/cut/v1").Do(context.Background(), req); r.ErrorClass != "incomplete_stream" {
				t.Errorf("cut: class %q (%s)", r.ErrorClass, r.Error)
			}
			if r := client("/empty/v1").Do(context.Background(), req); r.ErrorClass != "empty_response" {
				t.Errorf("empty: class %q (%s)", r.ErrorClass, r.Error)
			}
			if r := client("/vllmerr/v1").Do(context.Background(), req); r.ErrorClass != "stream_error" || !strings.Contains(r.Error, "out of memory") {
				t.Errorf("vllm error object: class %q (%s)", r.ErrorClass, r.Error)
			}
			if r := client("/eventerr/v1").Do(context.Background(), req); r.ErrorClass != "stream_error" || !strings.Contains(r.Error, "overloaded") {
				t.Errorf("error event: class %q (%s)", r.ErrorClass, r.Error)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
			defer cancel()
			c := client("/stall/v1")
			c.StallTimeout = 0
			if r := c.Do(ctx, req); r.ErrorClass != "timeout" {
				t.Errorf("request deadline: class %q (%s)", r.ErrorClass, r.Error)
			}

			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			addr := ln.Addr().String()
			ln.Close()
			refused := &Client{HTTP: hc, Adapter: OpenAI{Chat: true}, BaseURL: "http://" + addr + "/v1"}
			if r := refused.Do(context.Background(), req); r.ErrorClass != "connection_refused" {
				t.Errorf("refused: class %q (%s)", r.ErrorClass, r.Error)
			}

		})
	}
}

func TestRequestBody(t *testing.T) {
	var got map[string]any
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		json.NewDecoder(r.Body).Decode(&got)
		fmt.Fprint(w, "data: {\"choices\":[{\"text\":\" a\",\"finish_reason\":\"length\"}]}\n\ndata: [DONE]\n\n")
	}))
	defer srv.Close()
	c := &Client{HTTP: http.DefaultClient, Adapter: OpenAI{Chat: false}, BaseURL: srv.URL}
	c.Do(context.Background(), &Request{Model: "m", Messages: []Message{{Role: "user", Content: "p"}}, MaxTokens: 5, IgnoreEOS: true})
	so, _ := got["stream_options"].(map[string]any)
	if got["prompt"] != "p" || got["max_tokens"] != float64(5) || got["ignore_eos"] != true || got["stream"] != true || so["include_usage"] != true {
		t.Errorf("body = %v", got)
	}
}

// TestScrubEncodings: a secret is scrubbed as it is, URL-encoded and in
// Base64, and a URL's password and query values count as secrets.
func TestScrubEncodings(t *testing.T) {
	const sec = "s3cr3t/key+=?"
	msg := "raw " + sec + " query " + url.QueryEscape(sec) + " path " + url.PathEscape(sec) +
		" b64 " + base64.StdEncoding.EncodeToString([]byte(sec)) + " raw64 " + base64.RawURLEncoding.EncodeToString([]byte(sec))
	got := Scrub(msg, []string{sec})
	if strings.Contains(got, "s3cr3t") || strings.Count(got, "[REDACTED]") != 5 {
		t.Errorf("Scrub = %q", got)
	}
	secs := URLSecrets("https://user:pa55word@host/v1?api_key=k-123456&x=1")
	basic := base64.StdEncoding.EncodeToString([]byte("user:pa55word"))
	if got := Scrub("Authorization: Basic "+basic+" key k-123456 pass pa55word", secs); strings.Contains(got, basic) || strings.Contains(got, "k-123456") || strings.Contains(got, "pa55word") {
		t.Errorf("URL secrets %q left %q", secs, got)
	}
}

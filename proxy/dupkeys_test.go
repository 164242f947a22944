package proxy

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/tokbench/tokbench/metrics"
)

// TestProxyReadsDuplicateKeysAsTheServer: a body that gives "stream"
// twice is measured as the upstream, reading it with encoding/json (the
// last key wins), answered it: a stream, or one JSON document, and in
// either case a good record, not a malformed or incomplete one.
func TestProxyReadsDuplicateKeysAsTheServer(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct{ Stream bool }
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if !req.Stream {
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"id":"w","choices":[{"message":{"content":"one two three"},"finish_reason":"stop"}],"usage":{"prompt_tokens":2,"completion_tokens":3}}`)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		for _, tok := range []string{"one", " two", " three"} {
			io.WriteString(w, `data: {"id":"s","choices":[{"index":0,"delta":{"content":"`+tok+`"}}]}`+"\n\n")
			w.(http.Flusher).Flush()
		}
		io.WriteString(w, `data: {"id":"s","choices":[],"usage":{"prompt_tokens":2,"completion_tokens":3}}`+"\n\ndata: [DONE]\n\n")
	}))
	defer up.Close()
	base, records := proxied(t, up.URL)
	for k, c := range []struct {
		body     string
		streamed bool // as encoding/json reads it
	}{
		{`{"model":"m","stream":true,"messages":[],"stream":false}`, false},
		{`{"model":"m","stream":false,"messages":[],"stream":true}`, true},
		{`{"model":"m","stream":false,"stream":null}`, false},
	} {
		var ref struct{ Stream bool }
		if err := json.Unmarshal([]byte(c.body), &ref); err != nil || ref.Stream != c.streamed {
			t.Fatalf("%s: encoding/json reads stream %v (%v), the test says %v", c.body, ref.Stream, err, c.streamed)
		}
		resp, err := http.Post(base+"/v1/chat/completions", "application/json", strings.NewReader(c.body))
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || strings.HasPrefix(string(got), "data:") != c.streamed {
			t.Fatalf("%s: the client got %d %q", c.body, resp.StatusCode, got)
		}
		recs := records()
		if len(recs) != k+1 {
			t.Fatalf("%s: %d records after %d requests", c.body, len(recs), k+1)
		}
		r := recs[k]
		if !r.OK || r.OutputTokens != 3 || r.Proxy == nil || r.Proxy.NotStreamed == c.streamed {
			t.Errorf("%s: record ok %v (%s %s), %d tokens, proxy %+v; want a good record, streamed %v",
				c.body, r.OK, r.ErrorClass, r.Error, r.OutputTokens, r.Proxy, c.streamed)
		}
	}
}

// TestProxyAsksUsageWhereTheServerReads: with AskUsage, a body that gives
// stream_options (or include_usage) twice is edited where the server,
// reading it with encoding/json, reads it: the last. A client whose last
// stream_options asks for usage gets its usage chunk, as it would
// directly; one whose last does not is not sent one, and its record's
// tokens are the server's count either way.
func TestProxyAsksUsageWhereTheServerReads(t *testing.T) {
	var mu sync.Mutex
	var read []bool // include_usage as the upstream read each request
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			StreamOptions *struct {
				IncludeUsage bool `json:"include_usage"`
			} `json:"stream_options"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		usage := req.StreamOptions != nil && req.StreamOptions.IncludeUsage
		mu.Lock()
		read = append(read, usage)
		mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		for _, tok := range []string{"one", " two", " three"} {
			io.WriteString(w, `data: {"id":"s","choices":[{"index":0,"delta":{"content":"`+tok+`"}}]}`+"\n\n")
		}
		if usage {
			io.WriteString(w, `data: {"id":"s","choices":[],"usage":{"prompt_tokens":2,"completion_tokens":7}}`+"\n\n")
		}
		io.WriteString(w, "data: [DONE]\n\n")
	}))
	defer up.Close()
	base, records := proxiedWith(t, up.URL, func(c *Config) { c.AskUsage = true })
	for k, c := range []struct {
		body        string
		clientAsked bool // as encoding/json reads the client's body
	}{
		{`{"model":"m","stream":true,"stream_options":{"include_usage":false},"stream_options":{"include_usage":true}}`, true},
		{`{"model":"m","stream":true,"stream_options":{"include_usage":true},"stream_options":null}`, false},
		{`{"model":"m","stream":true,"stream_options":{"include_usage":true,"include_usage":false}}`, false},
		{`{"model":"m","stream":true,"stream_options":{"include_usage":false,"include_usage":true}}`, true},
	} {
		var ref struct {
			StreamOptions *struct {
				IncludeUsage bool `json:"include_usage"`
			} `json:"stream_options"`
		}
		if err := json.Unmarshal([]byte(c.body), &ref); err != nil || (ref.StreamOptions != nil && ref.StreamOptions.IncludeUsage) != c.clientAsked {
			t.Fatalf("%s: encoding/json reads it otherwise than the test says (%v)", c.body, err)
		}
		resp, err := http.Post(base+"/v1/chat/completions", "application/json", strings.NewReader(c.body))
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(got), "data: [DONE]") {
			t.Fatalf("%s: the client got %d %q", c.body, resp.StatusCode, got)
		}
		if hasUsage := strings.Contains(string(got), `"completion_tokens":7`); hasUsage != c.clientAsked {
			t.Errorf("%s: the client got a usage chunk: %v, want %v (it asked: %v)", c.body, hasUsage, c.clientAsked, c.clientAsked)
		}
		recs := records()
		mu.Lock()
		served := append([]bool(nil), read...)
		mu.Unlock()
		if len(recs) != k+1 || len(served) != k+1 {
			t.Fatalf("%s: %d records and %d requests served after %d requests", c.body, len(recs), len(served), k+1)
		}
		if !served[k] {
			t.Errorf("%s: the upstream read no include_usage: the proxy edited a key it does not read", c.body)
		}
		if r := recs[k]; r.OutputTokens != 7 || r.TokenSource != metrics.SourceUsage || r.Proxy == nil || r.Proxy.UsageAdded == c.clientAsked {
			t.Errorf("%s: record %d tokens from %s, proxy %+v; want the server's 7, usage added %v", c.body, r.OutputTokens, r.TokenSource, r.Proxy, !c.clientAsked)
		}
	}
}

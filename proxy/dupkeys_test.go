package proxy

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
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

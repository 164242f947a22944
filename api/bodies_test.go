package api

import (
	"context"
	"encoding/json"
	"maps"
	"net/http"
	"net/http/httptest"
	"testing"
)

// capture records the request an adapter sends.
func capture(t *testing.T, a Adapter, base string, req *Request, header http.Header) (string, http.Header, map[string]any) {
	t.Helper()
	var path string
	var h http.Header
	var body map[string]any
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		path, h = r.URL.Path, r.Header.Clone()
		json.NewDecoder(r.Body).Decode(&body)
		w.WriteHeader(500)
	}))
	defer srv.Close()
	(&Client{HTTP: srv.Client(), Adapter: a, BaseURL: srv.URL + base, Header: header}).Do(context.Background(), req)
	return path, h, body
}

func TestNativeURL(t *testing.T) {
	cases := []struct{ base, ep, want string }{
		{"http://h:11434", "/api/chat", "http://h:11434/api/chat"},
		{"http://h:11434/", "/api/chat", "http://h:11434/api/chat"},
		{"http://h:8000/v1", "/api/chat", "http://h:8000/api/chat"},
		{"https://api.anthropic.com", "/v1/messages", "https://api.anthropic.com/v1/messages"},
		{"http://h/v1", "/v1/messages", "http://h/v1/messages"},
		{"http://h/proxy/ollama", "/api/generate", "http://h/proxy/ollama/api/generate"},
		{"http://h/completion", "/completion", "http://h/completion"},
	}
	for _, c := range cases {
		if got, err := NativeURL(c.base, c.ep); err != nil || got != c.want {
			t.Errorf("NativeURL(%q, %q) = %q, %v; want %q", c.base, c.ep, got, err, c.want)
		}
	}
	if _, err := NativeURL("localhost:11434", "/api/chat"); err == nil {
		t.Error("nativeURL accepted a URL without scheme")
	}
}

// TestOpenAIStreamOptions: both OpenAI endpoints ask for usage, and for the
// running usage in every chunk (vLLM's continuous_usage_stats) only when
// ContinuousUsage is set, since other servers may reject the field.
func TestOpenAIStreamOptions(t *testing.T) {
	for _, a := range []OpenAI{{Chat: true}, {Chat: false}, {Chat: true, ContinuousUsage: true}, {Chat: false, ContinuousUsage: true}} {
		path, _, body := capture(t, a, "/v1", &Request{Model: "m", Messages: []Message{{Role: "user", Content: "p"}}}, nil)
		want := map[string]any{"include_usage": true}
		if a.ContinuousUsage {
			want["continuous_usage_stats"] = true
		}
		so, ok := body["stream_options"].(map[string]any)
		if !ok || !maps.Equal(so, want) {
			t.Errorf("%+v: POST %s stream_options = %#v, want %#v", a, path, body["stream_options"], want)
		}
	}
}

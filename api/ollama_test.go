package api

import (
	"math"
	"os"
	"strings"
	"testing"
	"time"
)

func TestOllamaRequest(t *testing.T) {
	req := &Request{Model: "llama3.2:1b", Messages: []Message{{Role: "user", Content: "a"}, {Role: "user", Content: "b"}}, MaxTokens: 32}
	path, _, body := capture(t, Ollama{Chat: true}, "", req, nil)
	opts, _ := body["options"].(map[string]any)
	if path != "/api/chat" || body["stream"] != true || opts["num_predict"] != float64(32) || body["messages"] == nil {
		t.Errorf("chat: POST %s %v", path, body)
	}
	path, _, body = capture(t, Ollama{}, "", req, nil)
	if path != "/api/generate" || body["prompt"] != "a\nb" {
		t.Errorf("generate: POST %s %v", path, body)
	}
}

// TestOllamaServerTiming: the final object's nanosecond durations become
// milliseconds and rates (fixture: 8 tokens in 70 ms, 14 prompt tokens in
// 25 ms, 5 ms load).
func TestOllamaServerTiming(t *testing.T) {
	raw, err := os.ReadFile("testdata/ollama-chat.ndjson")
	if err != nil {
		t.Fatal(err)
	}
	var resp Response
	Ollama{Chat: true}.Decode(strings.NewReader(string(raw)), &resp)
	s := resp.Server
	if resp.Failed() || s == nil {
		t.Fatalf("decode: %s %s, server %+v", resp.ErrorClass, resp.Error, s)
	}
	if s.PredictedMs != 70 || s.PromptMs != 25 || s.LoadMs != 5 || s.PredictedTokens != 8 || s.PromptTokens != 14 {
		t.Errorf("server timing %+v", s)
	}
	if math.Abs(s.DecodeTPS-8/0.070) > 1e-9 || math.Abs(s.PrefillTPS-14/0.025) > 1e-9 {
		t.Errorf("rates: decode %g prefill %g", s.DecodeTPS, s.PrefillTPS)
	}
}

// TestOllamaTokenStamps: the server's created_at of its first and last
// token lines are kept, not the final (done) line's, whichever path read
// them: the fast path for plain token lines, fastjson for a line with a
// field the fast path leaves to it.
func TestOllamaTokenStamps(t *testing.T) {
	at := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	raw, err := os.ReadFile("testdata/ollama-chat.ndjson")
	if err != nil {
		t.Fatal(err)
	}
	slowLast := strings.Replace(string(raw), `"content":"."},"done":false}`, `"content":"."},"done":false,"eval_count":7}`, 1)
	for _, c := range []struct {
		name, body  string
		first, last time.Time
	}{
		{"fast path", string(raw), at("2026-01-01T00:00:00Z"), at("2026-01-01T00:00:00.000007Z")},
		{"last line read by fastjson", slowLast, at("2026-01-01T00:00:00Z"), at("2026-01-01T00:00:00.000007Z")},
		{"no stamps", strings.ReplaceAll(string(raw), `"created_at":`, `"at":`), time.Time{}, time.Time{}},
	} {
		var resp Response
		Ollama{Chat: true}.Decode(strings.NewReader(c.body), &resp)
		s := resp.Server
		if resp.Failed() || s == nil || len(resp.Chunks) != 8 {
			t.Fatalf("%s: decode: %s %s, server %+v, %d chunks", c.name, resp.ErrorClass, resp.Error, s, len(resp.Chunks))
		}
		if !s.FirstTokenAt.Equal(c.first) || !s.LastTokenAt.Equal(c.last) {
			t.Errorf("%s: the server's token stamps %v … %v, want %v … %v", c.name, s.FirstTokenAt, s.LastTokenAt, c.first, c.last)
		}
	}
}

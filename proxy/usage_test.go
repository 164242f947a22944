package proxy

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tokbench/tokbench/api"
	"github.com/tokbench/tokbench/internal/fakellm"
	"github.com/tokbench/tokbench/metrics"
)

func TestAskUsage(t *testing.T) {
	chat := api.OpenAI{Chat: true}
	for _, c := range []struct {
		in      string
		changed bool
		opts    string // stream_options after
	}{
		{`{"model":"m","stream":true}`, true, `{"include_usage":true}`},
		{`{"stream":true,"stream_options":null}`, true, `{"include_usage":true}`},
		{`{"stream":true,"stream_options":{"continuous_usage_stats":true}}`, true, `{"continuous_usage_stats":true,"include_usage":true}`},
		{`{"stream":true,"stream_options":{"include_usage":false}}`, true, `{"include_usage":true}`},
		{`{"stream":true,"stream_options":{"include_usage":true}}`, false, `{"include_usage":true}`},
		{`{"stream":true,"stream_options":"odd"}`, false, `"odd"`},
	} {
		out, changed := askUsage(chat, []byte(c.in))
		var got map[string]json.RawMessage
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("%s: %v", c.in, err)
		}
		if changed != c.changed || string(got["stream_options"]) != c.opts || string(got["stream"]) != "true" {
			t.Errorf("%s → %s (changed %v), want stream_options %s (changed %v)", c.in, out, changed, c.opts, c.changed)
		}
	}
	// A prompt's strings reach the server byte for byte, escapes as sent.
	prompt := `{"model":"m","stream":true,"messages":[{"role":"user","content":"caf\u00e9 \"q\"\n\t\/ é 🦀"}],"n":1e3}`
	out, _ := askUsage(chat, []byte(prompt))
	if want := strings.TrimSuffix(prompt, "}") + `,"stream_options":{"include_usage":true}}`; string(out) != want {
		t.Errorf("askUsage changed the request's fields:\n got %s\nwant %s", out, want)
	}
	for in, want := range map[string]string{
		"{}":                              `{"stream_options":{"include_usage":true}}`,
		"{\"stream\":true}\n":             "{\"stream\":true,\"stream_options\":{\"include_usage\":true}}\n",
		`{"k\u0001":1, "stream" : true }`: `{"k\u0001":1, "stream" : true ,"stream_options":{"include_usage":true}}`,
	} {
		if out, changed := askUsage(chat, []byte(in)); !changed || string(out) != want {
			t.Errorf("askUsage(%q) = %q, want %q", in, out, want)
		}
	}
	if _, changed := askUsage(api.Anthropic{}, []byte(`{"stream":true}`)); changed {
		t.Error("an Anthropic request was changed")
	}
}

// TestUsageStripperEverySplit: however the stream is cut into reads, the
// client gets it whole less the usage-only chunk, LF or CRLF.
func TestUsageStripperEverySplit(t *testing.T) {
	for _, eol := range []string{"\n", "\r\n"} {
		ev := func(s string) string { return s + eol + eol }
		keep := ev(`data: {"choices":[{"delta":{"content":"a"}}]}`) +
			ev(`: keep-alive`) +
			ev(`data: {"choices":[{"delta":{"content":"b"}}],"usage":{"completion_tokens":2}}`) // inline usage stays
		usage := ev(`data: {"id":"x","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2}}`)
		done := ev(`data: [DONE]`)
		stream := keep + usage + done
		for cut := 0; cut <= len(stream); cut++ {
			var got bytes.Buffer
			s := &usageStripper{w: &got}
			s.Write([]byte(stream[:cut]))
			s.Write([]byte(stream[cut:]))
			s.Close()
			if got.String() != keep+done {
				t.Fatalf("eol %q cut %d: got %q", eol, cut, got.String())
			}
		}
	}
	var got bytes.Buffer
	s := &usageStripper{w: &got}
	s.Write([]byte("data: {\"choices\":[]}")) // an unended last event is not lost
	s.Close()
	if got.String() != `data: {"choices":[]}` {
		t.Errorf("unended event: %q", got.String())
	}
}

// TestProxyAsksForUsage: with AskUsage, a client that does not ask for
// usage gets its stream without the usage chunk, while the record's
// tokens are the server's count; a client that asks gets it.
func TestProxyAsksForUsage(t *testing.T) {
	up := fakellm.New(fakellm.Script{TTFT: time.Millisecond, Gap: time.Millisecond, Tokens: 12, Usage: true, RoleChunk: true})
	defer up.Close()
	base, records := proxiedWith(t, up.URL, func(c *Config) { c.AskUsage = true })
	post := func(body string) string {
		resp, err := http.Post(base+"/v1/chat/completions", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var b bytes.Buffer
		b.ReadFrom(resp.Body)
		return b.String()
	}
	plain := post(`{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	if strings.Contains(plain, `"usage"`) || !strings.Contains(plain, "data: [DONE]") || strings.Count(plain, `"content":"`) < 12 {
		t.Errorf("the client that did not ask for usage got:\n%s", plain)
	}
	asked := post(`{"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`)
	if !strings.Contains(asked, `"completion_tokens":12`) {
		t.Errorf("the client that asked for usage got:\n%s", asked)
	}
	recs := records()
	if len(recs) != 2 {
		t.Fatalf("%d records", len(recs))
	}
	for i, r := range recs {
		if r.OutputTokens != 12 || r.TokenSource != metrics.SourceUsage || r.Proxy.UsageAdded != (i == 0) {
			t.Errorf("record %d: %d tokens from %s, usage added %v", i, r.OutputTokens, r.TokenSource, r.Proxy.UsageAdded)
		}
	}
}

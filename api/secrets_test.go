package api

import (
	"encoding/base64"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
)

// TestScrubCutSecret: a message shortened in the middle of a secret (the
// 300-byte limit of ErrorMessage) loses the secret's start too; text that
// merely ends like one is kept.
func TestScrubCutSecret(t *testing.T) {
	const sec = "sk-probe-0123456789abcdef"
	body := `{"error":{"message":"` + strings.Repeat("x", 290) + " " + sec + `"}}`
	line := "HTTP 401 from POST /v1/chat/completions: " + ErrorMessage([]byte(body)) + " (Retry-After: 1)"
	if !strings.Contains(line, "…") || strings.Contains(line, sec) {
		t.Fatalf("the message %q is not cut inside the secret: the test proves nothing", line)
	}
	got := Scrub(line, []string{sec})
	if strings.Contains(got, "sk-probe") || !strings.Contains(got, " [REDACTED]… (Retry-After: 1)") {
		t.Errorf("Scrub(%q) = %q, want the secret's start redacted", line, got)
	}
	if got := Scrub("the end sk-… and sk-prob… done", []string{sec}); got != "the end sk-… and [REDACTED]… done" {
		t.Errorf("Scrub = %q", got)
	}
}

// TestRequestSecrets: each credential a client may send is a secret, in
// the forms servers quote back: a header's value whole and its
// credentials alone, a Basic authorization's user:password and password,
// a cookie's value, a query value.
func TestRequestSecrets(t *testing.T) {
	basic := base64.StdEncoding.EncodeToString([]byte("probeuser:basic-PASS654"))
	h := http.Header{
		"Authorization":    {"Basic " + basic},
		"X-Api-Key":        {"sk-ant-XAPI456"},
		"Api-Key":          {"azure-APIKEY789"},
		"Cookie":           {`session=cookie-SESS987; theme="dark-mode"`},
		"X-Goog-Api-Token": {"Bearer tok-GOOG111"},
		"Content-Type":     {"application/json"},
		"User-Agent":       {"OpenAI/Python 1.0"},
	}
	u, _ := url.Parse("/v1/chat/completions?key=AIzaQUERYkey321&v=1")
	got := RequestSecrets(h, u)
	want := []string{"Basic " + basic, basic, "probeuser:basic-PASS654", "basic-PASS654", "sk-ant-XAPI456",
		"azure-APIKEY789", `session=cookie-SESS987; theme="dark-mode"`, "cookie-SESS987", "dark-mode",
		"Bearer tok-GOOG111", "tok-GOOG111", "AIzaQUERYkey321"}
	for _, w := range want {
		if !slices.Contains(got, w) {
			t.Errorf("RequestSecrets lacks %q: %q", w, got)
		}
	}
	for _, s := range got {
		if s == "application/json" || strings.Contains(s, "Python") || len(s) < 4 {
			t.Errorf("RequestSecrets holds %q, no secret", s)
		}
	}
	for i := 1; i < len(got); i++ {
		if len(got[i]) > len(got[i-1]) {
			t.Errorf("RequestSecrets not longest first: %q before %q", got[i-1], got[i])
		}
	}
}

package api

import (
	"net/http"
	"testing"
)

func TestAnthropicRequest(t *testing.T) {
	req := &Request{Model: "claude-sonnet-4-5", Messages: []Message{{Role: "system", Content: "be brief"}, {Role: "user", Content: "hi"}}, MaxTokens: 64}
	name, value := KeyHeader(Anthropic{}, "sk-ant-test")
	path, h, body := capture(t, Anthropic{}, "", req, http.Header{name: {value}})
	msgs, _ := body["messages"].([]any)
	if path != "/v1/messages" || body["system"] != "be brief" || len(msgs) != 1 || body["max_tokens"] != float64(64) || body["stream"] != true {
		t.Errorf("POST %s %v", path, body)
	}
	if h.Get("x-api-key") != "sk-ant-test" || h.Get("anthropic-version") != "2023-06-01" || h.Get("Authorization") != "" {
		t.Errorf("headers %v", h)
	}
	// max_tokens is required by the API: a default is sent.
	if _, _, body := capture(t, Anthropic{}, "", &Request{Model: "m", Messages: req.Messages[1:]}, nil); body["max_tokens"] != float64(4096) {
		t.Errorf("default max_tokens %v", body["max_tokens"])
	}
}

package api

import "testing"

func TestResponsesRequest(t *testing.T) {
	req := &Request{Model: "o4-mini", Messages: []Message{{Role: "user", Content: "hi"}}, MaxTokens: 64}
	path, _, body := capture(t, Responses{}, "", req, nil)
	in, _ := body["input"].([]any)
	if path != "/v1/responses" || body["model"] != "o4-mini" || body["stream"] != true || body["max_output_tokens"] != float64(64) || len(in) != 1 {
		t.Errorf("POST %s %v", path, body)
	}
}

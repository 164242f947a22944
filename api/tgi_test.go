package api

import "testing"

func TestTGIRequest(t *testing.T) {
	req := &Request{Model: "m", Messages: []Message{{Role: "user", Content: "hi"}}, MaxTokens: 20}
	path, _, body := capture(t, TGI{}, "", req, nil)
	params, _ := body["parameters"].(map[string]any)
	if path != "/generate_stream" || body["inputs"] != "hi" || params["max_new_tokens"] != float64(20) || params["details"] != true {
		t.Errorf("POST %s %v", path, body)
	}
}

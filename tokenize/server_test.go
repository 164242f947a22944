package tokenize

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
)

func TestServerCount(t *testing.T) {
	capture, err := os.ReadFile("testdata/llamacpp-tokenize.json")
	if err != nil {
		t.Fatal(err)
	}
	var gotPath string
	var gotBody map[string]any
	engines := map[string]http.HandlerFunc{
		// vLLM / SGLang: count and tokens; here the count is words + 1 so a
		// client that counted tokens itself would be caught.
		"vllm": func(w http.ResponseWriter, r *http.Request) {
			n := len(strings.Fields(gotBody["prompt"].(string))) + 1
			json.NewEncoder(w).Encode(map[string]any{"count": n, "tokens": make([]int, n-1), "max_model_len": 8192})
		},
		// llama.cpp: the captured answer, 8 tokens.
		"llamacpp": func(w http.ResponseWriter, r *http.Request) { w.Write(capture) },
	}
	want := map[string]int{"vllm": 4, "llamacpp": 8}
	for name, answer := range engines {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			gotPath = r.URL.Path
			gotBody = nil
			json.NewDecoder(r.Body).Decode(&gotBody)
			answer(w, r)
		}))
		s := &Server{BaseURL: srv.URL + "/v1/", Model: "m", HTTP: srv.Client()}
		n, err := s.CountContext(context.Background(), "one two three")
		srv.Close()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if n != want[name] {
			t.Errorf("%s: CountContext = %d, want %d", name, n, want[name])
		}
		if gotPath != "/tokenize" {
			t.Errorf("%s: path %q, want /tokenize", name, gotPath)
		}
		if gotBody["prompt"] != "one two three" || gotBody["content"] != "one two three" || gotBody["model"] != "m" ||
			gotBody["add_special_tokens"] != false || gotBody["add_special"] != false {
			t.Errorf("%s: body %v", name, gotBody)
		}
	}
}

func TestServerCountErrors(t *testing.T) {
	for _, c := range []struct {
		status int
		body   string
		want   string
	}{
		{404, `{"detail":"Not Found"}`, "HTTP 404"},
		{200, `{"ok":true}`, "neither"},
		{200, `<html>`, "not JSON"},
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(c.status)
			w.Write([]byte(c.body))
		}))
		_, err := (&Server{BaseURL: srv.URL}).CountContext(context.Background(), "x")
		srv.Close()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("answer %d %s: err = %v, want %q", c.status, c.body, err, c.want)
		}
	}
}

package probe

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/tokbench/tokbench/api"
)

// fake serves fixed bodies by "METHOD /path"; anything else is a 404.
func fake(t *testing.T, routes map[string]string) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, ok := routes[r.Method+" "+r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func fileText(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestDetect(t *testing.T) {
	cases := []struct {
		name   string
		routes map[string]string
		base   string
		want   Detection
	}{
		{"ollama", map[string]string{
			"GET /api/version": `{"version":"0.12.3"}`,
			"GET /api/tags":    `{"models":[{"name":"llama3.2:1b","model":"llama3.2:1b","size":1321098329,"details":{"parameter_size":"1.2B","quantization_level":"Q8_0"}},{"name":"qwen3:4b"}]}`,
			"POST /api/show":   `{"details":{"format":"gguf","family":"llama","parameter_size":"1.2B","quantization_level":"Q8_0"},"model_info":{"general.architecture":"llama","general.parameter_count":1235814432,"llama.context_length":131072,"llama.block_count":16}}`,
			"GET /v1/models":   `{"object":"list","data":[{"id":"llama3.2:1b","object":"model","owned_by":"library"}]}`,
		}, "", Detection{API: "ollama-chat", Engine: "ollama", Version: "0.12.3", Models: []string{"llama3.2:1b", "qwen3:4b"}, MaxContext: 131072,
			Facts: map[string]string{"model_family": "llama", "model_parameter_size": "1.2B", "model_quantization": "Q8_0", "model_format": "gguf",
				"model_context_length": "131072", "model_params": "1235814432"}}},
		{"llama.cpp", map[string]string{
			"GET /props":     fileText(t, "testdata/llamacpp-props.json"),
			"GET /v1/models": fileText(t, "testdata/llamacpp-v1-models.json"),
			"GET /health":    `{"status":"ok"}`,
		}, "/v1", Detection{API: "llamacpp", Engine: "llama.cpp", Version: "b0-unknown", Models: []string{"model/rand-1024x8.gguf"}, MaxContext: 1024,
			Facts: map[string]string{"model_path": "model/rand-1024x8.gguf", "model_context_length": "1024", "model_params": "155730944",
				"model_size_bytes": "311496704", "model_context_train": "4096", "server_slots": "4", "media_form": "image_data"}}},
		{"tgi", map[string]string{
			"GET /info":   `{"model_id":"meta-llama/Llama-3.1-8B-Instruct","model_dtype":"torch.bfloat16","max_input_tokens":8191,"max_total_tokens":8192,"router":"text-generation-router","version":"3.3.4"}`,
			"GET /health": ``,
		}, "", Detection{API: "tgi", Engine: "tgi", Version: "3.3.4", Models: []string{"meta-llama/Llama-3.1-8B-Instruct"}, MaxContext: 8192,
			Facts: map[string]string{"model_context_length": "8192", "model_dtype": "torch.bfloat16"}}},
		{"vllm", map[string]string{
			"GET /v1/models": `{"object":"list","data":[{"id":"Qwen/Qwen3-8B","object":"model","owned_by":"vllm","max_model_len":32768}]}`,
			"GET /version":   `{"version":"0.11.0"}`,
			"GET /health":    ``,
		}, "/v1/", Detection{API: "openai-chat", Engine: "vllm", Version: "0.11.0", Models: []string{"Qwen/Qwen3-8B"}, MaxContext: 32768,
			Facts: map[string]string{"model_context_length": "32768"}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := Detect(context.Background(), http.DefaultClient, fake(t, c.routes)+c.base, nil, "")
			if err != nil {
				t.Fatal(err)
			}
			tried := got.Tried
			got.Tried = nil
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("Detect = %+v\nwant     %+v", got, c.want)
			}
			if len(tried) == 0 || !strings.HasSuffix(tried[len(tried)-1], ": ok") {
				t.Errorf("tried %v", tried)
			}
		})
	}
}

func TestDetectNothing(t *testing.T) {
	base := fake(t, map[string]string{"GET /health": ``})
	_, err := Detect(context.Background(), http.DefaultClient, base+"/v1", nil, "")
	if !errors.Is(err, ErrNotDetected) {
		t.Fatalf("err = %v, want ErrNotDetected", err)
	}
	for _, want := range []string{"GET /api/version: HTTP 404", "GET /props: HTTP 404", "GET /info: HTTP 404", "GET /v1/models: HTTP 404", "GET /health: ok"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "\n") {
		t.Errorf("error is not one line: %q", err)
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	d, err := Detect(context.Background(), http.DefaultClient, "http://"+addr, nil, "")
	ue, ok := errors.AsType[*UnreachableError](err)
	if !ok || ue.Class != "connection_refused" || !strings.Contains(err.Error(), "cannot reach http://"+addr) {
		t.Errorf("refused: %v, want an UnreachableError of class connection_refused naming the URL", err)
	}
	if len(d.Tried) != 5 || d.Tried[1] != "GET /props: connection_refused" {
		t.Errorf("refused: tried %q", d.Tried)
	}
}

// TestDetectFactsOfTheBenchmarkedModel: with several models served, the
// facts are those of the model benchmarked, not of the first listed.
func TestDetectFactsOfTheBenchmarkedModel(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/api/version":
			io.WriteString(w, `{"version":"0.24.0"}`)
		case "/api/tags":
			io.WriteString(w, `{"models":[{"name":"tiny-q8:latest"},{"name":"tiny-f16:latest"}]}`)
		case "/api/show":
			var body struct{ Model, Name string }
			json.NewDecoder(r.Body).Decode(&body)
			q := "Q8_0"
			if body.Model == "tiny-f16:latest" || body.Name == "tiny-f16:latest" {
				q = "F16"
			}
			fmt.Fprintf(w, `{"details":{"quantization_level":%q}}`, q)
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	for model, want := range map[string]string{"": "Q8_0", "tiny-f16": "F16", "tiny-f16:latest": "F16", "tiny-q8": "Q8_0"} {
		d, err := Detect(context.Background(), srv.Client(), srv.URL, nil, model)
		if err != nil {
			t.Fatal(err)
		}
		if got := d.Facts["model_quantization"]; got != want {
			t.Errorf("--model %q: quantization %q, want %q", model, got, want)
		}
	}
}

// TestDetectKeepsTheQuery: every probe carries the URL's query string
// (Azure's api-version) after its own path.
func TestDetectKeepsTheQuery(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.URL.Path+"?"+r.URL.RawQuery)
		mu.Unlock()
		if r.URL.Path == "/v1/models" {
			_, _ = io.WriteString(w, `{"data":[{"id":"m"}]}`)
			return
		}
		http.NotFound(w, r)
	}))
	defer srv.Close()
	if _, err := Detect(context.Background(), srv.Client(), srv.URL+"/v1?api-version=2024-10-21", nil, ""); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, s := range seen {
		if !strings.HasSuffix(s, "?api-version=2024-10-21") {
			t.Errorf("probe %s lost the query", s)
		}
	}
	if len(seen) < 4 {
		t.Errorf("probes %v", seen)
	}
}

// TestLlamaCppMediaForm: a /props naming media_marker or modalities is a
// libmtmd server's (multimodal_data); one naming neither, as the LLaVA-era
// servers' and llamafile's, points to image_data.
func TestLlamaCppMediaForm(t *testing.T) {
	for _, tc := range []struct {
		marker, modalities, want string
	}{
		{"<__media_x__>", `{"vision":true}`, api.LlamaCppMultimodalData},
		{"", `{"vision":false,"audio":false}`, api.LlamaCppMultimodalData},
		{"<__media__>", "", api.LlamaCppMultimodalData},
		{"", "", api.LlamaCppImageData},
		{"", "null", api.LlamaCppImageData},
	} {
		if got := llamaCppMediaForm(tc.marker, json.RawMessage(tc.modalities)); got != tc.want {
			t.Errorf("llamaCppMediaForm(%q, %s) = %q, want %q", tc.marker, tc.modalities, got, tc.want)
		}
	}
}

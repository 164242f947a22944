package api

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// embedServer answers every embeddings protocol as the real servers do,
// with vectors of dims per input and, where the protocol has one, the
// token count words gives each input.
func embedServer(t *testing.T, dims int) *httptest.Server {
	t.Helper()
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Input  []string `json:"input"`
			Inputs []string `json:"inputs"`
		}
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		words := 0
		vec := "[" + strings.TrimSuffix(strings.Repeat("0.25,", dims), ",") + "]"
		var vecs []string
		for _, in := range append(body.Input, body.Inputs...) {
			words += len(strings.Fields(in))
			vecs = append(vecs, vec)
		}
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/v1/embeddings":
			var data []string
			for i, v := range vecs {
				data = append(data, fmt.Sprintf(`{"object":"embedding","index":%d,"embedding":%s}`, i, v))
			}
			fmt.Fprintf(w, `{"object":"list","data":[%s],"model":"m","usage":{"prompt_tokens":%d,"total_tokens":%d}}`, strings.Join(data, ","), words, words)
		case "/api/embed":
			fmt.Fprintf(w, `{"model":"m","embeddings":[%s],"prompt_eval_count":%d}`, strings.Join(vecs, ","), words)
		case "/embed":
			fmt.Fprintf(w, `[%s]`, strings.Join(vecs, ","))
		default:
			http.NotFound(w, r)
		}
	}))
}

// TestEmbeddingsProtocols: each protocol's request carries the inputs, and
// its answer's vectors, dimension and token count are read.
func TestEmbeddingsProtocols(t *testing.T) {
	srv := embedServer(t, 7)
	defer srv.Close()
	inputs := []string{"one two three", "four five", "six"}
	for _, c := range []struct {
		api, base string
		tokens    int // the server's count; 0: it gives none
	}{
		{EmbedOpenAI, "/v1", 6},
		{EmbedOpenAI, "", 6},
		{EmbedOllama, "", 6},
		{EmbedTEI, "", 0},
	} {
		a, err := ByName(c.api)
		if err != nil {
			t.Fatal(err)
		}
		cl := &Client{HTTP: srv.Client(), Adapter: a, BaseURL: srv.URL + c.base}
		resp := cl.Do(context.Background(), &Request{Model: "m", Inputs: inputs})
		if resp.Failed() {
			t.Fatalf("%s: %s: %s", c.api, resp.ErrorClass, resp.Error)
		}
		em := resp.Embedding
		if em == nil || em.Vectors != 3 || em.Dims != 7 || em.PromptTokens != c.tokens {
			t.Errorf("%s: embedding %+v, want 3 vectors of 7, %d tokens", c.api, em, c.tokens)
		}
		if got := resp.Usage != nil; got != (c.tokens > 0) {
			t.Errorf("%s: usage %+v", c.api, resp.Usage)
		}
		if len(resp.Chunks) != 0 || resp.Done.Before(resp.Start) {
			t.Errorf("%s: %d chunks, done %v after start", c.api, len(resp.Chunks), resp.Done.Sub(resp.Start))
		}
	}
}

// TestEmbeddingsBodies: the request bodies the three servers take.
func TestEmbeddingsBodies(t *testing.T) {
	req := &Request{Model: "bge", Inputs: []string{"a b", "c"}}
	path, _, body := capture(t, Embeddings{API: EmbedOpenAI}, "/v1", req, nil)
	if in, _ := body["input"].([]any); path != "/v1/embeddings" || len(in) != 2 || body["model"] != "bge" || body["encoding_format"] != "float" {
		t.Errorf("openai: POST %s %v", path, body)
	}
	path, _, body = capture(t, Embeddings{API: EmbedOllama}, "", req, nil)
	if in, _ := body["input"].([]any); path != "/api/embed" || len(in) != 2 || body["model"] != "bge" {
		t.Errorf("ollama: POST %s %v", path, body)
	}
	path, _, body = capture(t, Embeddings{API: EmbedTEI}, "/v1", req, nil)
	if in, _ := body["inputs"].([]any); path != "/embed" || len(in) != 2 || body["model"] != nil {
		t.Errorf("tei: POST %s %v", path, body)
	}
	path, _, body = capture(t, Embeddings{API: EmbedOllamaLegacy}, "", &Request{Model: "bge", Inputs: []string{"a b"}}, nil)
	if path != "/api/embeddings" || body["prompt"] != "a b" || body["model"] != "bge" {
		t.Errorf("ollama's older endpoint: POST %s %v", path, body)
	}
	if _, err := (Embeddings{API: EmbedOllamaLegacy}).NewHTTPRequest(context.Background(), "http://h", req); err == nil {
		t.Error("two prompts went to Ollama's older endpoint, which takes one")
	}
	if _, err := (Embeddings{API: EmbedOpenAI}).NewHTTPRequest(context.Background(), "http://h", &Request{}); err == nil {
		t.Error("a request without inputs was built")
	}
}

// TestEmbeddingsAnswerChecked: an answer with a vector short, not JSON,
// or without vectors fails the request with a class and a reason.
func TestEmbeddingsAnswerChecked(t *testing.T) {
	for _, c := range []struct{ answer, want string }{
		{`[[0.1,0.2]]`, "1 embeddings for 2 inputs"},
		{`[[0.1],`, "not JSON"},
		{`{"nothing":1}`, "no vectors"},
		{`[[0.1],{"a":1}]`, "embedding 1"},
		{`{"error":{"message":"model not loaded"}}`, "model not loaded"},
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, c.answer)
		}))
		cl := &Client{HTTP: srv.Client(), Adapter: Embeddings{API: EmbedTEI}, BaseURL: srv.URL}
		resp := cl.Do(context.Background(), &Request{Inputs: []string{"a", "b"}})
		srv.Close()
		if !resp.Failed() || !strings.Contains(resp.Error, c.want) || strings.Contains(resp.Error, "not a stream") {
			t.Errorf("answer %s: %s %q, want a failure saying %q", c.answer, resp.ErrorClass, resp.Error, c.want)
		}
	}
}

// TestEmbeddingsAnswerBounded: a server that answers without end is cut
// after MaxEmbeddingBytes per input (and 64 KiB), with one clear error,
// having read no more than that.
func TestEmbeddingsAnswerBounded(t *testing.T) {
	var written int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		chunk := []byte(strings.Repeat("0.123456789,", 1<<10))
		w.Write([]byte("[["))
		for written < 64<<20 { // 64 MiB at most, if the client never stopped
			n, err := w.Write(chunk)
			written += int64(n)
			if err != nil {
				return
			}
		}
	}))
	defer srv.Close()
	cl := &Client{HTTP: srv.Client(), Adapter: Embeddings{API: EmbedTEI}, BaseURL: srv.URL}
	resp := cl.Do(context.Background(), &Request{Inputs: []string{"a", "b"}})
	limit := MaxEmbeddingAnswer(2)
	if resp.ErrorClass != ClassEventTooLarge || !strings.Contains(resp.Error, "larger than") {
		t.Fatalf("%s: %s, want event_too_large", resp.ErrorClass, resp.Error)
	}
	if resp.Embedding.Bytes != limit+1 {
		t.Errorf("read %d bytes of the answer, want the limit %d and one", resp.Embedding.Bytes, limit)
	}
}

// TestEmbedInputs: a request body's inputs and their tokens as its server
// reads them: text counted, token ids numbered, the last key winning.
func TestEmbedInputs(t *testing.T) {
	words := func(s string) int { return len(strings.Fields(s)) }
	for _, c := range []struct {
		api, body      string
		inputs, tokens int
	}{
		{EmbedOpenAI, `{"model":"e","input":["one two","three four five"]}`, 2, 5},
		{EmbedOpenAI, `{"input":"one two three"}`, 1, 3},
		{EmbedOpenAI, `{"input":[101,102,103,104]}`, 1, 4},
		{EmbedOpenAI, `{"input":[[101,102],[103]]}`, 2, 3},
		{EmbedOpenAI, `{"input":"a b c d","input":"a"}`, 1, 1},
		{EmbedOllama, `{"model":"m","Input":["a b","c"]}`, 2, 3},
		{EmbedOllamaLegacy, `{"model":"m","prompt":"a b c"}`, 1, 3},
		{EmbedOllamaLegacy, `{"prompt":["a","b"]}`, 0, 0},
		{EmbedTEI, `{"inputs":["a b","c d e","f"]}`, 3, 6},
		{EmbedTEI, `{"input":["a"]}`, 0, 0},
		{EmbedTEI, `not json`, 0, 0},
	} {
		inputs, tokens := EmbedInputs(Embeddings{API: c.api}, []byte(c.body), words)
		if inputs != c.inputs || tokens != c.tokens {
			t.Errorf("%s %s: %d inputs of %d tokens, want %d of %d", c.api, c.body, inputs, tokens, c.inputs, c.tokens)
		}
	}
}

// TestDecodeEmbedding: an answer read whole elsewhere (tokbench proxy's)
// is read as Decode reads it: Ollama's older one vector, its size as
// given, a read that failed or was cut classed by its error.
func TestDecodeEmbedding(t *testing.T) {
	legacy := Embeddings{API: EmbedOllamaLegacy}
	var resp Response
	DecodeEmbedding(legacy, []byte(`{"embedding":[0.1,0.2,0.3]}`), 27, io.EOF, 1, &resp)
	if resp.Failed() || resp.Embedding.Vectors != 1 || resp.Embedding.Dims != 3 || resp.Embedding.Bytes != 27 || resp.Usage != nil {
		t.Errorf("legacy answer: %+v %+v", resp, resp.Embedding)
	}
	resp = Response{}
	DecodeEmbedding(Embeddings{API: EmbedOpenAI}, []byte(`{"data":[{"embedding":[1]}],"usage":{"prompt_tokens":9}}`), 60, nil, 2, &resp)
	if resp.ErrorClass != ClassMalformedStream || !strings.Contains(resp.Error, "1 embeddings for 2 inputs") {
		t.Errorf("a vector short: %s %q", resp.ErrorClass, resp.Error)
	}
	resp = Response{}
	cut := &ClassError{Class: ClassEventTooLarge, Msg: "too large: forwarded"}
	DecodeEmbedding(Embeddings{API: EmbedTEI}, nil, 5<<20, cut, 1, &resp)
	if resp.ErrorClass != ClassEventTooLarge || resp.Error != cut.Msg || resp.Embedding.Bytes != 5<<20 {
		t.Errorf("cut: %s %q %+v", resp.ErrorClass, resp.Error, resp.Embedding)
	}
	resp = Response{}
	DecodeEmbedding(OpenAI{Chat: true}, []byte(`{}`), 2, nil, 1, &resp)
	if resp.ErrorClass != ClassMalformedStream {
		t.Errorf("a chat adapter's answer read as embeddings: %s", resp.ErrorClass)
	}
}

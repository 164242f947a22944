package api

import (
	"errors"
	"io"
	"strings"
	"testing"
	"time"
)

// TestReadRequest: the protocol comes from the method and path, the model
// and whether the answer streams from the body (Ollama streams unless
// told not to; embeddings never), an embeddings request's inputs
// counted; a body that is not a JSON object is not read.
func TestReadRequest(t *testing.T) {
	for _, c := range []struct {
		method, path, body string
		api, model         string // api "": not measured
		streamed           bool
		inputs             int
	}{
		{"POST", "/v1/chat/completions", `{"model":"m","stream":true}`, "openai-chat", "m", true, 0},
		{"POST", "/v1/chat/completions/", `{"model":"m"}`, "openai-chat", "m", false, 0},
		{"POST", "/v1/completions", `{"model":"c","stream":false}`, "openai-completions", "c", false, 0},
		{"POST", "/v1/messages", `{"model":"claude","stream":true}`, "anthropic", "claude", true, 0},
		{"POST", "/api/chat", `{"model":"llama3"}`, "ollama-chat", "llama3", true, 0},
		{"POST", "/api/generate", `{"model":"llama3","stream":null}`, "ollama-generate", "llama3", true, 0},
		{"POST", "/api/chat", `{"model":"llama3","stream":false}`, "ollama-chat", "llama3", false, 0},
		{"POST", "/completion", `{"prompt":"hi","stream":true}`, "llamacpp", "", true, 0},
		{"GET", "/v1/chat/completions", ``, "", "", false, 0},
		{"POST", "/v1/embeddings", `{"model":"e"}`, "openai-embeddings", "e", false, 0},
		{"POST", "/v1/embeddings", `{"model":"e","input":["a","b","c"],"stream":true}`, "openai-embeddings", "e", false, 3},
		{"POST", "/openai/v1/embeddings", `{"input":"one text"}`, "openai-embeddings", "", false, 1},
		{"POST", "/v1/embeddings", `{"input":[1,2,3]}`, "openai-embeddings", "", false, 1},
		{"POST", "/v1/embeddings", `{"input":[[1,2],[3]]}`, "openai-embeddings", "", false, 2},
		{"POST", "/v1/embeddings", `{"input":["a"],"input":["a","b"]}`, "openai-embeddings", "", false, 2},
		{"POST", "/api/embed", `{"model":"nomic","input":["a","b"]}`, "ollama-embed", "nomic", false, 2},
		{"POST", "/api/embed", `{"Input":"a"}`, "ollama-embed", "", false, 1},
		{"POST", "/api/embeddings", `{"model":"nomic","prompt":"a"}`, "ollama-embeddings", "nomic", false, 1},
		{"POST", "/embed", `{"inputs":["a","b","c","d"]}`, "tei-embed", "", false, 4},
		{"POST", "/embed", `{"inputs":"a"}`, "tei-embed", "", false, 1},
		{"GET", "/v1/embeddings", ``, "", "", false, 0},
		{"POST", "/v1/chat/completions", `not json`, "", "", false, 0},
		{"POST", "/v1/chat/completions", `["an array"]`, "", "", false, 0},
		// A key twice: the last wins, as the servers read it.
		{"POST", "/v1/chat/completions", `{"model":"a","stream":true,"model":"b","stream":false}`, "openai-chat", "b", false, 0},
		{"POST", "/v1/chat/completions", `{"stream":false,"model":"m","stream":true}`, "openai-chat", "m", true, 0},
		{"POST", "/v1/messages", `{"stream":true,"stream":null}`, "anthropic", "", false, 0},
		{"POST", "/v1/chat/completions", `{"str\u0065am":false,"stream":true,"stre\u0061m":false}`, "openai-chat", "", false, 0},
		{"POST", "/v1/chat/completions", `{"stream":true,"Stream":false}`, "openai-chat", "", true, 0},
		{"POST", "/api/chat", `{"stream":true,"Stream":false}`, "ollama-chat", "", false, 0},
		{"POST", "/api/generate", `{"STREAM":false,"stream":true}`, "ollama-generate", "", true, 0},
	} {
		a := ForPath(c.method, c.path)
		var asked Asked
		ok := a != nil
		if ok {
			asked, ok = ReadRequest(a, []byte(c.body))
		}
		switch {
		case c.api == "" && ok:
			t.Errorf("%s %s %s: read as %s", c.method, c.path, c.body, a.Name())
		case c.api != "" && (!ok || a.Name() != c.api || asked != Asked{Model: c.model, Stream: c.streamed, Inputs: c.inputs}):
			t.Errorf("%s %s %s: %v %+v (ok %v), want %s %q streamed %v, %d inputs", c.method, c.path, c.body, a, asked, ok, c.api, c.model, c.streamed, c.inputs)
		}
	}
}

// TestDecodeWhole: a whole answer's read error, emptiness and malformed
// JSON are classed as a stream's are; a good one is one chunk at Done.
func TestDecodeWhole(t *testing.T) {
	done := time.Now()
	for _, c := range []struct {
		body  string
		end   error
		class Class
	}{
		{`{"choices":[{"message":{"content":"hi"}}],"usage":{"completion_tokens":2}}`, io.EOF, ""},
		{`{"choices":[{"message":{"content":"hi"}}]}`, nil, ""},
		{`{"choices":[{"message":{"content":"h`, io.ErrUnexpectedEOF, ClassConnectionDropped},
		{``, io.EOF, ClassEmptyResponse},
		{`{"choices":[{"message":{"content":""}}]}`, io.EOF, ClassEmptyResponse},
		{`{"choices":`, io.EOF, ClassMalformedStream},
		{`{}`, &ClassError{ClassOverlongStream, "too long"}, ClassOverlongStream},
		{`{}`, errors.New("read: " + (&ClassError{ClassOverlongStream, "x"}).Error()), ClassConnectionDropped},
	} {
		resp := &Response{Done: done}
		DecodeWhole(OpenAI{Chat: true}, []byte(c.body), c.end, resp)
		if resp.ErrorClass != c.class {
			t.Errorf("DecodeWhole(%q, %v): class %q (%s), want %q", c.body, c.end, resp.ErrorClass, resp.Error, c.class)
			continue
		}
		if c.class == "" && (len(resp.Chunks) != 1 || resp.Chunks[0].Text != "hi" || !resp.Chunks[0].At.Equal(done)) {
			t.Errorf("DecodeWhole(%q): chunks %+v, want one \"hi\" at Done", c.body, resp.Chunks)
		}
	}
}

// BenchmarkReadRequestLongPrompt: reading a long prompt's request (120
// KB, some 30,000 tokens) before tokbench proxy sends it upstream, which
// the client's TTFT waits for.
func BenchmarkReadRequestLongPrompt(b *testing.B) {
	body := []byte(`{"model":"m","stream":true,"max_tokens":100,"messages":[{"role":"system","content":"` +
		strings.Repeat(`lorem ipsum dolor sit amet \n `, 4000) + `"},{"role":"user","content":"hi"}]}`)
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		a := ForPath("POST", "/v1/chat/completions")
		if asked, ok := ReadRequest(a, body); !ok || !asked.Stream {
			b.Fatal("not read as a stream")
		}
	}
}

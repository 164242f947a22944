package api

import (
	"bytes"
	"errors"
	"io"
	"strings"

	"github.com/valyala/fastjson"
)

// This file reads the requests and whole (non-streamed) answers of the
// protocols a request's path names, for tokbench proxy, which sees its
// clients' requests rather than building them: which adapter serves a
// path, what a request body asks for, and the one chunk and usage of an
// answer that came as one JSON document.

// routes are the measured endpoints by path, in the order they are
// tried: OpenAI-style and Anthropic paths by their end (their base may be
// anything: /v1, /openai/v1), the native ones as the whole path (they sit
// at the host's root; Ollama's /api/embeddings before OpenAI's
// …/embeddings, which it ends with).
var routes = []struct {
	path  string
	whole bool
	a     Adapter
}{
	{"/chat/completions", false, OpenAI{Chat: true}},
	{"/completions", false, OpenAI{}},
	{"/messages", false, Anthropic{}},
	{"/api/chat", true, Ollama{Chat: true}},
	{"/api/generate", true, Ollama{}},
	{"/completion", true, LlamaCpp{}},
	{"/api/embed", true, Embeddings{API: EmbedOllama}},
	{"/api/embeddings", true, Embeddings{API: EmbedOllamaLegacy}},
	{"/embed", true, Embeddings{API: EmbedTEI}},
	{"/embeddings", false, Embeddings{API: EmbedOpenAI}},
}

// ForPath is the adapter of the endpoint a request's method and path
// name (a trailing slash aside), or nil: POST to …/chat/completions and
// …/completions (OpenAI), …/messages (Anthropic), /api/chat and
// /api/generate (Ollama), /completion (llama.cpp), and the embeddings
// endpoints …/embeddings (OpenAI), /api/embed and /api/embeddings
// (Ollama), /embed (TEI). Every completion adapter it returns reads
// whole answers (see DecodeWhole); an embeddings one (IsEmbeddings) reads
// them by DecodeEmbedding.
func ForPath(method, path string) Adapter {
	if method != "POST" {
		return nil
	}
	p := strings.TrimRight(path, "/")
	for _, r := range routes {
		if p == r.path || !r.whole && strings.HasSuffix(p, r.path) {
			return r.a
		}
	}
	return nil
}

// Asked is what a request's body asks for: the model, whether the
// answer streams, and for an embeddings request the inputs it embeds.
type Asked struct {
	Model  string
	Stream bool
	Inputs int
}

// ReadRequest reads a request body of a's protocol as its server does:
// the model, and whether the answer streams (Ollama streams unless told
// not to, the others only when asked). A key given twice is read as the
// servers read it, the last one winning (encoding/json, Python's json and
// pydantic); for Ollama, whose server is encoding/json's, a key that
// differs only in case ("Stream") is the same key. An embeddings request
// never streams; its inputs are counted (see EmbedInputs). ok is false
// for a body that is not a JSON object.
func ReadRequest(a Adapter, body []byte) (asked Asked, ok bool) {
	// fastjson, not encoding/json: the request waits for this, and a long
	// prompt's body takes encoding/json half a millisecond (120 KB,
	// BenchmarkReadRequestLongPrompt), fastjson 5 µs. A parser keeps a
	// copy of what it parsed: one that read a large body is left to the
	// collector, not pooled for the streams' chunks to keep alive.
	jp := parsers.Get()
	defer func() {
		if len(body) <= maxPooledParse {
			parsers.Put(jp)
		}
	}()
	v, err := jp.ParseBytes(body)
	if err != nil || v.Type() != fastjson.TypeObject {
		return Asked{}, false
	}
	_, ollama := a.(Ollama)
	em, embed := a.(Embeddings)
	ollama = ollama || embed && (em.API == EmbedOllama || em.API == EmbedOllamaLegacy)
	is := func(k []byte, name string) bool {
		if ollama {
			return bytes.EqualFold(k, []byte(name))
		}
		return string(k) == name
	}
	// fastjson's Get finds a key's first value; Visit sees every one.
	var model, stream, inputs *fastjson.Value
	o, _ := v.Object()
	o.Visit(func(k []byte, v *fastjson.Value) {
		switch {
		case embed && is(k, em.inputsKey()):
			inputs = v
		case is(k, "stream"):
			stream = v
		case is(k, "model"):
			model = v
		}
	})
	if embed {
		asked.Inputs = len(embedInputs(em, inputs))
		asked.Model = jsonString(model)
		return asked, true
	}
	asked.Stream = ollama
	if stream != nil && stream.Type() != fastjson.TypeNull {
		asked.Stream = stream.Type() == fastjson.TypeTrue
	}
	asked.Model = jsonString(model)
	return asked, true
}

// jsonString is v's string, "" when v is none.
func jsonString(v *fastjson.Value) string {
	if v == nil || v.Type() != fastjson.TypeString {
		return ""
	}
	return string(v.GetStringBytes())
}

// maxPooledParse is the largest body whose parser goes back to parsers.
const maxPooledParse = 1 << 20

// wholeReader is an adapter that reads its protocol's whole answers.
type wholeReader interface {
	// readWhole reads answer v into resp (id, finish reason), c (text and
	// reasoning) and u (the usage).
	readWhole(v *fastjson.Value, resp *Response, c *Chunk, u *Usage)
}

// DecodeWhole reads a non-streamed 2xx answer of a's protocol into resp:
// one chunk, at resp.Done (the instant its last byte arrived), with its
// text and reasoning; the usage, id and finish reason where the protocol
// has them. end is how reading the body ended (nil or io.EOF: at its
// end), classified as a stream's read is. An answer it cannot read is a
// malformed one; one without output is empty_response.
func DecodeWhole(a Adapter, body []byte, end error, resp *Response) {
	if end != nil && !errors.Is(end, io.EOF) {
		resp.fail(classifyRead(end), "%v", end)
		return
	}
	wr, ok := a.(wholeReader)
	if !ok {
		resp.fail(ClassMalformedStream, "%s answers are read as streams only", a.Name())
		return
	}
	if len(bytes.TrimSpace(body)) == 0 {
		resp.fail(ClassEmptyResponse, "the answer was empty")
		return
	}
	jp := parsers.Get()
	defer func() {
		if len(body) <= maxPooledParse {
			parsers.Put(jp)
		}
	}()
	v, err := jp.ParseBytes(body)
	if err != nil {
		resp.fail(ClassMalformedStream, "the answer is not JSON: %v", err)
		return
	}
	var c Chunk
	u := &Usage{}
	wr.readWhole(v, resp, &c, u)
	if c.Text == "" && c.Reasoning == "" && u.CompletionTokens == 0 {
		resp.fail(ClassEmptyResponse, "the answer carried no output")
		return
	}
	c.At = resp.Done
	resp.addChunk(c)
	if u.CompletionTokens > 0 {
		resp.Usage = u
	}
	resp.SawDone = true
}

// str is the string at keys in v ("" when absent or not a string).
func str(v *fastjson.Value, keys ...string) string {
	if v == nil {
		return ""
	}
	return string(v.GetStringBytes(keys...))
}

// cached sets u's cached prompt tokens from v, where v has them.
func cached(u *Usage, v *fastjson.Value) {
	if v != nil {
		u.CachedTokens, u.CachedKnown = v.GetInt(), true
	}
}

func (o OpenAI) readWhole(v *fastjson.Value, resp *Response, c *Chunk, u *Usage) {
	resp.ID = str(v, "id")
	ch := v.Get("choices", "0")
	if o.Chat {
		c.Text = str(ch, "message", "content")
		c.Reasoning = str(ch, "message", "reasoning_content") + str(ch, "message", "reasoning")
	} else {
		c.Text = str(ch, "text")
	}
	resp.Finish = str(ch, "finish_reason")
	u.PromptTokens = v.GetInt("usage", "prompt_tokens")
	u.CompletionTokens = v.GetInt("usage", "completion_tokens")
	u.ReasoningTokens = v.GetInt("usage", "completion_tokens_details", "reasoning_tokens")
	cached(u, v.Get("usage", "prompt_tokens_details", "cached_tokens"))
}

func (Anthropic) readWhole(v *fastjson.Value, resp *Response, c *Chunk, u *Usage) {
	resp.ID = str(v, "id")
	for _, part := range v.GetArray("content") {
		switch str(part, "type") {
		case "text":
			c.Text += str(part, "text")
		case "thinking":
			c.Reasoning += str(part, "thinking")
		}
	}
	resp.Finish = str(v, "stop_reason")
	u.PromptTokens = v.GetInt("usage", "input_tokens")
	u.CompletionTokens = v.GetInt("usage", "output_tokens")
	cached(u, v.Get("usage", "cache_read_input_tokens"))
}

func (o Ollama) readWhole(v *fastjson.Value, resp *Response, c *Chunk, u *Usage) {
	if o.Chat {
		c.Text, c.Reasoning = str(v, "message", "content"), str(v, "message", "thinking")
	} else {
		c.Text, c.Reasoning = str(v, "response"), str(v, "thinking")
	}
	resp.Finish = str(v, "done_reason")
	u.PromptTokens = v.GetInt("prompt_eval_count")
	u.CompletionTokens = v.GetInt("eval_count")
}

func (LlamaCpp) readWhole(v *fastjson.Value, resp *Response, c *Chunk, u *Usage) {
	c.Text = str(v, "content")
	resp.Finish = str(v, "stop_type")
	u.PromptTokens = v.GetInt("tokens_evaluated")
	u.CompletionTokens = v.GetInt("tokens_predicted")
	cached(u, v.Get("tokens_cached"))
}

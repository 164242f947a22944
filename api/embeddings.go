package api

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/valyala/fastjson"
)

// The --api spellings of the embeddings protocols.
const (
	EmbedOpenAI = "openai-embeddings" // POST {base}/embeddings (OpenAI, vLLM, SGLang, llama.cpp)
	EmbedOllama = "ollama-embed"      // POST /api/embed (Ollama)
	EmbedTEI    = "tei-embed"         // POST /embed (Hugging Face text-embeddings-inference)
	// EmbedOllamaLegacy is Ollama's older POST /api/embeddings: one
	// "prompt" a request, one "embedding" in the answer, no token count.
	// tokbench proxy reads it; bench does not send it.
	EmbedOllamaLegacy = "ollama-embeddings"
)

// IsEmbeddings reports whether a is an embeddings protocol: its requests
// carry Inputs and its answers are one JSON document, no token stream.
func IsEmbeddings(a Adapter) bool {
	_, ok := a.(Embeddings)
	return ok
}

// Embeddings speaks an embeddings API: one request embeds Request.Inputs
// and the answer is one JSON document of vectors. There is no stream, so no
// first token: the request's latency is t0 to the answer's last byte.
// Decode checks the answer holds one vector per input, reads their
// dimension and the server's token count (OpenAI's usage.prompt_tokens,
// Ollama's prompt_eval_count; TEI's body has none), and never reads more
// than MaxEmbeddingBytes per input.
type Embeddings struct {
	API string // EmbedOpenAI, EmbedOllama or EmbedTEI
}

// Embedding is what an embeddings answer held.
type Embedding struct {
	// Vectors is the number of embeddings returned, Dims the length of
	// the first.
	Vectors, Dims int
	// PromptTokens is the server's count of the tokens it embedded; 0
	// when its answer does not say.
	PromptTokens int
	// Bytes is the answer body's size.
	Bytes int64
}

// MaxEmbeddingBytes bounds an embeddings answer per input: 1 MiB holds a
// vector of some 50 000 dimensions as JSON floats, ten times the largest
// embedding models'. An answer past it (and past 64 KiB more for the rest
// of the document) is cut and the request fails.
const MaxEmbeddingBytes = 1 << 20

// MaxEmbeddingAnswer is the most of an embeddings answer for inputs that
// is read (MaxEmbeddingBytes per input, 64 KiB more), 1 GiB at most.
func MaxEmbeddingAnswer(inputs int) int64 {
	return min(int64(max(inputs, 1))*MaxEmbeddingBytes+64<<10, 1<<30)
}

// Name implements Adapter.
func (e Embeddings) Name() string { return e.API }

// Endpoint resolves the user's base URL to the API's path: OpenAI's as
// OpenAI.Endpoint does ("/v1" added to a bare host), the native ones at
// the host's root.
func (e Embeddings) Endpoint(base string) (string, error) {
	switch e.API {
	case EmbedOllama:
		return NativeURL(base, "/api/embed")
	case EmbedTEI:
		return NativeURL(base, "/embed")
	case EmbedOllamaLegacy:
		return NativeURL(base, "/api/embeddings")
	}
	u, err := url.Parse(strings.TrimSpace(base))
	if err != nil || u.Scheme == "" || u.Host == "" {
		return "", fmt.Errorf("invalid URL %q: want http(s)://host[:port][/v1]", RedactURL(base))
	}
	p := strings.TrimRight(u.Path, "/")
	switch {
	case strings.HasSuffix(p, "/embeddings"):
	case p == "":
		p = "/v1/embeddings"
	default:
		p += "/embeddings"
	}
	u.Path = p
	return u.String(), nil
}

// NewHTTPRequest implements Adapter.
func (e Embeddings) NewHTTPRequest(ctx context.Context, base string, req *Request) (*http.Request, error) {
	if len(req.Inputs) == 0 {
		return nil, errors.New("an embeddings request needs at least one input")
	}
	endpoint, err := e.Endpoint(base)
	if err != nil {
		return nil, err
	}
	var body map[string]any
	switch e.API {
	case EmbedTEI:
		body = map[string]any{"inputs": req.Inputs}
	case EmbedOllama:
		body = map[string]any{"model": req.Model, "input": req.Inputs}
	case EmbedOllamaLegacy:
		if len(req.Inputs) != 1 {
			return nil, fmt.Errorf("%s embeds one prompt a request, not %d", e.API, len(req.Inputs))
		}
		body = map[string]any{"model": req.Model, "prompt": req.Inputs[0]}
	default:
		body = map[string]any{"model": req.Model, "input": req.Inputs, "encoding_format": "float"}
	}
	return postJSON(ctx, endpoint, body, req.Extra, "application/json")
}

// Decode implements Adapter: it reads the whole answer (at most
// MaxEmbeddingAnswer of its inputs) and then its vectors.
func (e Embeddings) Decode(body io.Reader, resp *Response) {
	limit := MaxEmbeddingAnswer(resp.inputs)
	buf, err := io.ReadAll(io.LimitReader(body, limit+1))
	if err == nil && int64(len(buf)) > limit {
		err = &ClassError{Class: ClassEventTooLarge, Msg: fmt.Sprintf("the embeddings answer is larger than %d bytes (%d inputs, %d MiB each at most): cut",
			limit, max(resp.inputs, 1), MaxEmbeddingBytes>>20)}
	}
	e.decode(buf, int64(len(buf)), err, resp)
}

// DecodeEmbedding reads an embeddings answer of a's protocol that was
// read whole, for a request of inputs inputs (0: not known), into resp:
// body is the answer, size the bytes it had (more than body when the
// reader kept only part of it), end how reading it ended (nil or io.EOF:
// at its end; a *ClassError names its class), as Decode does. a is an
// Embeddings adapter (see IsEmbeddings).
func DecodeEmbedding(a Adapter, body []byte, size int64, end error, inputs int, resp *Response) {
	e, ok := a.(Embeddings)
	if !ok {
		resp.fail(ClassMalformedStream, "%s answers are not embeddings", a.Name())
		return
	}
	resp.inputs = inputs
	if errors.Is(end, io.EOF) {
		end = nil
	}
	e.decode(body, size, end, resp)
}

// decode reads buf, an answer of size bytes whose read ended with err.
func (e Embeddings) decode(buf []byte, size int64, err error, resp *Response) {
	resp.Embedding = &Embedding{Bytes: size}
	if err != nil {
		resp.fail(classifyRead(err), "%v", err)
		return
	}
	var p fastjson.Parser // not the pool's: an answer may be large
	v, err := p.ParseBytes(buf)
	if err != nil {
		resp.fail(ClassMalformedStream, "the embeddings answer is not JSON: %v", err)
		return
	}
	if msg := v.Get("error"); msg != nil && msg.Type() != fastjson.TypeNull {
		resp.fail(ClassStreamError, "server error: %s", ErrorMessage(buf))
		return
	}
	var vecs []*fastjson.Value
	switch e.API {
	case EmbedTEI:
		vecs, err = v.Array()
	case EmbedOllama:
		vecs, err = arrayAt(v, "embeddings")
		resp.Embedding.PromptTokens = v.GetInt("prompt_eval_count")
	case EmbedOllamaLegacy:
		if vec := v.Get("embedding"); vec != nil {
			vecs = []*fastjson.Value{vec}
		} else {
			err = errors.New(`no "embedding" member`)
		}
	default:
		var data []*fastjson.Value
		data, err = arrayAt(v, "data")
		for _, d := range data {
			vecs = append(vecs, d.Get("embedding"))
		}
		resp.Embedding.PromptTokens = v.GetInt("usage", "prompt_tokens")
		resp.ID = str(v, "id")
	}
	if err != nil {
		resp.fail(ClassMalformedStream, "the embeddings answer has no vectors: %v", err)
		return
	}
	em := resp.Embedding
	em.Vectors = len(vecs)
	for i, vec := range vecs {
		n, err := dims(vec)
		if err != nil {
			resp.fail(ClassMalformedStream, "embedding %d: %v", i, err)
			return
		}
		if i == 0 {
			em.Dims = n
		}
	}
	if resp.inputs > 0 && em.Vectors != resp.inputs {
		resp.fail(ClassMalformedStream, "the answer has %d embeddings for %d inputs", em.Vectors, resp.inputs)
		return
	}
	if em.PromptTokens > 0 {
		resp.Usage = &Usage{PromptTokens: em.PromptTokens}
	}
	resp.SawDone = true
}

// arrayAt is v's member key as an array.
func arrayAt(v *fastjson.Value, key string) ([]*fastjson.Value, error) {
	m := v.Get(key)
	if m == nil {
		return nil, fmt.Errorf("no %q member", key)
	}
	a, err := m.Array()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", key, err)
	}
	return a, nil
}

// dims is the length of one vector: an array of numbers, or OpenAI's
// base64 of little-endian float32s.
func dims(vec *fastjson.Value) (int, error) {
	if vec == nil {
		return 0, errors.New("missing")
	}
	switch vec.Type() {
	case fastjson.TypeArray:
		a, _ := vec.Array()
		return len(a), nil
	case fastjson.TypeString:
		n := base64.StdEncoding.DecodedLen(len(vec.GetStringBytes()))
		return n / 4, nil
	}
	return 0, fmt.Errorf("a vector is %s, not an array", vec.Type())
}

// inputsKey is the member of a request body that holds its inputs.
func (e Embeddings) inputsKey() string {
	switch e.API {
	case EmbedTEI:
		return "inputs"
	case EmbedOllamaLegacy:
		return "prompt"
	}
	return "input"
}

// embedInputs are the inputs of v, a request's inputs member: a string is
// one input; an array of strings one each; an array of numbers (OpenAI's
// token ids) one; an array of arrays (of token ids) one each. Ollama's
// older endpoint takes one prompt.
func embedInputs(e Embeddings, v *fastjson.Value) []*fastjson.Value {
	if v == nil {
		return nil
	}
	switch v.Type() {
	case fastjson.TypeString:
		return []*fastjson.Value{v}
	case fastjson.TypeArray:
		if e.API == EmbedOllamaLegacy {
			return nil
		}
		a, _ := v.Array()
		if len(a) > 0 && a[0].Type() == fastjson.TypeNumber {
			return []*fastjson.Value{v}
		}
		return a
	}
	return nil
}

// EmbedInputs reads an embeddings request's body of a's protocol (see
// IsEmbeddings) as its server does and counts its inputs' tokens: a text
// input is count of its text (none with count nil), an input of token
// ids (OpenAI's) the number of ids. inputs is 0 for a body that holds none, or that is not
// a JSON object.
func EmbedInputs(a Adapter, body []byte, count func(string) int) (inputs, tokens int) {
	e, ok := a.(Embeddings)
	if !ok {
		return 0, 0
	}
	var p fastjson.Parser // not the pool's: a body may be large
	v, err := p.ParseBytes(body)
	if err != nil || v.Type() != fastjson.TypeObject {
		return 0, 0
	}
	key := e.inputsKey()
	var in *fastjson.Value
	o, _ := v.Object()
	o.Visit(func(k []byte, v *fastjson.Value) { // the last one wins, as in ReadRequest
		if string(k) == key || (e.API == EmbedOllama || e.API == EmbedOllamaLegacy) && strings.EqualFold(string(k), key) {
			in = v
		}
	})
	list := embedInputs(e, in)
	for _, x := range list {
		switch x.Type() {
		case fastjson.TypeString:
			if count != nil {
				tokens += count(string(x.GetStringBytes()))
			}
		case fastjson.TypeArray:
			ids, _ := x.Array()
			tokens += len(ids)
		}
	}
	return len(list), tokens
}

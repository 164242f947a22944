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

// maxEmbeddingAnswer is the most of an answer for inputs read, 1 GiB at most.
func maxEmbeddingAnswer(inputs int) int64 {
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
	default:
		body = map[string]any{"model": req.Model, "input": req.Inputs, "encoding_format": "float"}
	}
	return postJSON(ctx, endpoint, body, req.Extra, "application/json")
}

// Decode implements Adapter: it reads the whole answer (at most
// maxEmbeddingAnswer of its inputs) and then its vectors.
func (e Embeddings) Decode(body io.Reader, resp *Response) {
	resp.Embedding = &Embedding{}
	limit := maxEmbeddingAnswer(resp.inputs)
	buf, err := io.ReadAll(io.LimitReader(body, limit+1))
	resp.Embedding.Bytes = int64(len(buf))
	if err != nil {
		resp.fail(classifyRead(err), "%v", err)
		return
	}
	if int64(len(buf)) > limit {
		resp.fail(ClassEventTooLarge, "the embeddings answer is larger than %d bytes (%d inputs, %d MiB each at most): cut",
			limit, max(resp.inputs, 1), MaxEmbeddingBytes>>20)
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

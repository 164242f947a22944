package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/tokbench/tokbench/sse"
	"github.com/tokbench/tokbench/wire"
)

// Names lists the --api spellings ByName accepts, "auto" aside.
var Names = []string{
	"openai-chat", "openai-completions", "openai-responses", "anthropic",
	"ollama-chat", "ollama", "ollama-generate", "llamacpp", "tgi",
	"openai-embeddings", "ollama-embed", "tei-embed",
}

// ByName returns the adapter for an --api spelling ("ollama" is
// "ollama-chat"). "auto" is not an adapter: see Detect.
func ByName(name string) (Adapter, error) {
	switch name {
	case "openai-chat":
		return OpenAI{Chat: true}, nil
	case "openai-completions":
		return OpenAI{Chat: false}, nil
	case "openai-responses":
		return Responses{}, nil
	case "anthropic":
		return Anthropic{}, nil
	case "ollama", "ollama-chat":
		return Ollama{Chat: true}, nil
	case "ollama-generate":
		return Ollama{Chat: false}, nil
	case "llamacpp":
		return LlamaCpp{}, nil
	case "tgi":
		return TGI{}, nil
	case EmbedOpenAI, EmbedOllama, EmbedTEI:
		return Embeddings{API: name}, nil
	}
	return nil, fmt.Errorf("unknown API %q (known: %s, auto)", name, strings.Join(Names, ", "))
}

// SendsIgnoreEOS reports whether the adapter's API can ask the server to
// generate past the end of sequence (Request.IgnoreEOS): the OpenAI-style
// APIs (vLLM, SGLang, llama.cpp take ignore_eos) and llama.cpp's native
// one. Ollama's, Anthropic's, TGI's and the Responses API have no such
// option, and the request goes without it.
func SendsIgnoreEOS(a Adapter) bool {
	switch a.(type) {
	case OpenAI, LlamaCpp:
		return true
	}
	return false
}

// KeyHeader is the header an adapter sends an API key in: Anthropic's
// x-api-key, else "Authorization: Bearer …".
func KeyHeader(a Adapter, key string) (name, value string) {
	if k, ok := a.(interface{ KeyHeader(string) (string, string) }); ok {
		return k.KeyHeader(key)
	}
	return "Authorization", "Bearer " + key
}

// NativeURL resolves the user's base URL to a native endpoint path such as
// "/api/chat". Native APIs take the bare host; a base ending in "/v1" (as
// OpenAI-style bases do) loses it, other path prefixes (a proxy's) are kept,
// and a base that already ends in the endpoint is used as given.
func NativeURL(base, endpoint string) (string, error) {
	u, err := url.Parse(strings.TrimSpace(base))
	if err != nil || u.Scheme == "" || u.Host == "" {
		return "", fmt.Errorf("invalid URL %q: want http(s)://host[:port]", RedactURL(base))
	}
	p := strings.TrimRight(u.Path, "/")
	if !strings.HasSuffix(p, endpoint) {
		p = strings.TrimSuffix(p, "/v1") + endpoint
	}
	u.Path = p
	return u.String(), nil
}

// postJSON builds a streaming POST with body merged with extra.
func postJSON(ctx context.Context, endpoint string, body, extra map[string]any, accept string) (*http.Request, error) {
	for k, v := range extra {
		body[k] = v
	}
	buf, err := json.Marshal(body)
	if err != nil {
		return nil, fmt.Errorf("encode request: %w", err)
	}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, nil)
	if err != nil {
		return nil, err
	}
	wire.SetBody(hreq, buf) // sent uncopied by tokbench's transport
	hreq.Header.Set("Content-Type", "application/json")
	if accept != "" {
		hreq.Header.Set("Accept", accept)
	}
	return hreq, nil
}

// decodeSSE runs the loop every SSE adapter shares: it hands each event
// with data to handle, which returns true at the protocol's end marker, and
// classifies read failures and a stream that ends before its marker.
func decodeSSE(body io.Reader, resp *Response, handle func(ev sse.Event) bool) {
	dec := sse.NewDecoder(body)
	defer dec.Release()
	for {
		ev, err := dec.Next()
		if err != nil {
			endOfStream(err, resp)
			return
		}
		if len(bytes.TrimSpace(ev.Data)) == 0 {
			continue
		}
		if handle(ev) {
			resp.SawDone = true
			return
		}
		if resp.ErrorClass != "" {
			return
		}
	}
}

// decodeLines is decodeSSE for newline-delimited JSON.
func decodeLines(body io.Reader, resp *Response, handle func(l sse.Line) bool) {
	dec := sse.NewLineDecoder(body)
	for {
		l, err := dec.Next()
		if err != nil {
			endOfStream(err, resp)
			return
		}
		if handle(l) {
			resp.SawDone = true
			return
		}
		if resp.ErrorClass != "" {
			return
		}
	}
}

func endOfStream(err error, resp *Response) {
	if errors.Is(err, io.EOF) {
		resp.fail(ClassIncompleteStream, "the stream ended before its end marker")
		return
	}
	resp.fail(classifyRead(err), "%v", err)
}

// decodeJSON unmarshals one event, recording a malformed stream.
func decodeJSON(data []byte, v any, resp *Response) bool {
	if err := json.Unmarshal(data, v); err != nil {
		resp.fail(ClassMalformedStream, "event is not valid JSON: %v", err)
		return false
	}
	return true
}

// addChunk appends a chunk when it carries text.
func addChunk(resp *Response, at time.Time, text, reasoning string) {
	if text != "" || reasoning != "" {
		resp.addChunk(Chunk{At: at, Text: text, Reasoning: reasoning})
	}
}

// nsToMs converts a nanosecond duration (Ollama's unit) to milliseconds.
func nsToMs(ns int64) float64 { return float64(ns) / 1e6 }

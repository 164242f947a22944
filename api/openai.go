package api

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/tokbench/tokbench/sse"
)

// OpenAI speaks the OpenAI-compatible streaming APIs: chat completions
// (Chat true) or legacy completions. It always asks for usage
// (stream_options.include_usage) so token counts come from the server.
// With ContinuousUsage it also asks for the running usage in every chunk
// (stream_options.continuous_usage_stats, vLLM's extension), which gives
// each chunk its exact token count. Servers that check stream_options
// (OpenAI's own API) may reject that field: set it for vLLM only.
type OpenAI struct {
	Chat            bool
	ContinuousUsage bool
}

// Name implements Adapter.
func (o OpenAI) Name() string {
	if o.Chat {
		return "openai-chat"
	}
	return "openai-completions"
}

// Endpoint resolves the user's base URL to the API path. The base is used as
// given when it has a path ("http://h/v1", "https://h/openai/v1"); a bare
// host gets "/v1". A base that already ends in the endpoint is kept.
func (o OpenAI) Endpoint(base string) (string, error) {
	u, err := url.Parse(strings.TrimSpace(base))
	if err != nil || u.Scheme == "" || u.Host == "" {
		return "", fmt.Errorf("invalid URL %q: want http(s)://host[:port][/v1]", RedactURL(base))
	}
	suffix := "/completions"
	if o.Chat {
		suffix = "/chat/completions"
	}
	p := strings.TrimRight(u.Path, "/")
	switch {
	case strings.HasSuffix(p, suffix):
	case p == "":
		p = "/v1" + suffix
	default:
		p += suffix
	}
	u.Path = p
	return u.String(), nil
}

// NewHTTPRequest implements Adapter.
func (o OpenAI) NewHTTPRequest(ctx context.Context, base string, req *Request) (*http.Request, error) {
	endpoint, err := o.Endpoint(base)
	if err != nil {
		return nil, err
	}
	streamOptions := map[string]any{"include_usage": true}
	if o.ContinuousUsage {
		streamOptions["continuous_usage_stats"] = true
	}
	body := map[string]any{
		"model":          req.Model,
		"stream":         true,
		"stream_options": streamOptions,
	}
	if o.Chat {
		body["messages"] = req.Messages
	} else {
		body["prompt"] = req.Prompt()
	}
	if req.MaxTokens > 0 {
		body["max_tokens"] = req.MaxTokens
	}
	if req.IgnoreEOS {
		body["ignore_eos"] = true
	}
	if o.Chat && len(req.Tools) > 0 {
		body["tools"] = openAITools(req.Tools)
	}
	return postJSON(ctx, endpoint, body, req.Extra, "text/event-stream")
}

// doneGrace is how long a complete answer waits for its end marker.
const doneGrace = 2 * time.Second

// tail bounds how much longer body may be read, when it supports that.
func tail(body io.Reader, d time.Duration) {
	if t, ok := body.(interface{ Tail(time.Duration) }); ok {
		t.Tail(d)
	}
}

// Decode implements Adapter. Each chunk's JSON is read by a chunkDecoder
// (a reused fastjson parser); per token chunk it allocates only the chunk's
// text.
func (o OpenAI) Decode(body io.Reader, resp *Response) {
	dec := sse.NewDecoder(body)
	defer dec.Release()
	var lastAt time.Time
	var cd chunkDecoder
	defer cd.p.release()
	for {
		ev, err := dec.Next()
		if err != nil {
			if errors.Is(err, io.EOF) {
				if !resp.SawDone && resp.Finish == "" {
					resp.fail(ClassIncompleteStream, "the stream ended without a finish reason or [DONE]")
				}
				return
			}
			if resp.Finish != "" && resp.Usage != nil {
				// The answer was complete; only the end marker is missing.
				// It ended with its last event, not when we stopped waiting.
				resp.Done = lastAt
				return
			}
			resp.fail(classifyRead(err), "%v", err)
			return
		}
		lastAt = ev.At
		data := bytes.TrimSpace(ev.Data)
		if bytes.Equal(data, []byte("[DONE]")) {
			resp.SawDone = true
			return
		}
		if ev.Name == "error" {
			resp.fail(ClassStreamError, "server error in stream: %s", ErrorMessage(data))
			return
		}
		if len(data) == 0 {
			continue
		}
		c := &cd.f
		if err := cd.decode(data); err != nil {
			resp.fail(ClassMalformedStream, "chunk is not valid JSON: %v", err)
			return
		}
		if c.errored {
			resp.fail(ClassStreamError, "server error in stream: %s", ErrorMessage(data))
			return
		}
		if resp.ID == "" && len(c.id) > 0 {
			resp.ID = string(c.id)
		}
		if c.tool {
			if resp.ToolCallAt.IsZero() {
				resp.ToolCallAt = ev.At
			}
			resp.ToolArgs = append(resp.ToolArgs, c.toolArgs...)
		}
		if len(c.finish) > 0 && string(c.finish) != resp.Finish {
			resp.Finish = string(c.finish)
		}
		if len(c.text) > 0 || len(c.reasoning) > 0 {
			ch := Chunk{At: ev.At}
			if len(c.text) > 0 {
				ch.Text = validString(c.text)
			}
			if len(c.reasoning) > 0 {
				ch.Reasoning = validString(c.reasoning)
			}
			if c.hasUsage && c.completionTokens > 0 {
				ch.Cumulative = c.completionTokens
			}
			resp.addChunk(ch)
		}
		if c.hasUsage {
			// The last usage seen is the answer's. A server that sends it
			// with every chunk overwrites it in place: no allocation per chunk.
			if resp.Usage == nil {
				resp.Usage = new(Usage)
			}
			*resp.Usage = Usage{PromptTokens: c.promptTokens, CompletionTokens: c.completionTokens,
				ReasoningTokens: c.reasoningTokens, CachedTokens: c.cachedTokens, CachedKnown: c.hasCached}
		}
		if resp.Finish != "" && resp.Usage != nil {
			// The answer is complete. A server that never sends [DONE] (or
			// never closes) must not hold the request open: wait briefly for
			// the end marker, which keeps the connection reusable, then stop.
			tail(body, doneGrace)
		}
		if c.hasTimings {
			resp.Server = &ServerTiming{
				PromptMs: c.promptMs, PredictedMs: c.predictedMs,
				DecodeTPS: c.predictedPerSecond, PrefillTPS: c.promptPerSecond,
				PromptTokens: c.promptN, PredictedTokens: c.predictedN, EvaluatedOnly: c.promptN > 0,
			}
			if c.hasCacheN {
				n := c.cacheN
				resp.Server.CachedTokens = &n
			}
		}
	}
}

// RedactURL is the form of a URL that may be written to files and logs: no
// user info, no query string, no fragment.
func RedactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparseable URL)"
	}
	u.User = nil
	u.RawQuery = ""
	u.Fragment = ""
	return u.String()
}

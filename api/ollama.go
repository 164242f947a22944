package api

import (
	"context"
	"io"
	"net/http"
	"time"

	"github.com/tokbench/tokbench/sse"
)

// Ollama speaks Ollama's native API: POST /api/chat (Chat true) or
// /api/generate, streamed as newline-delimited JSON. The final object
// (done true) carries token counts and the server's own timing in
// nanoseconds (load_duration, prompt_eval_duration, eval_duration), which
// Decode records as ServerTiming, with the created_at stamps of the first
// and last token lines. The base URL is the bare host.
type Ollama struct {
	Chat bool
}

// Name implements Adapter.
func (o Ollama) Name() string {
	if o.Chat {
		return "ollama-chat"
	}
	return "ollama-generate"
}

// NewHTTPRequest implements Adapter. The output budget is
// options.num_predict.
func (o Ollama) NewHTTPRequest(ctx context.Context, base string, req *Request) (*http.Request, error) {
	path := "/api/generate"
	if o.Chat {
		path = "/api/chat"
	}
	endpoint, err := NativeURL(base, path)
	if err != nil {
		return nil, err
	}
	body := map[string]any{"model": req.Model, "stream": true}
	if o.Chat {
		body["messages"] = req.Messages
	} else {
		body["prompt"] = req.Prompt()
	}
	if req.MaxTokens > 0 {
		body["options"] = map[string]any{"num_predict": req.MaxTokens}
	}
	return postJSON(ctx, endpoint, body, req.Extra, "application/x-ndjson")
}

// Decode implements Adapter. Each line is read by an ollamaDecoder (a
// reused fastjson parser); per token line it allocates only the text.
func (Ollama) Decode(body io.Reader, resp *Response) {
	var d ollamaDecoder
	defer d.p.release()
	// The server's stamps of the first and the last token lines: the
	// first is read at once, the last kept as bytes until the answer ends.
	var first time.Time
	var last [64]byte
	nLast := 0
	decodeLines(body, resp, func(l sse.Line) bool {
		if err := d.decode(l.Data); err != nil {
			resp.fail(ClassMalformedStream, "event is not valid JSON: %v", err)
			return false
		}
		o := &d.f
		if len(o.err) > 0 {
			resp.fail(ClassStreamError, "server error in stream: %s", shorten(string(o.err)))
			return false
		}
		if len(o.text) > 0 || len(o.thinking) > 0 {
			addChunk(resp, l.At, validString(o.text), validString(o.thinking))
			if first.IsZero() {
				first = ollamaTime(o.createdAt)
			}
			nLast = copy(last[:], o.createdAt)
		}
		if !o.done {
			return false
		}
		resp.Finish = string(o.doneReason)
		if resp.Finish == "" {
			resp.Finish = "stop"
		}
		if o.evalCount > 0 || o.promptEvalCount > 0 {
			resp.Usage = &Usage{PromptTokens: o.promptEvalCount, CompletionTokens: o.evalCount}
		}
		st := &ServerTiming{
			LoadMs: nsToMs(o.loadDuration), PromptMs: nsToMs(o.promptEvalDuration), PredictedMs: nsToMs(o.evalDuration),
			PromptTokens: o.promptEvalCount, PredictedTokens: o.evalCount,
		}
		if o.evalDuration > 0 {
			st.DecodeTPS = float64(o.evalCount) / (float64(o.evalDuration) / 1e9)
		}
		if o.promptEvalDuration > 0 {
			st.PrefillTPS = float64(o.promptEvalCount) / (float64(o.promptEvalDuration) / 1e9)
		}
		if o.evalDuration > 0 || o.promptEvalDuration > 0 {
			if !first.IsZero() {
				st.FirstTokenAt, st.LastTokenAt = first, ollamaTime(last[:nLast])
			}
			resp.Server = st
		}
		return true
	})
}

// ollamaTime reads a line's created_at; zero when it is not RFC 3339.
func ollamaTime(b []byte) time.Time {
	t, err := time.Parse(time.RFC3339Nano, string(b))
	if err != nil {
		return time.Time{}
	}
	return t
}

package api

import (
	"context"
	"io"
	"net/http"

	"github.com/tokbench/tokbench/sse"
)

// Ollama speaks Ollama's native API: POST /api/chat (Chat true) or
// /api/generate, streamed as newline-delimited JSON. The final object
// (done true) carries token counts and the server's own timing in
// nanoseconds (load_duration, prompt_eval_duration, eval_duration), which
// Decode records as ServerTiming. The base URL is the bare host.
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

type ollamaLine struct {
	Message            *ollamaMessage `json:"message"`
	Response           string         `json:"response"`
	Thinking           string         `json:"thinking"`
	Done               bool           `json:"done"`
	DoneReason         string         `json:"done_reason"`
	Error              string         `json:"error"`
	LoadDuration       int64          `json:"load_duration"`
	PromptEvalCount    int            `json:"prompt_eval_count"`
	PromptEvalDuration int64          `json:"prompt_eval_duration"`
	EvalCount          int            `json:"eval_count"`
	EvalDuration       int64          `json:"eval_duration"`
}

type ollamaMessage struct {
	Content  string `json:"content"`
	Thinking string `json:"thinking"`
}

// Decode implements Adapter. A token line is read by an ollamaScanner,
// which allocates only the chunk's text; the final line, and any line the
// scanner is not sure of, is decoded with encoding/json.
func (Ollama) Decode(body io.Reader, resp *Response) {
	var sc ollamaScanner
	decodeLines(body, resp, func(l sse.Line) bool {
		if sc.scan(l.Data) {
			text, thinking := sc.f.text()
			addChunk(resp, l.At, string(text), string(thinking))
			return false
		}
		var o ollamaLine
		if !decodeJSON(l.Data, &o, resp) {
			return false
		}
		if o.Error != "" {
			resp.fail(ClassStreamError, "server error in stream: %s", shorten(o.Error))
			return false
		}
		text, thinking := o.Response, o.Thinking
		if o.Message != nil {
			text, thinking = o.Message.Content, o.Message.Thinking
		}
		addChunk(resp, l.At, text, thinking)
		if !o.Done {
			return false
		}
		resp.Finish = o.DoneReason
		if resp.Finish == "" {
			resp.Finish = "stop"
		}
		if o.EvalCount > 0 || o.PromptEvalCount > 0 {
			resp.Usage = &Usage{PromptTokens: o.PromptEvalCount, CompletionTokens: o.EvalCount}
		}
		st := &ServerTiming{
			LoadMs: nsToMs(o.LoadDuration), PromptMs: nsToMs(o.PromptEvalDuration), PredictedMs: nsToMs(o.EvalDuration),
			PromptTokens: o.PromptEvalCount, PredictedTokens: o.EvalCount,
		}
		if o.EvalDuration > 0 {
			st.DecodeTPS = float64(o.EvalCount) / (float64(o.EvalDuration) / 1e9)
		}
		if o.PromptEvalDuration > 0 {
			st.PrefillTPS = float64(o.PromptEvalCount) / (float64(o.PromptEvalDuration) / 1e9)
		}
		if o.EvalDuration > 0 || o.PromptEvalDuration > 0 {
			resp.Server = st
		}
		return true
	})
}

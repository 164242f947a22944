package api

import (
	"context"
	"io"
	"net/http"

	"github.com/tokbench/tokbench/sse"
)

// TGI speaks Hugging Face text-generation-inference's POST /generate_stream:
// one SSE event per token ({"token": {"text", "special"}, "generated_text",
// "details"}); the last has generated_text set and, since the request asks
// for details, finish_reason, generated_tokens and input_length. That last
// event is the end marker. The base URL is the bare host.
//
// Special tokens (end of sequence) carry no visible text and are not
// chunks; they are taken out of generated_tokens too, so the token count
// matches the chunks it is spread over.
type TGI struct{}

// Name implements Adapter.
func (TGI) Name() string { return "tgi" }

// NewHTTPRequest implements Adapter. The output budget is
// parameters.max_new_tokens.
func (TGI) NewHTTPRequest(ctx context.Context, base string, req *Request) (*http.Request, error) {
	endpoint, err := NativeURL(base, "/generate_stream")
	if err != nil {
		return nil, err
	}
	params := map[string]any{"details": true}
	if req.MaxTokens > 0 {
		params["max_new_tokens"] = req.MaxTokens
	}
	body := map[string]any{"inputs": req.Prompt(), "parameters": params, "stream": true}
	return postJSON(ctx, endpoint, body, req.Extra, "text/event-stream")
}

type tgiEvent struct {
	Token *struct {
		Text    string `json:"text"`
		Special bool   `json:"special"`
	} `json:"token"`
	GeneratedText *string `json:"generated_text"`
	Details       *struct {
		FinishReason    string `json:"finish_reason"`
		GeneratedTokens int    `json:"generated_tokens"`
		InputLength     int    `json:"input_length"`
	} `json:"details"`
	Error     string `json:"error"`
	ErrorType string `json:"error_type"`
}

// Decode implements Adapter.
func (TGI) Decode(body io.Reader, resp *Response) {
	special := 0
	decodeSSE(body, resp, func(ev sse.Event) bool {
		var e tgiEvent
		if !decodeJSON(ev.Data, &e, resp) {
			return false
		}
		if e.Error != "" || ev.Name == "error" {
			resp.fail(ClassStreamError, "server error in stream: %s", ErrorMessage(ev.Data))
			return false
		}
		if e.Token != nil {
			if e.Token.Special {
				special++
			} else {
				addChunk(resp, ev.At, e.Token.Text, "")
			}
		}
		if e.GeneratedText == nil && e.Details == nil {
			return false
		}
		resp.Finish = "stop"
		if d := e.Details; d != nil {
			switch d.FinishReason {
			case "length":
				resp.Finish = "length"
			case "", "eos_token", "stop_sequence":
			default:
				resp.Finish = d.FinishReason
			}
			if n := d.GeneratedTokens - special; n > 0 {
				resp.Usage = &Usage{PromptTokens: d.InputLength, CompletionTokens: n}
			}
		}
		return true
	})
}

package api

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/tokbench/tokbench/sse"
)

// Responses speaks OpenAI's Responses API (POST /v1/responses). Text comes
// in response.output_text.delta events, reasoning in
// response.reasoning_text.delta and response.reasoning_summary_text.delta;
// usage arrives in the terminal response.completed (or
// response.incomplete), which is the stream's end marker: there is no [DONE].
type Responses struct{}

// Name implements Adapter.
func (Responses) Name() string { return "openai-responses" }

// Endpoint resolves the base URL like OpenAI.Endpoint: "/v1" is added to a
// bare host.
func (Responses) Endpoint(base string) (string, error) {
	u, err := url.Parse(strings.TrimSpace(base))
	if err != nil || u.Scheme == "" || u.Host == "" {
		return "", fmt.Errorf("invalid URL %q: want http(s)://host[:port][/v1]", RedactURL(base))
	}
	p := strings.TrimRight(u.Path, "/")
	switch {
	case strings.HasSuffix(p, "/responses"):
	case p == "":
		p = "/v1/responses"
	default:
		p += "/responses"
	}
	u.Path = p
	return u.String(), nil
}

// NewHTTPRequest implements Adapter.
func (r Responses) NewHTTPRequest(ctx context.Context, base string, req *Request) (*http.Request, error) {
	endpoint, err := r.Endpoint(base)
	if err != nil {
		return nil, err
	}
	body := map[string]any{"model": req.Model, "input": req.Messages, "stream": true}
	if req.MaxTokens > 0 {
		body["max_output_tokens"] = req.MaxTokens
	}
	return postJSON(ctx, endpoint, body, req.Extra, "text/event-stream")
}

type responsesUsage struct {
	InputTokens         int `json:"input_tokens"`
	OutputTokens        int `json:"output_tokens"`
	OutputTokensDetails *struct {
		ReasoningTokens int `json:"reasoning_tokens"`
	} `json:"output_tokens_details"`
}

type responsesEvent struct {
	Type     string `json:"type"`
	Delta    string `json:"delta"`
	Message  string `json:"message"`
	Response *struct {
		ID                string          `json:"id"`
		Status            string          `json:"status"`
		Usage             *responsesUsage `json:"usage"`
		IncompleteDetails *struct {
			Reason string `json:"reason"`
		} `json:"incomplete_details"`
		Error *struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	} `json:"response"`
}

// Decode implements Adapter.
func (Responses) Decode(body io.Reader, resp *Response) {
	decodeSSE(body, resp, func(ev sse.Event) bool {
		var e responsesEvent
		if !decodeJSON(ev.Data, &e, resp) {
			return false
		}
		if e.Type == "" {
			e.Type = ev.Name
		}
		if e.Response != nil && resp.ID == "" {
			resp.ID = e.Response.ID
		}
		switch e.Type {
		case "response.output_text.delta", "response.refusal.delta", "response.function_call_arguments.delta":
			addChunk(resp, ev.At, e.Delta, "")
		case "response.reasoning_text.delta", "response.reasoning_summary_text.delta":
			addChunk(resp, ev.At, "", e.Delta)
		case "error":
			resp.fail(ClassStreamError, "server error in stream: %s", ErrorMessage(ev.Data))
		case "response.failed":
			msg := "response failed"
			if e.Response != nil && e.Response.Error != nil {
				msg = e.Response.Error.Message
			}
			resp.fail(ClassStreamError, "server error in stream: %s", shorten(msg))
		case "response.completed", "response.incomplete":
			resp.Finish = "stop"
			if e.Response != nil {
				if d := e.Response.IncompleteDetails; d != nil && d.Reason != "" {
					resp.Finish = d.Reason
					if d.Reason == "max_output_tokens" {
						resp.Finish = "length"
					}
				}
				if u := e.Response.Usage; u != nil {
					resp.Usage = &Usage{PromptTokens: u.InputTokens, CompletionTokens: u.OutputTokens}
					if u.OutputTokensDetails != nil {
						resp.Usage.ReasoningTokens = u.OutputTokensDetails.ReasoningTokens
					}
				}
			}
			return true
		}
		return false
	})
}

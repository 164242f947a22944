package api

import (
	"context"
	"io"
	"net/http"
	"strings"

	"github.com/tokbench/tokbench/sse"
)

// AnthropicVersion is the anthropic-version header every request carries.
const AnthropicVersion = "2023-06-01"

// Anthropic speaks the Anthropic Messages API (POST /v1/messages; the base
// URL is the bare host, as Anthropic's SDKs take it). Input usage comes in
// message_start, output usage in message_delta; content_block_delta carries
// text_delta and thinking_delta; message_stop ends the stream; ping is
// ignored and an error event fails the request.
type Anthropic struct{}

// Name implements Adapter.
func (Anthropic) Name() string { return "anthropic" }

// KeyHeader sends the API key as x-api-key.
func (Anthropic) KeyHeader(key string) (string, string) { return "x-api-key", key }

// NewHTTPRequest implements Adapter. System messages go to the top-level
// "system" field; max_tokens, which the API requires, defaults to 4096.
func (Anthropic) NewHTTPRequest(ctx context.Context, base string, req *Request) (*http.Request, error) {
	endpoint, err := NativeURL(base, "/v1/messages")
	if err != nil {
		return nil, err
	}
	var system []string
	msgs := make([]Message, 0, len(req.Messages))
	for _, m := range req.Messages {
		if m.Role == "system" {
			system = append(system, m.Content)
			continue
		}
		msgs = append(msgs, m)
	}
	maxTokens := req.MaxTokens
	if maxTokens <= 0 {
		maxTokens = 4096
	}
	body := map[string]any{"model": req.Model, "messages": msgs, "max_tokens": maxTokens, "stream": true}
	if len(system) > 0 {
		body["system"] = strings.Join(system, "\n")
	}
	if len(req.Tools) > 0 {
		body["tools"] = anthropicTools(req.Tools)
	}
	hreq, err := postJSON(ctx, endpoint, body, req.Extra, "text/event-stream")
	if err != nil {
		return nil, err
	}
	hreq.Header.Set("anthropic-version", AnthropicVersion)
	return hreq, nil
}

type anthropicUsage struct {
	InputTokens              int `json:"input_tokens"`
	CacheCreationInputTokens int `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int `json:"cache_read_input_tokens"`
	OutputTokens             int `json:"output_tokens"`
}

type anthropicEvent struct {
	Type    string `json:"type"`
	Message *struct {
		ID    string          `json:"id"`
		Usage *anthropicUsage `json:"usage"`
	} `json:"message"`
	Delta *struct {
		Type        string `json:"type"`
		Text        string `json:"text"`
		Thinking    string `json:"thinking"`
		PartialJSON string `json:"partial_json"`
		StopReason  string `json:"stop_reason"`
	} `json:"delta"`
	Usage        *anthropicUsage `json:"usage"`
	ContentBlock *struct {
		Type string `json:"type"`
	} `json:"content_block"`
}

// Decode implements Adapter.
func (Anthropic) Decode(body io.Reader, resp *Response) {
	usage := &Usage{}
	decodeSSE(body, resp, func(ev sse.Event) bool {
		var e anthropicEvent
		if !decodeJSON(ev.Data, &e, resp) {
			return false
		}
		if e.Type == "" {
			e.Type = ev.Name
		}
		switch e.Type {
		case "message_start":
			if m := e.Message; m != nil {
				resp.ID = m.ID
				if u := m.Usage; u != nil {
					// input_tokens excludes the cached part of the prompt.
					usage.PromptTokens = u.InputTokens + u.CacheCreationInputTokens + u.CacheReadInputTokens
					usage.CachedTokens, usage.CachedKnown = u.CacheReadInputTokens, true
				}
			}
		case "content_block_delta":
			if d := e.Delta; d != nil {
				switch d.Type {
				case "text_delta":
					addChunk(resp, ev.At, d.Text, "")
				case "thinking_delta":
					addChunk(resp, ev.At, "", d.Thinking)
				case "input_json_delta":
					addChunk(resp, ev.At, d.PartialJSON, "")
					if resp.ToolCallAt.IsZero() {
						resp.ToolCallAt = ev.At
					}
					resp.ToolArgs = append(resp.ToolArgs, d.PartialJSON...)
				}
			}
		case "content_block_start":
			if b := e.ContentBlock; b != nil && b.Type == "tool_use" && resp.ToolCallAt.IsZero() {
				resp.ToolCallAt = ev.At
			}
		case "message_delta":
			if e.Delta != nil && e.Delta.StopReason != "" {
				resp.Finish = e.Delta.StopReason
				if resp.Finish == "max_tokens" {
					resp.Finish = "length"
				}
			}
			if e.Usage != nil {
				// output_tokens is cumulative: the last message_delta wins.
				usage.CompletionTokens = e.Usage.OutputTokens
				resp.Usage = usage
			}
		case "message_stop":
			return true
		case "error":
			resp.fail(ClassStreamError, "server error in stream: %s", ErrorMessage(ev.Data))
		}
		return false
	})
	if resp.Usage == nil && usage.PromptTokens > 0 {
		resp.Usage = usage
	}
}

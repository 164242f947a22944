package api

import (
	"context"
	"io"
	"net/http"

	"github.com/tokbench/tokbench/sse"
)

// LlamaCpp speaks llama.cpp's native POST /completion: SSE events with the
// token's "content", the last one with "stop": true, token counts
// (tokens_predicted, tokens_evaluated) and the server's "timings". That
// last event is the end marker: no [DONE] follows. The base URL is the
// bare host.
type LlamaCpp struct {
	// MediaMarker stands for each image or sound of a prompt (GET /props'
	// media_marker); empty is LlamaCppMediaMarker.
	MediaMarker string
}

// Name implements Adapter.
func (LlamaCpp) Name() string { return "llamacpp" }

// NewHTTPRequest implements Adapter. The output budget is n_predict.
func (LlamaCpp) NewHTTPRequest(ctx context.Context, base string, req *Request) (*http.Request, error) {
	endpoint, err := NativeURL(base, "/completion")
	if err != nil {
		return nil, err
	}
	body := map[string]any{"prompt": req.Prompt(), "stream": true}
	if req.MaxTokens > 0 {
		body["n_predict"] = req.MaxTokens
	}
	if req.IgnoreEOS {
		body["ignore_eos"] = true
	}
	return postJSON(ctx, endpoint, body, req.Extra, "text/event-stream")
}

type llamacppEvent struct {
	Content         string `json:"content"`
	Stop            bool   `json:"stop"`
	StopType        string `json:"stop_type"`
	TokensPredicted int    `json:"tokens_predicted"`
	TokensEvaluated int    `json:"tokens_evaluated"`
	Timings         *struct {
		PromptN            int     `json:"prompt_n"`
		PromptMs           float64 `json:"prompt_ms"`
		PromptPerSecond    float64 `json:"prompt_per_second"`
		PredictedN         int     `json:"predicted_n"`
		PredictedMs        float64 `json:"predicted_ms"`
		PredictedPerSecond float64 `json:"predicted_per_second"`
	} `json:"timings"`
	Error any `json:"error"`
}

// Decode implements Adapter.
func (LlamaCpp) Decode(body io.Reader, resp *Response) {
	decodeSSE(body, resp, func(ev sse.Event) bool {
		var e llamacppEvent
		if !decodeJSON(ev.Data, &e, resp) {
			return false
		}
		if e.Error != nil || ev.Name == "error" {
			resp.fail(ClassStreamError, "server error in stream: %s", ErrorMessage(ev.Data))
			return false
		}
		addChunk(resp, ev.At, e.Content, "")
		if !e.Stop {
			return false
		}
		switch e.StopType {
		case "limit":
			resp.Finish = "length"
		case "", "none":
			resp.Finish = "stop"
		default: // eos, word
			resp.Finish = "stop"
		}
		if e.TokensPredicted > 0 {
			resp.Usage = &Usage{PromptTokens: e.TokensEvaluated, CompletionTokens: e.TokensPredicted}
		}
		if t := e.Timings; t != nil {
			resp.Server = &ServerTiming{
				PromptMs: t.PromptMs, PredictedMs: t.PredictedMs,
				DecodeTPS: t.PredictedPerSecond, PrefillTPS: t.PromptPerSecond,
				PromptTokens: t.PromptN, PredictedTokens: t.PredictedN, EvaluatedOnly: t.PromptN > 0,
			}
		}
		return true
	})
}

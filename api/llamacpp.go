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
	// ImageData sends images in the older form, LlamaCppImageData, for
	// servers from before libmtmd; the default is LlamaCppMultimodalData.
	ImageData bool
}

// The two forms in which llama.cpp's /completion has taken media.
const (
	// LlamaCppMultimodalData is the form of servers built on libmtmd
	// (2025 on): the prompt an object, {"prompt_string": "<marker>\n…",
	// "multimodal_data": [base64, …]}, one marker per file, images and
	// sounds. Their GET /props names media_marker or modalities.
	LlamaCppMultimodalData = "multimodal_data"
	// LlamaCppImageData is the form of the LLaVA-era servers (llama.cpp
	// from October 2023 until multimodal support left its server in March
	// 2024, and the llamafile server forked from it): a string prompt
	// with "[img-N]" where image N goes and "image_data": [{"data":
	// base64, "id": N}, …]. Images only. Their GET /props has neither
	// media_marker nor modalities.
	LlamaCppImageData = "image_data"
)

// MediaForm is the form in which l sends media: LlamaCppImageData or
// LlamaCppMultimodalData.
func (l LlamaCpp) MediaForm() string {
	if l.ImageData {
		return LlamaCppImageData
	}
	return LlamaCppMultimodalData
}

// refusalNote is what a failed request with media says of the form it
// went in, and the other form a server may take instead.
func (l LlamaCpp) refusalNote() string {
	if l.ImageData {
		return "its images went as image_data with [img-N] in the prompt, the form of llama.cpp servers before 2025 and llamafile's; " +
			"a server built on libmtmd takes multimodal_data (--llamacpp-media multimodal_data)"
	}
	return "its media went as multimodal_data, the form of llama.cpp servers built on libmtmd (2025 on); " +
		"a LLaVA-era server (llama.cpp before March 2024, llamafile) takes image_data (--llamacpp-media image_data)"
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
	// Multimodal is in every event of a LLaVA-era server: whether it
	// was started with a projector (--mmproj) and so took the images.
	Multimodal *bool `json:"multimodal"`
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
		// A server that ignores image_data answers the text alone: a
		// LLaVA-era one without a projector says multimodal false, a later
		// one says nothing of it.
		if resp.imageData && (e.Multimodal == nil || !*e.Multimodal) {
			said := "its events say nothing of multimodal: a llama.cpp server from after March 2024 ignores image_data"
			if e.Multimodal != nil {
				said = "its events say multimodal false: it was started without a projector (--mmproj)"
				resp.formRight = true
			}
			resp.fail(ClassStreamError, "the server did not take the images: %s", said)
			return false
		}
		resp.imageData = false // checked once
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

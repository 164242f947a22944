package api

import (
	"bytes"
	"encoding/json"
	"strings"
)

// openaiChunk is the subset of a streamed chunk that matters for timing.
type openaiChunk struct {
	Choices []struct {
		Delta struct {
			Content          *string `json:"content"`
			ReasoningContent *string `json:"reasoning_content"`
			Reasoning        *string `json:"reasoning"`
			ToolCalls        []struct {
				Function struct {
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"delta"`
		Text         *string `json:"text"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens            int `json:"prompt_tokens"`
		CompletionTokens        int `json:"completion_tokens"`
		CompletionTokensDetails *struct {
			ReasoningTokens int `json:"reasoning_tokens"`
		} `json:"completion_tokens_details"`
		PromptTokensDetails *struct {
			CachedTokens *int `json:"cached_tokens"`
		} `json:"prompt_tokens_details"`
	} `json:"usage"`
	Timings *struct {
		PromptMs           float64 `json:"prompt_ms"`
		PromptPerSecond    float64 `json:"prompt_per_second"`
		PredictedMs        float64 `json:"predicted_ms"`
		PredictedPerSecond float64 `json:"predicted_per_second"`
		PromptN            int     `json:"prompt_n"`
		PredictedN         int     `json:"predicted_n"`
		CacheN             *int    `json:"cache_n"`
	} `json:"timings"`
	Error  json.RawMessage `json:"error"`
	ID     string          `json:"id"`
	Object string          `json:"object"`
}

// decodeChunkStd fills f from data with encoding/json: the reference the
// chunkDecoder must agree with.
func decodeChunkStd(data []byte, f *chunkFields) error {
	var c openaiChunk
	if err := json.Unmarshal(data, &c); err != nil {
		return err
	}
	*f = chunkFields{}
	f.errored = len(c.Error) > 0 && !bytes.Equal(c.Error, []byte("null")) || c.Object == "error"
	f.id = []byte(c.ID)
	var text, reasoning strings.Builder
	for i := range c.Choices {
		ch := &c.Choices[i]
		if ch.Delta.Content != nil {
			text.WriteString(*ch.Delta.Content)
		}
		for _, tc := range ch.Delta.ToolCalls {
			text.WriteString(tc.Function.Arguments)
		}
		if ch.Text != nil {
			text.WriteString(*ch.Text)
		}
		if ch.Delta.ReasoningContent != nil {
			reasoning.WriteString(*ch.Delta.ReasoningContent)
		} else if ch.Delta.Reasoning != nil {
			reasoning.WriteString(*ch.Delta.Reasoning)
		}
		if ch.FinishReason != nil && *ch.FinishReason != "" {
			f.finish = []byte(*ch.FinishReason)
		}
	}
	f.text = []byte(text.String())
	f.reasoning = []byte(reasoning.String())
	if u := c.Usage; u != nil {
		f.hasUsage = true
		f.promptTokens, f.completionTokens = u.PromptTokens, u.CompletionTokens
		if d := u.CompletionTokensDetails; d != nil {
			f.reasoningTokens = d.ReasoningTokens
		}
		if d := u.PromptTokensDetails; d != nil && d.CachedTokens != nil {
			f.hasCached, f.cachedTokens = true, *d.CachedTokens
		}
	}
	if t := c.Timings; t != nil {
		f.hasTimings = true
		f.promptMs, f.promptPerSecond = t.PromptMs, t.PromptPerSecond
		f.predictedMs, f.predictedPerSecond = t.PredictedMs, t.PredictedPerSecond
		f.promptN, f.predictedN = t.PromptN, t.PredictedN
		if t.CacheN != nil {
			f.hasCacheN, f.cacheN = true, *t.CacheN
		}
	}
	return nil
}

// ollamaLine is an Ollama line as encoding/json reads it: the reference
// the ollamaDecoder must agree with.
type ollamaLine struct {
	Message            *ollamaMessage `json:"message"`
	CreatedAt          string         `json:"created_at"`
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

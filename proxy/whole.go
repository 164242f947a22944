package proxy

import (
	"github.com/valyala/fastjson"

	"github.com/tokbench/tokbench/api"
)

// maxWhole bounds the copy of a non-streamed answer the proxy keeps to
// read its tokens from; the client gets the whole answer however long.
const maxWhole = 16 << 20

// decodeWhole reads a non-streamed answer of a's protocol into resp: one
// chunk, at the instant the answer's last byte arrived, with its text and
// reasoning; the usage, id and finish reason where the protocol has them.
// An answer it cannot read is a malformed one.
func decodeWhole(a api.Adapter, body []byte, resp *api.Response) {
	jp := parsers.Get()
	defer parsers.Put(jp)
	v, err := jp.ParseBytes(body)
	if err != nil {
		resp.ErrorClass, resp.Error = api.ClassMalformedStream, "the answer is not JSON: "+err.Error()
		return
	}
	var c api.Chunk
	u := &api.Usage{}
	switch a := a.(type) {
	case api.OpenAI:
		resp.ID = str(v, "id")
		ch := v.Get("choices", "0")
		if a.Chat {
			c.Text = str(ch, "message", "content")
			c.Reasoning = str(ch, "message", "reasoning_content") + str(ch, "message", "reasoning")
		} else {
			c.Text = str(ch, "text")
		}
		resp.Finish = str(ch, "finish_reason")
		u.PromptTokens = v.GetInt("usage", "prompt_tokens")
		u.CompletionTokens = v.GetInt("usage", "completion_tokens")
		u.ReasoningTokens = v.GetInt("usage", "completion_tokens_details", "reasoning_tokens")
		if cached := v.Get("usage", "prompt_tokens_details", "cached_tokens"); cached != nil {
			u.CachedTokens, u.CachedKnown = cached.GetInt(), true
		}
	case api.Anthropic:
		resp.ID = str(v, "id")
		for _, part := range v.GetArray("content") {
			switch str(part, "type") {
			case "text":
				c.Text += str(part, "text")
			case "thinking":
				c.Reasoning += str(part, "thinking")
			}
		}
		resp.Finish = str(v, "stop_reason")
		u.PromptTokens = v.GetInt("usage", "input_tokens")
		u.CompletionTokens = v.GetInt("usage", "output_tokens")
		if cached := v.Get("usage", "cache_read_input_tokens"); cached != nil {
			u.CachedTokens, u.CachedKnown = cached.GetInt(), true
		}
	case api.Ollama:
		if a.Chat {
			c.Text, c.Reasoning = str(v, "message", "content"), str(v, "message", "thinking")
		} else {
			c.Text, c.Reasoning = str(v, "response"), str(v, "thinking")
		}
		resp.Finish = str(v, "done_reason")
		u.PromptTokens = v.GetInt("prompt_eval_count")
		u.CompletionTokens = v.GetInt("eval_count")
	case api.LlamaCpp:
		c.Text = str(v, "content")
		resp.Finish = str(v, "stop_type")
		u.PromptTokens = v.GetInt("tokens_evaluated")
		u.CompletionTokens = v.GetInt("tokens_predicted")
		if cached := v.Get("tokens_cached"); cached != nil {
			u.CachedTokens, u.CachedKnown = cached.GetInt(), true
		}
	}
	if c.Text == "" && c.Reasoning == "" && u.CompletionTokens == 0 {
		resp.ErrorClass, resp.Error = api.ClassEmptyResponse, "the answer carried no output"
		return
	}
	c.At = resp.Done
	resp.Chunks = append(resp.Chunks, c)
	if u.CompletionTokens > 0 {
		resp.Usage = u
	}
	resp.SawDone = true
}

// str is the string at keys in v ("" when absent or not a string).
func str(v *fastjson.Value, keys ...string) string {
	if v == nil {
		return ""
	}
	return string(v.GetStringBytes(keys...))
}

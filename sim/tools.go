package sim

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
)

// This file serves tool calling: a request's tool definitions are counted
// as prompt tokens, and a seeded share of the requests that carry tools
// (Config.ToolCallShare) is answered with a call of one of them, streamed
// as each API streams one — OpenAI's delta.tool_calls (the first delta
// with the call's id and name, the arguments in fragments, finish_reason
// "tool_calls"), Anthropic's tool_use content block of input_json_delta
// fragments (stop_reason "tool_use"). The arguments are {"input": "…"}
// with the step's words in the string: the engine's tokens, as for text.

// toolBytesPerToken is the simulator's counting rule for tool definitions:
// their JSON, compacted, at four bytes a token (JSON's punctuation and
// identifiers tokenize denser than prose; OpenAI's guidance is four
// characters a token).
const toolBytesPerToken = 4

// toolDefs are the names of a request's tools and their prompt tokens.
// Tools are OpenAI's ({"type": "function", "function": {"name": …}}) or
// Anthropic's ({"name": …, "input_schema": …}).
func toolDefs(raw json.RawMessage) (names []string, tokens int, err error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, 0, nil
	}
	var tools []struct {
		Name     string `json:"name"`
		Function *struct {
			Name string `json:"name"`
		} `json:"function"`
	}
	if err := json.Unmarshal(raw, &tools); err != nil {
		return nil, 0, badRequest("tools: want an array of tool definitions")
	}
	for i, t := range tools {
		name := t.Name
		if t.Function != nil {
			name = t.Function.Name
		}
		if name == "" {
			return nil, 0, badRequest("tools[%d]: no name", i)
		}
		names = append(names, name)
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, raw); err != nil {
		return nil, 0, badRequest("tools: %v", err)
	}
	return names, (compact.Len() + toolBytesPerToken - 1) / toolBytesPerToken, nil
}

// toolCall is the tool request id calls, "" for a text answer: with
// tools given, a seeded draw under the configured share, the tool drawn
// from them.
func (s *Server) toolCall(names []string, id uint64) string {
	share := s.cfg.ToolCallShare
	if len(names) == 0 || share < 0 {
		return ""
	}
	if share == 0 {
		share = 1
	}
	h := splitmix(s.cfg.Engine.Seed ^ splitmix(id^0x70013ca11))
	if float64(h>>11)/(1<<53) >= share {
		return ""
	}
	return names[splitmix(h)%uint64(len(names))]
}

// toolChunk writes one step's tokens of an OpenAI tool call.
func (e *encoder) toolChunk(buf []byte, c chunk, prompt, completion int) []byte {
	buf = append(buf, e.head...)
	buf = append(buf, `{"index":0,"delta":{"tool_calls":[{"index":0,`...)
	if c.first == 0 {
		buf = fmt.Appendf(buf, `"id":"call_sim_%d","type":"function","function":{"name":%s,"arguments":"`, e.id, strconv.Quote(e.tool))
	} else {
		buf = append(buf, `"function":{"arguments":"`...)
	}
	buf = e.toolArgs(buf, c, `\"`)
	buf = append(buf, `"}}]},"logprobs":null,"finish_reason":`...)
	if c.finish == FinishNone {
		buf = append(buf, "null"...)
	} else {
		buf = append(buf, `"tool_calls"`...)
	}
	if e.continuousUsage {
		return fmt.Appendf(buf, `}],"usage":{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d}}`+"\n\n",
			prompt, completion, prompt+completion)
	}
	return append(buf, "}]}\n\n"...)
}

// toolArgs writes a step's fragment of the arguments {"input": "words"},
// its quotes written as q (escaped inside a JSON string).
func (e *encoder) toolArgs(buf []byte, c chunk, q string) []byte {
	if c.first == 0 {
		buf = append(buf, "{"+q+"input"+q+":"+q...)
	}
	buf = appendWords(buf, e.seed, e.id, c.first, c.tokens)
	if c.finish != FinishNone {
		buf = append(buf, q+"}"...)
	}
	return buf
}

// anthropicToolStart is the tool_use content block's start.
func (e *encoder) anthropicToolStart(buf []byte) []byte {
	return fmt.Appendf(buf, `event: content_block_start`+"\n"+`data: {"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_sim_%d","name":%s,"input":{}}}`+"\n\n",
		e.id, strconv.Quote(e.tool))
}

// anthropicToolDelta writes one step's input_json_delta, after the
// tool_use block's start on the first: the model names the tool with its
// first token, as OpenAI's first tool-call delta does.
func (e *encoder) anthropicToolDelta(buf []byte, c chunk) []byte {
	if c.first == 0 {
		buf = e.anthropicToolStart(buf)
	}
	buf = append(buf, `event: content_block_delta`+"\n"+`data: {"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"`...)
	buf = e.toolArgs(buf, c, `\"`)
	return append(buf, `"}}`+"\n\n"...)
}

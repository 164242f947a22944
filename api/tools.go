package api

import "encoding/json"

// Tool is a function the model may call: its name, what it does, and its
// parameters as a JSON schema object.
type Tool struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters"`
}

// openAITools are tools as OpenAI's chat API takes them:
// [{"type": "function", "function": {name, description, parameters}}].
func openAITools(tools []Tool) []map[string]any {
	out := make([]map[string]any, len(tools))
	for i, t := range tools {
		out[i] = map[string]any{"type": "function", "function": t}
	}
	return out
}

// anthropicTools are tools as Anthropic's Messages API takes them:
// [{name, description, input_schema}].
func anthropicTools(tools []Tool) []map[string]any {
	out := make([]map[string]any, len(tools))
	for i, t := range tools {
		m := map[string]any{"name": t.Name, "input_schema": t.Parameters}
		if t.Description != "" {
			m["description"] = t.Description
		}
		out[i] = m
	}
	return out
}

// SendsTools reports whether the adapter's API takes tool definitions
// (Request.Tools): OpenAI's chat completions and Anthropic's Messages.
// The others send the request without them.
func SendsTools(a Adapter) bool {
	switch a := a.(type) {
	case OpenAI:
		return a.Chat
	case Anthropic:
		return true
	}
	return false
}

package api

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

var testTools = []Tool{{Name: "get_weather", Description: "Weather now.", Parameters: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}}}`)}}

// TestToolsInRequests: OpenAI chat and Anthropic send the definitions in
// their own shapes; completions take none.
func TestToolsInRequests(t *testing.T) {
	req := &Request{Model: "m", Messages: []Message{{Role: "user", Content: "hi"}}, Tools: testTools}
	_, _, body := capture(t, OpenAI{Chat: true}, "/v1", req, nil)
	tools, _ := body["tools"].([]any)
	if len(tools) != 1 {
		t.Fatalf("openai tools %v", body["tools"])
	}
	fn, _ := tools[0].(map[string]any)["function"].(map[string]any)
	if tools[0].(map[string]any)["type"] != "function" || fn["name"] != "get_weather" || fn["parameters"] == nil {
		t.Errorf("openai tool %v", tools[0])
	}
	_, _, body = capture(t, Anthropic{}, "", req, nil)
	tools, _ = body["tools"].([]any)
	if len(tools) != 1 || tools[0].(map[string]any)["name"] != "get_weather" || tools[0].(map[string]any)["input_schema"] == nil {
		t.Errorf("anthropic tools %v", body["tools"])
	}
	if _, _, body = capture(t, OpenAI{}, "/v1", req, nil); body["tools"] != nil {
		t.Errorf("completions sent tools %v", body["tools"])
	}
	if !SendsTools(OpenAI{Chat: true}) || !SendsTools(Anthropic{}) || SendsTools(OpenAI{}) || SendsTools(Ollama{Chat: true}) {
		t.Error("SendsTools")
	}
}

// scripted is a server writing events at known offsets from the request's
// arrival; wrote[i] is when event i went out.
func scripted(t *testing.T, contentType string, events []string, at []time.Duration) (*httptest.Server, *[]time.Time) {
	t.Helper()
	wrote := make([]time.Time, len(events))
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived := time.Now()
		w.Header().Set("Content-Type", contentType)
		w.WriteHeader(200)
		w.(http.Flusher).Flush()
		for i, ev := range events {
			time.Sleep(time.Until(arrived.Add(at[i])))
			wrote[i] = time.Now()
			w.Write([]byte(ev))
			w.(http.Flusher).Flush()
		}
	})), &wrote
}

// TestToolCallTimedOpenAI: the first tool-call delta — the one naming the
// function, which carries no argument text and so no token — is the
// instant the call began, after the role chunk and before the first
// argument chunk; the argument text is kept.
func TestToolCallTimedOpenAI(t *testing.T) {
	const head = `data: {"id":"c1","choices":[{"index":0,"delta":`
	events := []string{
		head + `{"role":"assistant","content":""},"finish_reason":null}]}` + "\n\n",
		head + `{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"get_weather","arguments":""}}]},"finish_reason":null}]}` + "\n\n",
		head + `{"tool_calls":[{"index":0,"function":{"arguments":"{\"city\":"}}]},"finish_reason":null}]}` + "\n\n",
		head + `{"tool_calls":[{"index":0,"function":{"arguments":" \"Paris\"}"}}]},"finish_reason":"tool_calls"}]}` + "\n\n",
		`data: {"id":"c1","choices":[],"usage":{"prompt_tokens":50,"completion_tokens":6}}` + "\n\ndata: [DONE]\n\n",
	}
	at := []time.Duration{0, 40 * time.Millisecond, 80 * time.Millisecond, 120 * time.Millisecond, 120 * time.Millisecond}
	srv, wrote := scripted(t, "text/event-stream", events, at)
	defer srv.Close()
	cl := &Client{HTTP: srv.Client(), Adapter: OpenAI{Chat: true}, BaseURL: srv.URL + "/v1"}
	resp := cl.Do(context.Background(), &Request{Model: "m", Messages: []Message{{Role: "user", Content: "weather?"}}, Tools: testTools})
	if resp.Failed() {
		t.Fatalf("%s: %s", resp.ErrorClass, resp.Error)
	}
	w := *wrote
	if resp.ToolCallAt.Before(w[1]) || !resp.ToolCallAt.Before(w[2]) {
		t.Errorf("first tool-call delta at %v, written at %v; the first argument at %v",
			resp.ToolCallAt.Sub(resp.Start), w[1].Sub(resp.Start), w[2].Sub(resp.Start))
	}
	if len(resp.Chunks) != 2 || !resp.ToolCallAt.Before(resp.Chunks[0].At) {
		t.Errorf("%d chunks, the first at %v, the call at %v", len(resp.Chunks), resp.Chunks[0].At.Sub(resp.Start), resp.ToolCallAt.Sub(resp.Start))
	}
	if got := string(resp.ToolArgs); got != `{"city": "Paris"}` || resp.Finish != "tool_calls" {
		t.Errorf("arguments %q, finish %q", got, resp.Finish)
	}
}

// TestToolCallTimedAnthropic: the tool_use block's start is the call's
// first delta; its input_json_delta fragments are the arguments.
func TestToolCallTimedAnthropic(t *testing.T) {
	ev := func(name, data string) string { return "event: " + name + "\ndata: " + data + "\n\n" }
	events := []string{
		ev("message_start", `{"type":"message_start","message":{"id":"msg_1","usage":{"input_tokens":300,"output_tokens":1}}}`),
		ev("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_1","name":"get_weather","input":{}}}`),
		ev("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"city\": "}}`),
		ev("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"\"Paris\"}"}}`) +
			ev("content_block_stop", `{"type":"content_block_stop","index":0}`) +
			ev("message_delta", `{"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":9}}`) +
			ev("message_stop", `{"type":"message_stop"}`),
	}
	at := []time.Duration{0, 40 * time.Millisecond, 80 * time.Millisecond, 100 * time.Millisecond}
	srv, wrote := scripted(t, "text/event-stream", events, at)
	defer srv.Close()
	cl := &Client{HTTP: srv.Client(), Adapter: Anthropic{}, BaseURL: srv.URL}
	resp := cl.Do(context.Background(), &Request{Model: "m", Messages: []Message{{Role: "user", Content: "weather?"}}, Tools: testTools})
	if resp.Failed() {
		t.Fatalf("%s: %s", resp.ErrorClass, resp.Error)
	}
	w := *wrote
	if resp.ToolCallAt.Before(w[1]) || !resp.ToolCallAt.Before(w[2]) {
		t.Errorf("tool_use start at %v, written at %v; the first argument at %v",
			resp.ToolCallAt.Sub(resp.Start), w[1].Sub(resp.Start), w[2].Sub(resp.Start))
	}
	if got := string(resp.ToolArgs); got != `{"city": "Paris"}` || resp.Finish != "tool_use" || resp.Usage.CompletionTokens != 9 {
		t.Errorf("arguments %q, finish %q, usage %+v", got, resp.Finish, resp.Usage)
	}
}

// TestNoToolCall: a text answer has no tool call.
func TestNoToolCall(t *testing.T) {
	srv, _ := scripted(t, "text/event-stream", []string{
		`data: {"choices":[{"index":0,"delta":{"content":" hi"},"finish_reason":"stop"}]}` + "\n\ndata: [DONE]\n\n",
	}, []time.Duration{0})
	defer srv.Close()
	resp := (&Client{HTTP: srv.Client(), Adapter: OpenAI{Chat: true}, BaseURL: srv.URL}).Do(context.Background(),
		&Request{Model: "m", Messages: []Message{{Role: "user", Content: "x"}}, Tools: testTools})
	if resp.Failed() || !resp.ToolCallAt.IsZero() || len(resp.ToolArgs) != 0 || !strings.Contains(resp.Chunks[0].Text, "hi") {
		t.Errorf("%s %s: tool call at %v, args %q", resp.ErrorClass, resp.Error, resp.ToolCallAt, resp.ToolArgs)
	}
}

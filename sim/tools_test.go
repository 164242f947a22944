package sim

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

const twoTools = `[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}},` +
	`{"type":"function","function":{"name":"search_files","parameters":{"type":"object"}}}]`

// TestToolCallOpenAI: a streamed chat request with tools is answered with
// a call of one of them: the first token chunk names it, the arguments
// come in fragments of the engine's tokens and make one JSON object, the
// last chunk says tool_calls; the definitions are prompt tokens.
func TestToolCallOpenAI(t *testing.T) {
	_, hs := testServer(t, nil)
	body := `{"model":"m","stream":true,"stream_options":{"include_usage":true},"max_tokens":6,"ignore_eos":true,` +
		`"messages":[{"role":"user","content":"a b c"}],"tools":` + twoTools + `}`
	resp := post(t, context.Background(), hs.URL+"/v1/chat/completions", body)
	defer resp.Body.Close()
	var name, args, finish string
	calls, prompt := 0, 0
	for _, ev := range sseEvents(t, resp.Body) {
		if ev == "[DONE]" {
			break
		}
		var c struct {
			Choices []struct {
				Delta struct {
					Content   string `json:"content"`
					ToolCalls []struct {
						ID       string `json:"id"`
						Function struct {
							Name      string `json:"name"`
							Arguments string `json:"arguments"`
						} `json:"function"`
					} `json:"tool_calls"`
				} `json:"delta"`
				FinishReason *string `json:"finish_reason"`
			} `json:"choices"`
			Usage *struct {
				PromptTokens int `json:"prompt_tokens"`
			} `json:"usage"`
		}
		if err := json.Unmarshal([]byte(ev), &c); err != nil {
			t.Fatalf("%s: %v", ev, err)
		}
		if c.Usage != nil {
			prompt = c.Usage.PromptTokens
		}
		for _, ch := range c.Choices {
			if ch.Delta.Content != "" {
				t.Errorf("text in a tool-call answer: %q", ch.Delta.Content)
			}
			for _, tc := range ch.Delta.ToolCalls {
				calls++
				if tc.Function.Name != "" {
					name = tc.Function.Name
					if tc.ID == "" || calls != 1 {
						t.Errorf("call named in delta %d, id %q", calls, tc.ID)
					}
				}
				args += tc.Function.Arguments
			}
			if ch.FinishReason != nil {
				finish = *ch.FinishReason
			}
		}
	}
	var parsed struct{ Input string }
	if err := json.Unmarshal([]byte(args), &parsed); err != nil || len(strings.Fields(parsed.Input)) != 6 {
		t.Errorf("arguments %q: %v, want an object of the 6 tokens' words", args, err)
	}
	if name != "get_weather" && name != "search_files" || finish != "tool_calls" || calls < 2 {
		t.Errorf("called %q in %d deltas, finish %q", name, calls, finish)
	}
	// 3 words + 3 per message + 3 for the reply, and the tools at 4 bytes a token.
	var compact strings.Builder
	for _, f := range strings.Fields(twoTools) {
		compact.WriteString(f)
	}
	if want := 9 + (len(compact.String())+3)/4; prompt != want {
		t.Errorf("prompt tokens %d, want %d", prompt, want)
	}
}

// TestToolCallShare: the share of requests answered with a call follows
// the configuration, drawn per request from the seed; none for a
// negative share, and none without tools.
func TestToolCallShare(t *testing.T) {
	names := []string{"a", "b", "c"}
	for _, c := range []struct {
		share    float64
		tools    []string
		min, max int
	}{{0, names, 1000, 1000}, {1, names, 1000, 1000}, {-1, names, 0, 0}, {0.3, names, 250, 350}, {1, nil, 0, 0}} {
		s := &Server{cfg: Config{ToolCallShare: c.share}}
		n := 0
		seen := map[string]bool{}
		for id := range uint64(1000) {
			if name := s.toolCall(c.tools, id); name != "" {
				n++
				seen[name] = true
			}
		}
		if n < c.min || n > c.max || n > 0 && len(seen) != 3 {
			t.Errorf("share %g: %d of 1000 called (%d tools), want %d–%d", c.share, n, len(seen), c.min, c.max)
		}
	}
}

// TestToolCallAnthropic: the Messages stream opens a tool_use block, its
// input_json_delta fragments make the arguments, and it stops for
// tool_use.
func TestToolCallAnthropic(t *testing.T) {
	_, hs := testServer(t, nil)
	body := `{"model":"m","stream":true,"max_tokens":4,"messages":[{"role":"user","content":"hi"}],` +
		`"tools":[{"name":"get_weather","input_schema":{"type":"object"}}]}`
	resp := post(t, context.Background(), hs.URL+"/v1/messages", body)
	defer resp.Body.Close()
	var types []string
	var args, stop string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var e struct {
			Type         string `json:"type"`
			ContentBlock *struct {
				Type string `json:"type"`
				Name string `json:"name"`
			} `json:"content_block"`
			Delta *struct {
				Type        string `json:"type"`
				PartialJSON string `json:"partial_json"`
				StopReason  string `json:"stop_reason"`
			} `json:"delta"`
		}
		if err := json.Unmarshal([]byte(data), &e); err != nil {
			t.Fatalf("%s: %v", data, err)
		}
		switch {
		case e.ContentBlock != nil:
			types = append(types, e.ContentBlock.Type+":"+e.ContentBlock.Name)
		case e.Delta != nil && e.Delta.Type == "input_json_delta":
			args += e.Delta.PartialJSON
		case e.Delta != nil && e.Delta.StopReason != "":
			stop = e.Delta.StopReason
		}
	}
	var parsed map[string]string
	if err := json.Unmarshal([]byte(args), &parsed); err != nil || fmt.Sprint(types) != "[tool_use:get_weather]" || stop != "tool_use" {
		t.Errorf("blocks %v, arguments %q (%v), stop %q", types, args, err, stop)
	}
}

package sim

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/tokbench/tokbench/api"
)

// With fixed 2 ms steps, a request to an idle server gets its first token
// one step after it arrives and one token per step after that: llama.cpp's
// timings must say exactly that, and every event must carry the token the
// simulator's word sequence gives.
func TestLlamaCppCompletion(t *testing.T) {
	_, hs := testServer(t, nil)
	resp := post(t, context.Background(), hs.URL+"/completion", `{"prompt":"one two three four five","n_predict":8,"stream":true}`)
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("status %d, content type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	events := sseEvents(t, resp.Body)
	if len(events) != 9 {
		t.Fatalf("%d events, want 8 tokens and the end: %q", len(events), events)
	}
	id := uint64(1) // the server's first request
	for i, ev := range events[:8] {
		var e struct {
			Content         string `json:"content"`
			Tokens          []int  `json:"tokens"`
			Stop            bool   `json:"stop"`
			TokensPredicted int    `json:"tokens_predicted"`
			TokensEvaluated int    `json:"tokens_evaluated"`
		}
		if err := json.Unmarshal([]byte(ev), &e); err != nil {
			t.Fatalf("event %d %q: %v", i, ev, err)
		}
		want := outputWord(DefaultConfig().Engine.Seed, id, i)
		if e.Content != want || len(e.Tokens) != 1 || e.Tokens[0] != wordIDs[want] || e.Stop || e.TokensPredicted != i+1 || e.TokensEvaluated != 5 {
			t.Errorf("event %d = %s, want content %q, token %d, tokens_predicted %d", i, ev, want, wordIDs[want], i+1)
		}
	}
	var end struct {
		Content         string          `json:"content"`
		Stop            bool            `json:"stop"`
		StopType        string          `json:"stop_type"`
		TokensPredicted int             `json:"tokens_predicted"`
		TokensEvaluated int             `json:"tokens_evaluated"`
		Model           string          `json:"model"`
		Timings         llamacppTimings `json:"timings"`
	}
	if err := json.Unmarshal([]byte(events[8]), &end); err != nil {
		t.Fatal(err)
	}
	want := llamacppTimings{
		PromptN: 5, PromptMs: 2, PromptPerTokenMs: 0.4, PromptPerSecond: 2500,
		PredictedN: 8, PredictedMs: 14, PredictedPerTokenMs: 1.75, PredictedPerSecond: 8 / 0.014,
	}
	if !end.Stop || end.Content != "" || end.StopType != "limit" || end.TokensPredicted != 8 || end.TokensEvaluated != 5 || end.Model != "sim-test" {
		t.Errorf("end event %s", events[8])
	}
	if !closeTimings(end.Timings, want) {
		t.Errorf("timings %+v, want %+v", end.Timings, want)
	}
}

func closeTimings(a, b llamacppTimings) bool {
	near := func(x, y float64) bool { return x-y < 1e-6*max(1, y) && y-x < 1e-6*max(1, y) }
	return a.PromptN == b.PromptN && a.PredictedN == b.PredictedN &&
		near(a.PromptMs, b.PromptMs) && near(a.PromptPerTokenMs, b.PromptPerTokenMs) && near(a.PromptPerSecond, b.PromptPerSecond) &&
		near(a.PredictedMs, b.PredictedMs) && near(a.PredictedPerTokenMs, b.PredictedPerTokenMs) && near(a.PredictedPerSecond, b.PredictedPerSecond)
}

// TGI's stream: one event per token, indexes from 1, the last one with the
// whole text and the details.
func TestTGIGenerateStream(t *testing.T) {
	_, hs := testServer(t, nil)
	resp := post(t, context.Background(), hs.URL+"/generate_stream", `{"inputs":"one two three","parameters":{"max_new_tokens":6,"details":true},"stream":true}`)
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	events := sseEvents(t, resp.Body)
	if len(events) != 6 {
		t.Fatalf("%d events, want 6: %q", len(events), events)
	}
	var text strings.Builder
	for i, ev := range events {
		var e struct {
			Index int `json:"index"`
			Token struct {
				ID      int     `json:"id"`
				Text    string  `json:"text"`
				Logprob float64 `json:"logprob"`
				Special bool    `json:"special"`
			} `json:"token"`
			GeneratedText *string `json:"generated_text"`
			Details       *struct {
				FinishReason    string `json:"finish_reason"`
				GeneratedTokens int    `json:"generated_tokens"`
				InputLength     int    `json:"input_length"`
			} `json:"details"`
		}
		if err := json.Unmarshal([]byte(ev), &e); err != nil {
			t.Fatalf("event %d %q: %v", i, ev, err)
		}
		want := outputWord(DefaultConfig().Engine.Seed, 1, i)
		text.WriteString(want)
		if e.Index != i+1 || e.Token.Text != want || e.Token.ID != wordIDs[want] || e.Token.Special {
			t.Errorf("event %d = %s, want index %d, text %q", i, ev, i+1, want)
		}
		last := i == len(events)-1
		if (e.GeneratedText != nil) != last || (e.Details != nil) != last {
			t.Errorf("event %d = %s: generated_text and details belong to the last event only", i, ev)
		}
		if last && (*e.GeneratedText != text.String() || e.Details.FinishReason != "length" || e.Details.GeneratedTokens != 6 || e.Details.InputLength != 3) {
			t.Errorf("last event %s, want generated_text %q", ev, text.String())
		}
	}
}

// Requests the EOS draw stops: llama.cpp says stop_type eos, TGI ends with a
// special </s> counted in generated_tokens; the adapters turn both into
// exactly as many tokens as chunks of text, and llama.cpp's timings count them.
func TestNativeTokenStreamsEOS(t *testing.T) {
	_, hs := testServer(t, func(c *Config) { c.Engine.MeanOutputTokens = 4 })
	client := &api.Client{HTTP: hs.Client(), BaseURL: hs.URL}
	for _, ad := range []api.Adapter{api.LlamaCpp{}, api.TGI{}} {
		client.Adapter = ad
		stopped := 0
		for range 6 {
			r := client.Do(context.Background(), &api.Request{Messages: []api.Message{{Role: "user", Content: "a b c"}}, MaxTokens: 40})
			if r.Failed() || r.Usage == nil || r.Usage.CompletionTokens != len(r.Chunks) || r.Usage.PromptTokens != 3 {
				t.Fatalf("%s: %s %s, usage %+v, %d chunks", ad.Name(), r.ErrorClass, r.Error, r.Usage, len(r.Chunks))
			}
			if r.Finish == "stop" {
				stopped++
			}
			if want := len(r.Chunks) == 40; (r.Finish == "length") != want {
				t.Errorf("%s: finish %q after %d tokens", ad.Name(), r.Finish, len(r.Chunks))
			}
			if _, ok := ad.(api.LlamaCpp); ok && (r.Server == nil || r.Server.PredictedTokens != len(r.Chunks) || r.Server.PromptTokens != 3) {
				t.Errorf("llamacpp server timing %+v for %d chunks", r.Server, len(r.Chunks))
			}
		}
		if stopped == 0 {
			t.Errorf("%s: no request of mean length 4 stopped before 40 tokens", ad.Name())
		}
	}
}

// /props and /info answer as llama.cpp and TGI do, naming the simulator.
func TestPropsAndInfo(t *testing.T) {
	s, hs := testServer(t, nil)
	get := func(path string, v any) {
		resp, err := http.Get(hs.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
	}
	var props struct {
		DefaultGenerationSettings struct {
			NCtx int `json:"n_ctx"`
		} `json:"default_generation_settings"`
		ModelPath string `json:"model_path"`
		BuildInfo string `json:"build_info"`
	}
	get("/props", &props)
	var info struct {
		ModelID        string `json:"model_id"`
		MaxTotalTokens int    `json:"max_total_tokens"`
		Version        string `json:"version"`
	}
	get("/info", &info)
	want := min(s.Config().MaxModelLen, s.KVCapacityTokens())
	if props.DefaultGenerationSettings.NCtx != want || props.ModelPath != "sim-test" || props.BuildInfo != EngineName ||
		info.ModelID != "sim-test" || info.MaxTotalTokens != want || info.Version != EngineName {
		t.Errorf("/props %+v, /info %+v, want context %d", props, info, want)
	}
}

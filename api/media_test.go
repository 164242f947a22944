package api

import (
	"encoding/json"
	"errors"
	"io"
	"testing"
)

// mediaBody is the JSON body an adapter builds for req.
func mediaBody(t *testing.T, a Adapter, req *Request) map[string]any {
	t.Helper()
	cl := &Client{Adapter: a, BaseURL: "http://127.0.0.1:1"}
	p := cl.Prepare(req)
	if p.err != nil {
		t.Fatalf("%s: %v", a.Name(), p.err)
	}
	b, err := io.ReadAll(p.http.Body)
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(b)) != p.BodyBytes() {
		t.Errorf("%s: BodyBytes %d, body %d", a.Name(), p.BodyBytes(), len(b))
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// at walks a decoded JSON value by keys and indices.
func at(t *testing.T, v any, path ...any) any {
	t.Helper()
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok {
				t.Fatalf("at %v: %T is no object", path, v)
			}
			v = m[k]
		case int:
			l, ok := v.([]any)
			if !ok || k >= len(l) {
				t.Fatalf("at %v: %T has no index %d", path, v, k)
			}
			v = l[k]
		}
	}
	return v
}

// TestMediaBodies: each protocol carries the media where its server
// reads them, with the last user message's text kept and the other
// messages as they were.
func TestMediaBodies(t *testing.T) {
	img := Media{Kind: KindImage, MIME: "image/png", Base64: "iVBORw0K", Width: 2, Height: 2}
	snd := Media{Kind: KindAudio, MIME: "audio/wav", Base64: "UklGRg=="}
	req := func(ms ...Media) *Request {
		return &Request{Model: "m", MaxTokens: 4, Media: ms, Messages: []Message{
			{Role: "system", Content: "be brief"}, {Role: "user", Content: "what is this?"}}}
	}
	b := mediaBody(t, OpenAI{Chat: true}, req(img, snd))
	if got := at(t, b, "messages", 0, "content"); got != "be brief" {
		t.Errorf("openai-chat: system content %v", got)
	}
	if at(t, b, "messages", 1, "content", 0, "text") != "what is this?" ||
		at(t, b, "messages", 1, "content", 1, "image_url", "url") != "data:image/png;base64,iVBORw0K" ||
		at(t, b, "messages", 1, "content", 2, "input_audio", "data") != "UklGRg==" ||
		at(t, b, "messages", 1, "content", 2, "input_audio", "format") != "wav" {
		t.Errorf("openai-chat body: %v", b["messages"])
	}
	b = mediaBody(t, Anthropic{}, req(img))
	if at(t, b, "system") != "be brief" || len(at(t, b, "messages").([]any)) != 1 ||
		at(t, b, "messages", 0, "content", 0, "source", "data") != "iVBORw0K" ||
		at(t, b, "messages", 0, "content", 0, "source", "media_type") != "image/png" ||
		at(t, b, "messages", 0, "content", 1, "text") != "what is this?" {
		t.Errorf("anthropic body: %v", b)
	}
	b = mediaBody(t, Ollama{Chat: true}, req(img, img))
	if at(t, b, "messages", 1, "images", 1) != "iVBORw0K" || at(t, b, "messages", 1, "content") != "what is this?" {
		t.Errorf("ollama-chat body: %v", b["messages"])
	}
	b = mediaBody(t, Ollama{}, req(img))
	if at(t, b, "images", 0) != "iVBORw0K" {
		t.Errorf("ollama-generate body: %v", b)
	}
	b = mediaBody(t, LlamaCpp{}, req(img, snd))
	if at(t, b, "prompt", "prompt_string") != "<__media__>\n<__media__>\nbe brief\nwhat is this?" ||
		at(t, b, "prompt", "multimodal_data", 1) != "UklGRg==" || at(t, b, "n_predict") != 4.0 {
		t.Errorf("llamacpp body: %v", b)
	}
	b = mediaBody(t, Responses{}, req(img))
	if at(t, b, "input", 1, "content", 1, "image_url") != "data:image/png;base64,iVBORw0K" {
		t.Errorf("openai-responses body: %v", b["input"])
	}
	// The user's own field (--extra) wins over the media's.
	r := req(img)
	r.Extra = map[string]any{"messages": "mine"}
	if b := mediaBody(t, OpenAI{Chat: true}, r); b["messages"] != "mine" {
		t.Errorf("Extra messages lost: %v", b["messages"])
	}
	if len(r.Extra) != 1 {
		t.Errorf("the request's Extra was changed: %v", r.Extra)
	}
}

// TestMediaRefused: a protocol that cannot carry a kind of media fails
// the request's preparation with ErrNoMedia, before anything is sent.
func TestMediaRefused(t *testing.T) {
	img := Media{Kind: KindImage, MIME: "image/png", Base64: "iVBORw0K"}
	snd := Media{Kind: KindAudio, MIME: "audio/wav", Base64: "UklGRg=="}
	for _, tc := range []struct {
		a Adapter
		m Media
	}{{OpenAI{}, img}, {TGI{}, img}, {Anthropic{}, snd}, {Ollama{Chat: true}, snd}, {Responses{}, snd}} {
		cl := &Client{Adapter: tc.a, BaseURL: "http://127.0.0.1:1"}
		p := cl.Prepare(&Request{Model: "m", Messages: []Message{{Role: "user", Content: "x"}}, Media: []Media{tc.m}})
		if !errors.Is(p.err, ErrNoMedia) || CarriesMedia(tc.a, tc.m.Kind) {
			t.Errorf("%s with %s: %v, want ErrNoMedia", tc.a.Name(), tc.m.Kind, p.err)
		}
	}
}

package api

import (
	"errors"
	"fmt"
	"maps"
	"strings"
	"time"
)

// Media kinds.
const (
	KindImage = "image"
	KindAudio = "audio"
)

// Media is an image or a sound that goes with a request's last user
// message, held in the form every protocol sends it: base64.
type Media struct {
	// Kind is KindImage or KindAudio; MIME its type ("image/png",
	// "image/jpeg", "audio/wav").
	Kind, MIME string
	// Base64 is the file's bytes, base64 (standard alphabet, padded);
	// Bytes their number before encoding.
	Base64 string
	Bytes  int
	// Width and Height are an image's pixels; Seconds a sound's length.
	Width, Height int
	Seconds       float64
	// Build is what making it cost the client (drawing and encoding a
	// synthetic image, reading a file).
	Build time.Duration
}

// DataURL is the media as a data: URL ("data:image/png;base64,…").
func (m *Media) DataURL() string { return "data:" + m.MIME + ";base64," + m.Base64 }

// audioFormat is the input_audio format of the media's MIME type.
func (m *Media) audioFormat() string {
	switch m.MIME {
	case "audio/mpeg", "audio/mp3":
		return "mp3"
	}
	return "wav"
}

// LlamaCppMediaMarker is where llama.cpp's /completion puts each image or
// sound of a prompt (its default marker; a server may be started with
// another, which GET /props names as media_marker).
const LlamaCppMediaMarker = "<__media__>"

// ErrNoMedia is the condition (wrapped) of a request with media sent
// through a protocol that cannot carry it.
var ErrNoMedia = errors.New("the API cannot carry this media")

// CarriesMedia reports whether the adapter's protocol can send media of
// kind in a request: images go as OpenAI chat's image_url parts, the
// Responses API's input_image, Anthropic's image blocks, Ollama's images
// and llama.cpp's multimodal_data; sounds as OpenAI chat's input_audio
// parts and llama.cpp's multimodal_data. Legacy completions and TGI's
// generate take text only.
func CarriesMedia(a Adapter, kind string) bool {
	switch a := a.(type) {
	case OpenAI:
		return a.Chat
	case Responses, Anthropic, Ollama:
		return kind == KindImage
	case LlamaCpp:
		return !a.ImageData || kind == KindImage
	}
	return false
}

// withMedia is req with its media placed in the protocol's own fields,
// through Extra (which overrides the adapter's defaults): the same
// messages, the last user message carrying the media. A request without
// media is returned as it is.
func withMedia(a Adapter, req *Request) (*Request, error) {
	if len(req.Media) == 0 {
		return req, nil
	}
	for _, m := range req.Media {
		if !CarriesMedia(a, m.Kind) {
			return nil, fmt.Errorf("%w: %s requests cannot carry %s", ErrNoMedia, a.Name(), m.Kind)
		}
	}
	out := *req
	out.Extra = maps.Clone(req.Extra)
	if out.Extra == nil {
		out.Extra = map[string]any{}
	}
	set := func(k string, v any) {
		if _, given := req.Extra[k]; !given { // the user's own field wins
			out.Extra[k] = v
		}
	}
	last := lastUser(req.Messages)
	switch a := a.(type) {
	case OpenAI:
		set("messages", partsMessages(req, last, openAIParts))
	case Responses:
		set("input", partsMessages(req, last, responsesParts))
	case Anthropic:
		msgs := make([]any, 0, len(req.Messages))
		for i, m := range req.Messages {
			switch {
			case m.Role == "system":
			case i == last:
				msgs = append(msgs, map[string]any{"role": m.Role, "content": anthropicParts(m.Content, req.Media)})
			default:
				msgs = append(msgs, m)
			}
		}
		set("messages", msgs)
	case Ollama:
		images := make([]string, len(req.Media))
		for i := range req.Media {
			images[i] = req.Media[i].Base64
		}
		if !a.Chat {
			set("images", images)
			break
		}
		msgs := make([]any, len(req.Messages))
		for i, m := range req.Messages {
			msgs[i] = m
			if i == last {
				msgs[i] = map[string]any{"role": m.Role, "content": m.Content, "images": images}
			}
		}
		set("messages", msgs)
	case LlamaCpp:
		if a.ImageData {
			// "[img-N]" in front of the text for image N, the images
			// beside the prompt with their ids.
			var prompt strings.Builder
			images := make([]any, len(req.Media))
			for i := range req.Media {
				fmt.Fprintf(&prompt, "[img-%d]\n", i+1)
				images[i] = map[string]any{"data": req.Media[i].Base64, "id": i + 1}
			}
			prompt.WriteString(req.Prompt())
			set("prompt", prompt.String())
			set("image_data", images)
			break
		}
		// One marker per file, in front of the text, and the files as raw
		// base64 (a data: URL is refused) inside the prompt object.
		data := make([]string, len(req.Media))
		for i := range req.Media {
			data[i] = req.Media[i].Base64
		}
		marker := a.MediaMarker
		if marker == "" {
			marker = LlamaCppMediaMarker
		}
		set("prompt", map[string]any{
			"prompt_string":   strings.Repeat(marker+"\n", len(req.Media)) + req.Prompt(),
			"multimodal_data": data,
		})
	}
	return &out, nil
}

// lastUser is the index of the last user message (the last message when
// none is the user's).
func lastUser(msgs []Message) int {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == "user" {
			return i
		}
	}
	return len(msgs) - 1
}

// partsMessages is req's messages with message last's content made of
// parts: its text, then each medium.
func partsMessages(req *Request, last int, parts func(string, []Media) []any) []any {
	msgs := make([]any, len(req.Messages))
	for i, m := range req.Messages {
		msgs[i] = m
		if i == last {
			msgs[i] = map[string]any{"role": m.Role, "content": parts(m.Content, req.Media)}
		}
	}
	return msgs
}

// openAIParts are OpenAI chat's content parts: text, image_url (a data
// URL) and input_audio (base64 with its format).
func openAIParts(text string, media []Media) []any {
	parts := []any{map[string]any{"type": "text", "text": text}}
	for i := range media {
		m := &media[i]
		if m.Kind == KindAudio {
			parts = append(parts, map[string]any{"type": "input_audio",
				"input_audio": map[string]any{"data": m.Base64, "format": m.audioFormat()}})
			continue
		}
		parts = append(parts, map[string]any{"type": "image_url", "image_url": map[string]any{"url": m.DataURL()}})
	}
	return parts
}

// responsesParts are the Responses API's input parts.
func responsesParts(text string, media []Media) []any {
	parts := []any{map[string]any{"type": "input_text", "text": text}}
	for i := range media {
		parts = append(parts, map[string]any{"type": "input_image", "image_url": media[i].DataURL()})
	}
	return parts
}

// anthropicParts are Anthropic's content blocks: the images first (as
// Anthropic advises), then the text.
func anthropicParts(text string, media []Media) []any {
	parts := make([]any, 0, len(media)+1)
	for i := range media {
		parts = append(parts, map[string]any{"type": "image",
			"source": map[string]any{"type": "base64", "media_type": media[i].MIME, "data": media[i].Base64}})
	}
	return append(parts, map[string]any{"type": "text", "text": text})
}

package metrics

import (
	"fmt"
	"strings"
)

// Text token sources of a request with media: what its media tokens are
// measured against.
const (
	// TextTwin: the server's count of a text-only twin of a request (the
	// same text, no media) told what its template adds to the text.
	TextTwin = "twin"
	// TextRequested: the text's count as the workload built it, without
	// what a chat template adds.
	TextRequested = "requested"
)

// MediaRecord is what a request's images and sounds were and cost. Tokens
// are the server's prompt tokens less TextTokens, the prompt's text alone
// as the server counts it (TextSource says how that is known); they are
// set when Counted (the server reported its prompt tokens).
type MediaRecord struct {
	Images int `json:"images,omitempty"`
	// ImageSize is the images' "WxH" when they are all of one size.
	ImageSize string  `json:"image_size,omitempty"`
	AudioS    float64 `json:"audio_s,omitempty"`
	// Bytes are the files' bytes; BodyBytes the whole request body's.
	Bytes     int64 `json:"bytes"`
	BodyBytes int64 `json:"body_bytes"`
	// BuildMs is the client's cost of the request before its send: making
	// or reading its media and encoding its body.
	BuildMs    float64 `json:"build_ms"`
	TextTokens int     `json:"text_tokens"`
	TextSource string  `json:"text_source"`
	Tokens     int     `json:"tokens"`
	Counted    bool    `json:"counted"`
}

// MediaStats are a level's media: how many images and seconds of sound
// its completed requests sent, the prompt tokens they cost as the server
// counted them (its prompt tokens less the text's: MediaRecord), per
// image or per second of sound when the requests carried one kind only,
// and what sending them cost the client.
type MediaStats struct {
	Requests     int     `json:"requests"`
	Images       int     `json:"images"`
	ImagesPerReq float64 `json:"images_per_request"`
	AudioS       float64 `json:"audio_s"`
	Tokens       int     `json:"tokens"`
	TokensPerReq float64 `json:"tokens_per_request"`
	TokensPerImg float64 `json:"tokens_per_image,omitempty"`
	TokensPerSec float64 `json:"tokens_per_audio_s,omitempty"`
	Counted      int     `json:"counted"`
	TextSource   string  `json:"text_source"`
	BytesPerReq  float64 `json:"bytes_per_request"`
	BodyBytes    Stats   `json:"body_bytes"`
	BuildMs      Stats   `json:"build_ms"`
	// ImageSize is the images' "WxH" when all of the level's are of one size.
	ImageSize string `json:"image_size,omitempty"`
}

// mediaAcc accumulates a level's media.
type mediaAcc struct {
	st          MediaStats
	bytes       int64
	body, build Sample
	sizes       map[string]bool
}

func (a *mediaAcc) add(r *Record) {
	m := r.Media
	if m == nil {
		return
	}
	st := &a.st
	st.Requests++
	st.Images += m.Images
	st.AudioS += m.AudioS
	a.bytes += m.Bytes
	a.body.Add(float64(m.BodyBytes))
	a.build.Add(m.BuildMs)
	if st.TextSource == "" || st.TextSource == m.TextSource {
		st.TextSource = m.TextSource
	} else {
		st.TextSource = SourceMixed
	}
	if m.Images > 0 {
		if a.sizes == nil {
			a.sizes = map[string]bool{}
		}
		a.sizes[m.ImageSize] = true // "" when a request's sizes differ
	}
	if m.Counted {
		st.Counted++
		st.Tokens += m.Tokens
	}
}

// apply puts the level's media figures in lv, nil when it sent none. The
// prompt tokens the media cost are taken out of the template's share.
func (a *mediaAcc) apply(lv *Level) {
	st := a.st
	if st.Requests == 0 {
		return
	}
	st.ImagesPerReq = float64(st.Images) / float64(st.Requests)
	st.BytesPerReq = float64(a.bytes) / float64(st.Requests)
	st.BodyBytes, st.BuildMs = a.body.Stats(), a.build.Stats()
	if len(a.sizes) == 1 {
		for s := range a.sizes {
			st.ImageSize = s
		}
	}
	if st.Counted > 0 {
		st.TokensPerReq = float64(st.Tokens) / float64(st.Counted)
		switch {
		case st.Images > 0 && st.AudioS == 0:
			st.TokensPerImg = st.TokensPerReq / st.ImagesPerReq
		case st.Images == 0 && st.AudioS > 0:
			st.TokensPerSec = st.TokensPerReq / (st.AudioS / float64(st.Requests))
		}
	}
	lv.Media = &st
	if lv.Requests.Completed > 0 && lv.InputTokensRequested > 0 {
		lv.TemplateTokensPerRequest = max(0, float64(lv.InputTokens-lv.InputTokensRequested-st.Tokens)/float64(lv.Requests.Completed))
	}
	lv.Notes = append(lv.Notes, st.Note())
}

// Note is the level's media in one line, for the table and the report.
func (st *MediaStats) Note() string {
	var what []string
	if st.Images > 0 {
		img := fmt.Sprintf("%.3g images a request", st.ImagesPerReq)
		if st.ImagesPerReq == 1 {
			img = "1 image a request"
		}
		if st.ImageSize != "" {
			img += " of " + st.ImageSize
		}
		what = append(what, img)
	}
	if st.AudioS > 0 {
		what = append(what, fmt.Sprintf("%.3g s of sound a request", st.AudioS/float64(st.Requests)))
	}
	s := "media: " + strings.Join(what, " and ")
	switch {
	case st.Counted == 0:
		s += ", their tokens unknown (the server reported no prompt tokens)"
	case st.TokensPerImg > 0:
		s += fmt.Sprintf(", %.1f tokens an image", st.TokensPerImg)
	case st.TokensPerSec > 0:
		s += fmt.Sprintf(", %.1f tokens a second of sound", st.TokensPerSec)
	default:
		s += fmt.Sprintf(", %.1f tokens a request", st.TokensPerReq)
	}
	if st.Counted > 0 {
		s += " (server's prompt tokens less the text's"
		if st.TextSource == TextTwin {
			s += ", counted by a text-only twin"
		}
		s += ")"
	}
	if st.BodyBytes.Max > 0 { // a request that went over the wire
		s += fmt.Sprintf("; body %s a request (p50), built in %.1f ms (p50)", humanBytes(st.BodyBytes.P50), st.BuildMs.P50)
	}
	return s
}

// humanBytes is a byte count in B, kB or MB (decimal).
func humanBytes(b float64) string {
	switch {
	case b >= 1e6:
		return fmt.Sprintf("%.2f MB", b/1e6)
	case b >= 1e3:
		return fmt.Sprintf("%.1f kB", b/1e3)
	}
	return fmt.Sprintf("%.0f B", b)
}

// MediaCost is what a request's media add to its TTFT on an idle server,
// measured before the first level with media by Pairs requests with media
// and as many text-only requests of the same text length (other texts, so
// no prefix cache serves one from the other), one at a time, each for one
// output token. The figures are medians; the costs are the media's medians
// less the text's. Server* are the server's own prompt times for the same
// requests (llama.cpp's prompt_ms, Ollama's prompt_eval_duration), where
// it reports them for both: its share of the cost — encoding the media and
// prefilling their tokens — without the network's and the client's.
type MediaCost struct {
	Pairs            int     `json:"pairs"`
	ImagesPerRequest float64 `json:"images_per_request,omitempty"`
	ImageSize        string  `json:"image_size,omitempty"`
	AudioSPerRequest float64 `json:"audio_s_per_request,omitempty"`
	// Tokens are the media's prompt tokens a request as the server counted
	// them (0 when it reported none).
	Tokens          float64 `json:"tokens,omitempty"`
	TTFTMediaMs     float64 `json:"ttft_media_ms"`
	TTFTTextMs      float64 `json:"ttft_text_ms"`
	TTFTCostMs      float64 `json:"ttft_cost_ms"`
	TTFTCostImageMs float64 `json:"ttft_cost_per_image_ms,omitempty"`
	TTFTCostAudioMs float64 `json:"ttft_cost_per_audio_s_ms,omitempty"`
	ServerMediaMs   float64 `json:"server_prompt_media_ms,omitempty"`
	ServerTextMs    float64 `json:"server_prompt_text_ms,omitempty"`
	ServerCostMs    float64 `json:"server_cost_ms,omitempty"`
	// ServerCostImageMs is ServerCostMs an image (requests with images
	// only).
	ServerCostImageMs float64 `json:"server_cost_per_image_ms,omitempty"`
}

// Note is the cost in one line, for a level's notes.
func (c *MediaCost) Note() string {
	s := fmt.Sprintf("media at idle: TTFT %.1f ms with them, %.1f ms without (median of %d each): +%.1f ms", c.TTFTMediaMs, c.TTFTTextMs, c.Pairs, c.TTFTCostMs)
	switch {
	case c.TTFTCostImageMs != 0:
		s += fmt.Sprintf(", %.1f ms an image", c.TTFTCostImageMs)
	case c.TTFTCostAudioMs != 0:
		s += fmt.Sprintf(", %.1f ms a second of sound", c.TTFTCostAudioMs)
	}
	if c.ServerMediaMs > 0 {
		s += fmt.Sprintf("; the server's prompt time +%.1f ms", c.ServerCostMs)
		if c.ServerCostImageMs != 0 {
			s += fmt.Sprintf(" (%.1f ms an image)", c.ServerCostImageMs)
		}
	}
	return s
}

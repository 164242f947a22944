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

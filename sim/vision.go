package sim

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strings"
	"time"

	"github.com/tokbench/tokbench/media"
	"github.com/tokbench/tokbench/metrics"
	"github.com/tokbench/tokbench/physics"
)

// The simulator serves a vision-and-audio model as Qwen2-VL and
// Qwen2-Audio do. Each image or sound becomes prompt tokens, which the
// engine prefills with the text's; before that an encoder turns it into
// those tokens, which takes the encoder's FLOPs at the deployment's
// prefill rate.
//
// Images (Qwen2-VL, arXiv:2409.12191 §2.1, and its processor's
// smart_resize): the image is resized to multiples of 28 pixels (14×14
// patches, merged 2×2 by the projector), within 56×56 and 12,845,056
// pixels (the processor's min_pixels and max_pixels), so a W×H image is
// (W/28)×(H/28) tokens, plus <|vision_start|> and <|vision_end|>. The
// encoder is a ViT of 675M parameters, 32 layers of width 1280, with
// full attention over the patches: 2×675M FLOPs a patch, and 4×n²×1280
// a layer for n patches (QKᵀ and AV).
//
// Audio (Qwen2-Audio, arXiv:2407.10759 §2): Whisper-large-v3's encoder
// turns 16 kHz sound into 50 frames a second, pooled by 2 to 25 tokens a
// second (40 ms each), plus <|audio_bos|> and <|audio_eos|>. Whisper
// encodes 30-second windows of 1,500 frames whatever the sound's length
// (the last one padded): 2×635M FLOPs a frame and 4×1500²×1280 a layer
// of 32 for each window.
const (
	imagePatch       = 14
	imageMerge       = 2
	imageMinPixels   = 56 * 56
	imageMaxPixels   = 12845056
	imageExtraTokens = 2
	vitParams        = 675e6
	vitLayers        = 32
	vitWidth         = 1280

	audioTokensPerSec = 25
	audioExtraTokens  = 2
	whisperParams     = 635e6
	whisperLayers     = 32
	whisperWidth      = 1280
	whisperWindowSec  = 30
	whisperFrames     = 1500 // a window's frames
)

// ImageTokens is the prompt tokens a w×h image costs (Qwen2-VL).
func ImageTokens(w, h int) int {
	gw, gh := imageGrid(w, h)
	return gw*gh + imageExtraTokens
}

// imageGrid is the image's token grid after smart_resize.
func imageGrid(w, h int) (gw, gh int) {
	const f = imagePatch * imageMerge
	round := func(x float64) float64 { return math.Max(f, math.Round(x/f)*f) }
	hb, wb := round(float64(h)), round(float64(w))
	switch px := float64(w) * float64(h); {
	case hb*wb > imageMaxPixels:
		beta := math.Sqrt(px / imageMaxPixels)
		hb, wb = math.Max(f, math.Floor(float64(h)/beta/f)*f), math.Max(f, math.Floor(float64(w)/beta/f)*f)
	case hb*wb < imageMinPixels:
		beta := math.Sqrt(imageMinPixels / px)
		hb, wb = math.Ceil(float64(h)*beta/f)*f, math.Ceil(float64(w)*beta/f)*f
	}
	return int(wb) / f, int(hb) / f
}

// ImageEncoderFLOPs is the vision encoder's work on a w×h image.
func ImageEncoderFLOPs(w, h int) float64 {
	gw, gh := imageGrid(w, h)
	n := float64(gw * gh * imageMerge * imageMerge) // patches
	return 2*vitParams*n + vitLayers*4*n*n*vitWidth
}

// AudioTokens is the prompt tokens a sound of seconds costs (Qwen2-Audio).
func AudioTokens(seconds float64) int {
	return int(math.Ceil(seconds*audioTokensPerSec)) + audioExtraTokens
}

// AudioEncoderFLOPs is the audio encoder's work on a sound of seconds.
func AudioEncoderFLOPs(seconds float64) float64 {
	windows := math.Max(1, math.Ceil(seconds/whisperWindowSec))
	return windows * (2*whisperParams*whisperFrames + whisperLayers*4*whisperFrames*whisperFrames*whisperWidth)
}

// Media is what the images and sounds of one request cost: the prompt
// tokens they add and the encoder's FLOPs.
type Media struct {
	Images, Sounds int
	Tokens         int
	EncoderFLOPs   float64
}

// add counts one image or sound, read from its file's bytes.
func (m *Media) add(raw []byte) error {
	info, err := media.Describe(raw)
	if err != nil {
		return err
	}
	if info.Seconds > 0 || info.Width == 0 {
		m.Sounds++
		m.Tokens += AudioTokens(info.Seconds)
		m.EncoderFLOPs += AudioEncoderFLOPs(info.Seconds)
		return nil
	}
	if int64(info.Width)*int64(info.Height) > media.MaxPixels {
		return fmt.Errorf("an image of %d×%d pixels, more than %d", info.Width, info.Height, media.MaxPixels)
	}
	m.Images++
	m.Tokens += ImageTokens(info.Width, info.Height)
	m.EncoderFLOPs += ImageEncoderFLOPs(info.Width, info.Height)
	return nil
}

// addBase64 counts a file given as base64 or as a data: URL.
func (m *Media) addBase64(s, field string) error {
	if rest, ok := strings.CutPrefix(s, "data:"); ok {
		meta, data, ok := strings.Cut(rest, ",")
		if !ok || !strings.HasSuffix(meta, ";base64") {
			return badRequest("%s: want a base64 data: URL", field)
		}
		s = data
	} else if strings.HasPrefix(s, "http://") || strings.HasPrefix(s, "https://") {
		return badRequest("%s: the simulator fetches no URLs; send the file as a data: URL", field)
	}
	raw, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return badRequest("%s: invalid base64: %v", field, err)
	}
	if err := m.add(raw); err != nil {
		return badRequest("%s: %v", field, err)
	}
	return nil
}

// EncoderTime is how long the encoders take on a request's media on a
// deployment of hardware × gpus: their FLOPs at its prefill MFU of the
// BF16 peak (the encoders run in BF16, split over the GPUs as the model
// is). An unknown hardware takes the default preset's.
func EncoderTime(flops float64, hardware string, gpus int) time.Duration {
	h, err := physics.LookupHardware(hardware)
	if err != nil || h.BF16FLOPS <= 0 {
		h, _ = physics.LookupHardware(DefaultHardware)
	}
	return EncoderTimeOn(h, gpus, flops)
}

// EncoderTimeOn is EncoderTime on hardware h.
func EncoderTimeOn(h physics.Hardware, gpus int, flops float64) time.Duration {
	if flops <= 0 || h.BF16FLOPS <= 0 {
		return 0
	}
	mfu := h.Efficiency().MFUPrefill
	if mfu <= 0 {
		mfu = 0.4
	}
	rate := h.BF16FLOPS * mfu * float64(max(gpus, 1))
	return time.Duration(flops / rate * float64(time.Second))
}

// addAll counts files given as base64 or data: URLs (Ollama's images).
func (m *Media) addAll(files []string, field string) error {
	for i, f := range files {
		if err := m.addBase64(f, fmt.Sprintf("%s[%d]", field, i)); err != nil {
			return err
		}
	}
	return nil
}

// contentPart is one part of a message's content in any protocol the
// simulator speaks: OpenAI chat's text, image_url and input_audio, the
// Responses API's input_text and input_image, Anthropic's text and image
// (a base64 source).
type contentPart struct {
	Type       string          `json:"type"`
	Text       string          `json:"text"`
	ImageURL   json.RawMessage `json:"image_url"`
	InputAudio *struct {
		Data string `json:"data"`
	} `json:"input_audio"`
	Source *struct {
		Type string `json:"type"`
		Data string `json:"data"`
	} `json:"source"`
}

// countParts counts the text tokens of content parts and adds their media
// to m.
func countParts(raw json.RawMessage, field string, m *Media) (int, error) {
	var parts []contentPart
	if err := json.Unmarshal(raw, &parts); err != nil {
		return 0, badRequest("%s: want a string or an array of content parts", field)
	}
	n := 0
	for i, p := range parts {
		where := fmt.Sprintf("%s[%d]", field, i)
		switch p.Type {
		case "image_url", "input_image":
			var url struct {
				URL string `json:"url"`
			}
			if err := json.Unmarshal(p.ImageURL, &url.URL); err != nil {
				if err := json.Unmarshal(p.ImageURL, &url); err != nil || url.URL == "" {
					return 0, badRequest("%s.image_url: want {\"url\": \"data:…\"}", where)
				}
			}
			if err := m.addBase64(url.URL, where+".image_url"); err != nil {
				return 0, err
			}
		case "input_audio":
			if p.InputAudio == nil || p.InputAudio.Data == "" {
				return 0, badRequest("%s.input_audio: want {\"data\": base64, \"format\": \"wav\"}", where)
			}
			if err := m.addBase64(p.InputAudio.Data, where+".input_audio.data"); err != nil {
				return 0, err
			}
		case "image":
			if p.Source == nil || p.Source.Type != "base64" {
				return 0, badRequest("%s.source: want {\"type\": \"base64\", \"media_type\": …, \"data\": …}", where)
			}
			if err := m.addBase64(p.Source.Data, where+".source.data"); err != nil {
				return 0, err
			}
		default:
			n += PromptTokens(p.Text)
		}
	}
	return n, nil
}

// llamaPrompt reads llama.cpp's multimodal prompt object:
// {"prompt_string": "<__media__> …", "multimodal_data": [base64, …]}, one
// marker for each file. It returns the text's tokens, the markers left
// out, and adds the files to m.
func (m *Media) llamaPrompt(raw json.RawMessage) (int, error) {
	var p struct {
		PromptString   *string  `json:"prompt_string"`
		MultimodalData []string `json:"multimodal_data"`
	}
	if err := json.Unmarshal(raw, &p); err != nil || p.PromptString == nil {
		return 0, badRequest(`prompt: want a string, or {"prompt_string": …, "multimodal_data": […]}`)
	}
	const marker = "<__media__>"
	if k := strings.Count(*p.PromptString, marker); k != len(p.MultimodalData) {
		return 0, badRequest("prompt: %d %s markers for %d files of multimodal_data", k, marker, len(p.MultimodalData))
	}
	if err := m.addAll(p.MultimodalData, "prompt.multimodal_data"); err != nil {
		return 0, err
	}
	return max(PromptTokens(strings.ReplaceAll(*p.PromptString, marker, "")), 1), nil
}

// encode waits, before a request with media enters the engine, for its
// encoders to turn them into tokens (EncoderTime): the encoders are
// modelled as running beside the engine's steps, not inside them. It
// reports false when the client went away meanwhile.
func (s *Server) encode(r *http.Request, m *Media) bool {
	d := EncoderTime(m.EncoderFLOPs, s.cfg.Hardware, s.cfg.GPUs)
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-r.Context().Done():
		return false
	}
}

// MediaLoad is the media every request of a simulated curve carries:
// Images images of Width×Height and AudioSeconds of sound, encoded on
// Hardware × GPUs (catalog names; empty: the default preset's).
type MediaLoad struct {
	Images, Width, Height int
	AudioSeconds          float64
	Hardware              string
	GPUs                  int
}

// String says what the media are: "2 images of 1024x1024".
func (m MediaLoad) String() string {
	var parts []string
	if m.Images > 0 {
		what := "images"
		if m.Images == 1 {
			what = "image"
		}
		parts = append(parts, fmt.Sprintf("%d %s of %dx%d", m.Images, what, m.Width, m.Height))
	}
	if m.AudioSeconds > 0 {
		parts = append(parts, fmt.Sprintf("%g s of sound", m.AudioSeconds))
	}
	return strings.Join(parts, " and ")
}

// Cost is what one request's media cost.
func (m MediaLoad) Cost() Media {
	var c Media
	if m.Images > 0 && m.Width > 0 && m.Height > 0 {
		c.Images = m.Images
		c.Tokens += m.Images * ImageTokens(m.Width, m.Height)
		c.EncoderFLOPs += float64(m.Images) * ImageEncoderFLOPs(m.Width, m.Height)
	}
	if m.AudioSeconds > 0 {
		c.Sounds = 1
		c.Tokens += AudioTokens(m.AudioSeconds)
		c.EncoderFLOPs += AudioEncoderFLOPs(m.AudioSeconds)
	}
	return c
}

// mark gives the records of a curve with media their media, the prompt's
// text being text tokens.
func (m MediaLoad) mark(recs []metrics.Record, text int) []metrics.Record {
	c := m.Cost()
	if c.Tokens == 0 {
		return recs
	}
	for i := range recs {
		r := &recs[i]
		r.InputTokensRequested = text
		mr := &metrics.MediaRecord{Images: c.Images, TextTokens: text, TextSource: metrics.TextRequested,
			Tokens: c.Tokens, Counted: r.OK}
		if c.Images > 0 {
			mr.ImageSize = fmt.Sprintf("%dx%d", m.Width, m.Height)
		}
		if c.Sounds > 0 {
			mr.AudioS = m.AudioSeconds
		}
		r.Media = mr
	}
	return recs
}

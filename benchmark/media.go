package benchmark

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/tokbench/tokbench/api"
	"github.com/tokbench/tokbench/load"
	"github.com/tokbench/tokbench/media"
	"github.com/tokbench/tokbench/metrics"
)

// MaxImagesPerRequest bounds Workload.Media.Images.
const MaxImagesPerRequest = 64

// checkMedia refuses, before any request, synthetic media that cannot be
// made and media the protocol cannot carry (naming Workload.Media's
// field, or Workload.Rows for its rows' files).
func (r *run) checkMedia() error {
	m := r.p.Workload.Media
	switch {
	case m.Images < 0 || m.Images > MaxImagesPerRequest:
		return fieldErrorf("Workload.Media.Images", "want 0 to %d images a request, got %d", MaxImagesPerRequest, m.Images)
	case m.Images > 0 && (m.Width < 1 || m.Height < 1 || int64(m.Width)*int64(m.Height) > media.MaxPixels):
		return fieldErrorf("Workload.Media.Images", "images of %dx%d: want 1 to %d pixels", m.Width, m.Height, media.MaxPixels)
	case m.Images > 0 && m.Format != "png" && m.Format != "jpeg":
		return fieldErrorf("Workload.Media.Format", "want png or jpeg, got %q", m.Format)
	case !(m.AudioSeconds >= 0) || m.AudioSeconds > media.MaxAudioSeconds:
		return fieldErrorf("Workload.Media.AudioSeconds", "want 0 to %d seconds, got %g", media.MaxAudioSeconds, m.AudioSeconds)
	}
	if err := r.llamaCppMedia(); err != nil {
		return err
	}
	wl := r.p.Workload
	kinds := map[string]string{} // kind → the field that asks for it
	if wl.Media.Images > 0 {
		kinds[api.KindImage] = "Workload.Media.Images"
	}
	if wl.Media.AudioSeconds > 0 {
		kinds[api.KindAudio] = "Workload.Media.AudioSeconds"
	}
	for _, row := range wl.Rows {
		for _, m := range row.Media {
			if _, ok := kinds[m.Kind]; !ok {
				kinds[m.Kind] = "Workload.Rows"
			}
		}
	}
	for _, kind := range []string{api.KindImage, api.KindAudio} {
		field, ok := kinds[kind]
		if !ok || api.CarriesMedia(r.adapter, kind) {
			continue
		}
		var can []string
		for _, name := range api.Names {
			if a, err := api.ByName(name); err == nil && api.CarriesMedia(a, kind) && name != "ollama" {
				can = append(can, name)
			}
		}
		if lc, ok := r.adapter.(api.LlamaCpp); ok && lc.ImageData {
			return fieldErrorf(field, "llama.cpp's %s form carries images only, not %s (its %s form carries both; --llamacpp-media picks the form)",
				api.LlamaCppImageData, kind, api.LlamaCppMultimodalData)
		}
		return fieldErrorf(field, "the %s API cannot carry %s in a request (%s can)", r.adapter.Name(), kind, strings.Join(can, ", "))
	}
	return nil
}

// mediaPairs is how many requests with media, and text-only ones, measure
// what the media add to TTFT at idle (metrics.MediaCost).
const mediaPairs = 3

// CheckLlamaCppMedia refuses a LlamaCppMedia that is not a form, or one
// given for an API other than llamacpp (or auto).
func CheckLlamaCppMedia(apiName, form string) error {
	switch {
	case form != "" && form != api.LlamaCppMultimodalData && form != api.LlamaCppImageData:
		return fieldErrorf("LlamaCppMedia", "unknown %q (known: %s, %s)", form, api.LlamaCppMultimodalData, api.LlamaCppImageData)
	case form != "" && apiName != "llamacpp" && apiName != "auto":
		return fieldErrorf("LlamaCppMedia", "applies to --api llamacpp, not %s", apiName)
	}
	return nil
}

// llamaCppMedia sets how a llama.cpp adapter sends media: in the form
// asked for, else the one the server's GET /props points to, with the
// server's own media marker.
func (r *run) llamaCppMedia() error {
	lc, ok := r.adapter.(api.LlamaCpp)
	if !ok {
		return CheckLlamaCppMedia(r.adapter.Name(), r.p.LlamaCppMedia)
	}
	if err := CheckLlamaCppMedia(lc.Name(), r.p.LlamaCppMedia); err != nil {
		return err
	}
	form := r.p.LlamaCppMedia
	if r.detected != nil {
		lc.MediaMarker = r.detected.Facts["media_marker"] // the server's own
		if form == "" {
			form = r.detected.Facts["media_form"]
		}
	}
	lc.ImageData = form == api.LlamaCppImageData
	r.adapter = lc
	return nil
}

// twin measures, once a run, what the server's prompt count adds to a
// request's text, so that the tokens of the media are the prompt's less
// the text's as the server counts it: a text-only twin of a request (its
// text, no media, one output token) is sent before the first level with
// media, and the server's prompt tokens for it less the text's requested
// count are its template's. The twin is a warm-up variant, so no level's
// request finds its text in the server's cache. Then mediaCost measures
// what the media add to TTFT.
func (r *run) twin(ctx context.Context, runner *load.Runner, src load.Source) {
	if r.twinDone {
		return
	}
	warm := load.Warmups(src, 0)
	req, inTok := warm.Request(1 << 20)
	if len(req.Media) == 0 {
		return
	}
	r.twinDone = true
	resp := runner.Client.Do(ctx, textOnly(req))
	if resp.Failed() || resp.Usage == nil || resp.Usage.PromptTokens <= 0 || inTok <= 0 {
		why := "it reported no prompt tokens"
		if resp.Failed() {
			why = "it failed: " + resp.Error
		}
		r.notice("media: the text-only twin request told nothing (%s); media tokens are the prompt's less the text's requested count, the template's tokens included", why)
		runner.MediaText = load.MediaText{Source: metrics.TextRequested}
	} else {
		runner.MediaText = load.MediaText{TemplateTokens: resp.Usage.PromptTokens - inTok, Source: metrics.TextTwin}
	}
	r.mediaCost = r.measureMediaCost(ctx, runner, warm, 1<<20+1)
}

// textOnly is req for one output token, without its media.
func textOnly(req *api.Request) *api.Request {
	t := oneToken(req)
	t.Media = nil
	return t
}

// oneToken is req asking for one output token.
func oneToken(req *api.Request) *api.Request {
	t := *req
	t.MaxTokens = 1
	if _, ok := t.Extra["min_tokens"]; ok { // it may not pass max_tokens
		t.Extra = maps.Clone(t.Extra)
		delete(t.Extra, "min_tokens")
	}
	return &t
}

// measureMediaCost sends mediaPairs requests with media and as many
// text-only ones, the warm-up variants from first on (each text-only one
// another variant's text, so that no prefix cache serves it from a
// request with media), alternating which of a pair goes first, one at a
// time: what the media add to TTFT at idle, and to the server's prompt
// time where it reports one. Nil when no pair completed.
func (r *run) measureMediaCost(ctx context.Context, runner *load.Runner, warm load.Source, first int) *metrics.MediaCost {
	var ttft, server [2][]float64 // [0] with media, [1] text only
	var tokens []float64
	c := &metrics.MediaCost{}
	for k := range mediaPairs {
		withMedia, inTok := warm.Request(first + k)
		text, _ := warm.Request(first + mediaPairs + k)
		if k == 0 {
			for _, m := range withMedia.Media {
				switch m.Kind {
				case api.KindImage:
					c.ImagesPerRequest++
					if c.ImageSize == "" || c.ImageSize == fmt.Sprintf("%dx%d", m.Width, m.Height) {
						c.ImageSize = fmt.Sprintf("%dx%d", m.Width, m.Height)
					} else {
						c.ImageSize = "mixed"
					}
				case api.KindAudio:
					c.AudioSPerRequest += m.Seconds
				}
			}
		}
		reqs := [2]*api.Request{oneToken(withMedia), textOnly(text)}
		for j := range 2 {
			i := (j + k) % 2 // alternate which goes first
			if ctx.Err() != nil {
				return nil
			}
			resp := runner.Client.Do(ctx, reqs[i])
			if resp.Failed() || len(resp.Chunks) == 0 {
				continue
			}
			ttft[i] = append(ttft[i], ms(resp.Chunks[0].At.Sub(resp.Start)))
			if s := resp.Server; s != nil && s.PromptMs > 0 {
				server[i] = append(server[i], s.PromptMs)
			}
			if u := resp.Usage; i == 0 && u != nil && u.PromptTokens > 0 {
				tokens = append(tokens, float64(u.PromptTokens-inTok-runner.MediaText.TemplateTokens))
			}
		}
	}
	if len(ttft[0]) == 0 || len(ttft[1]) == 0 {
		r.notice("media: no request with media and text-only one both completed at idle; what the media add to TTFT is unknown")
		return nil
	}
	if c.ImageSize == "mixed" {
		c.ImageSize = ""
	}
	c.Pairs = min(len(ttft[0]), len(ttft[1]))
	c.TTFTMediaMs, c.TTFTTextMs = medianOf(ttft[0]), medianOf(ttft[1])
	c.TTFTCostMs = c.TTFTMediaMs - c.TTFTTextMs
	if len(server[0]) > 0 && len(server[1]) > 0 {
		c.ServerMediaMs, c.ServerTextMs = medianOf(server[0]), medianOf(server[1])
		c.ServerCostMs = c.ServerMediaMs - c.ServerTextMs
	}
	if len(tokens) > 0 {
		c.Tokens = medianOf(tokens)
	}
	switch {
	case c.ImagesPerRequest > 0 && c.AudioSPerRequest == 0:
		c.TTFTCostImageMs = c.TTFTCostMs / c.ImagesPerRequest
		if c.ServerMediaMs > 0 {
			c.ServerCostImageMs = c.ServerCostMs / c.ImagesPerRequest
		}
	case c.ImagesPerRequest == 0 && c.AudioSPerRequest > 0:
		c.TTFTCostAudioMs = c.TTFTCostMs / c.AudioSPerRequest
	}
	return c
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func medianOf(v []float64) float64 { return metrics.Percentile(slices.Sorted(slices.Values(v)), 50) }

// mediaMeta is run.json's like-for-like account of what requests carry
// beside their prompts (compare names runs that differ in it as not like
// for like, and a run without a key as one whose requests carried none):
// "images" ("2 × 1024x1024 png"), "audio_seconds", and an embeddings
// request's "embed_inputs".
func mediaMeta(wl Workload) map[string]string {
	out := map[string]string{}
	if wl.EmbedInputs > 0 {
		out["embed_inputs"] = fmt.Sprint(wl.EmbedInputs)
	}
	m := wl.Media
	if m.Images > 0 {
		out["images"] = fmt.Sprintf("%d × %dx%d %s", m.Images, m.Width, m.Height, m.Format)
	}
	if m.AudioSeconds > 0 {
		out["audio_seconds"] = fmt.Sprint(m.AudioSeconds)
	}
	return out
}

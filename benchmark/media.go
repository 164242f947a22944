package benchmark

import (
	"context"
	"fmt"
	"maps"
	"strings"

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
// request finds its text in the server's cache.
func (r *run) twin(ctx context.Context, runner *load.Runner, src load.Source) {
	if r.twinDone {
		return
	}
	req, inTok := load.Warmups(src, 0).Request(1 << 20)
	if len(req.Media) == 0 {
		return
	}
	r.twinDone = true
	t := *req
	t.Media, t.MaxTokens = nil, 1
	if _, ok := t.Extra["min_tokens"]; ok { // it may not pass max_tokens
		t.Extra = maps.Clone(t.Extra)
		delete(t.Extra, "min_tokens")
	}
	resp := runner.Client.Do(ctx, &t)
	if resp.Failed() || resp.Usage == nil || resp.Usage.PromptTokens <= 0 || inTok <= 0 {
		why := "it reported no prompt tokens"
		if resp.Failed() {
			why = "it failed: " + resp.Error
		}
		r.notice("media: the text-only twin request told nothing (%s); media tokens are the prompt's less the text's requested count, the template's tokens included", why)
		runner.MediaText = load.MediaText{Source: metrics.TextRequested}
		return
	}
	runner.MediaText = load.MediaText{TemplateTokens: resp.Usage.PromptTokens - inTok, Source: metrics.TextTwin}
}

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

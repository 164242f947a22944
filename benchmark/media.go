package benchmark

import (
	"context"
	"fmt"
	"strings"

	"github.com/tokbench/tokbench/api"
	"github.com/tokbench/tokbench/load"
	"github.com/tokbench/tokbench/media"
	"github.com/tokbench/tokbench/metrics"
	"github.com/tokbench/tokbench/workload"
)

// MediaOptions are the synthetic media every request carries, as the
// bench flags give them: Images images (--images) of ImageSize
// (--image-size, "WxH") in ImageFormat (--image-format, png or jpeg), and
// AudioSeconds of speech-like sound (--audio-seconds).
type MediaOptions struct {
	Images       int
	ImageSize    string
	ImageFormat  string
	AudioSeconds float64
}

// MaxImagesPerRequest bounds --images.
const MaxImagesPerRequest = 64

// ParseMedia checks the media options; its errors are InputErrors naming
// the flag.
func ParseMedia(o MediaOptions) (workload.MediaSpec, error) {
	spec := workload.MediaSpec{Images: o.Images, Format: strings.ToLower(strings.TrimSpace(o.ImageFormat)), AudioSeconds: o.AudioSeconds}
	switch {
	case o.Images < 0 || o.Images > MaxImagesPerRequest:
		return spec, inputErrorf("--images: want 0 to %d images a request, got %d", MaxImagesPerRequest, o.Images)
	case !(o.AudioSeconds >= 0) || o.AudioSeconds > media.MaxAudioSeconds:
		return spec, inputErrorf("--audio-seconds: want 0 to %d seconds, got %g", media.MaxAudioSeconds, o.AudioSeconds)
	}
	if spec.Format == "" {
		spec.Format = "png"
	}
	if spec.Format == "jpg" {
		spec.Format = "jpeg"
	}
	if spec.Format != "png" && spec.Format != "jpeg" {
		return spec, inputErrorf("--image-format: want png or jpeg, got %q", o.ImageFormat)
	}
	size := o.ImageSize
	if size == "" {
		size = "512x512"
	}
	var err error
	if spec.Width, spec.Height, err = workload.ParseImageSize(size); err != nil {
		return spec, inputErrorf("--image-size: %v", err)
	}
	return spec, nil
}

// checkMedia refuses, before any request, media the protocol cannot
// carry: the synthetic media's flag, or --dataset for its rows' files.
func (r *run) checkMedia() error {
	if lc, ok := r.adapter.(api.LlamaCpp); ok && r.detected != nil && r.detected.Facts["media_marker"] != "" {
		lc.MediaMarker = r.detected.Facts["media_marker"] // the server's own
		r.adapter = lc
	}
	wl := r.p.Workload
	kinds := map[string]string{} // kind → the flag that asks for it
	if wl.Media.Images > 0 {
		kinds[api.KindImage] = "--images"
	}
	if wl.Media.AudioSeconds > 0 {
		kinds[api.KindAudio] = "--audio-seconds"
	}
	for _, row := range wl.Rows {
		for _, m := range row.Media {
			if _, ok := kinds[m.Kind]; !ok {
				kinds[m.Kind] = "--dataset"
			}
		}
	}
	for _, kind := range []string{api.KindImage, api.KindAudio} {
		flag, ok := kinds[kind]
		if !ok || api.CarriesMedia(r.adapter, kind) {
			continue
		}
		var can []string
		for _, name := range api.Names {
			if a, err := api.ByName(name); err == nil && api.CarriesMedia(a, kind) && name != "ollama" {
				can = append(can, name)
			}
		}
		return inputErrorf("%s: the %s API cannot carry %s in a request (%s can)", flag, r.adapter.Name(), kind, strings.Join(can, ", "))
	}
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

// mediaMeta is run.json's like-for-like account of the synthetic media
// (compare refuses to set runs with other media side by side unnoticed):
// "images" ("2 × 1024x1024 png") and "audio_seconds".
func mediaMeta(m workload.MediaSpec) map[string]string {
	out := map[string]string{}
	if m.Images > 0 {
		out["images"] = fmt.Sprintf("%d × %dx%d %s", m.Images, m.Width, m.Height, m.Format)
	}
	if m.AudioSeconds > 0 {
		out["audio_seconds"] = fmt.Sprint(m.AudioSeconds)
	}
	return out
}

package sim

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/tokbench/tokbench/api"
	"github.com/tokbench/tokbench/media"
)

// TestImageTokensArePublished: the tokens of an image are Qwen2-VL's:
// (W/28)×(H/28) after rounding to multiples of 28 within its pixel
// bounds, plus its two markers (a 1024×1024 image is 1,369 + 2), and a
// sound's are Qwen2-Audio's 25 a second plus two.
func TestImageTokensArePublished(t *testing.T) {
	for _, tc := range []struct{ w, h, want int }{
		{1024, 1024, 37*37 + 2},
		{512, 512, 18*18 + 2},
		{28, 28, 2*2 + 2},         // scaled up to 56×56
		{4000, 3000, 143*107 + 2}, // within max_pixels
		{640, 480, 23*17 + 2},     // 640/28 = 22.9, 480/28 = 17.1
	} {
		if got := ImageTokens(tc.w, tc.h); got != tc.want {
			t.Errorf("ImageTokens(%d, %d) = %d, want %d", tc.w, tc.h, got, tc.want)
		}
	}
	if got := AudioTokens(30); got != 752 {
		t.Errorf("AudioTokens(30) = %d, want 752", got)
	}
	// The encoder's work grows faster than the pixels (attention over the
	// patches): four times the pixels, more than four times the FLOPs.
	if a, b := ImageEncoderFLOPs(512, 512), ImageEncoderFLOPs(1024, 1024); !(b > 4*a) {
		t.Errorf("encoder FLOPs 512² %.3g, 1024² %.3g: want more than 4×", a, b)
	}
}

// TestServerCountsMedia: every protocol's way of sending images (and
// sounds where it has one) reaches the simulator, which counts their
// tokens in the prompt: the usage of a request with two 1024×1024 images
// is its text-only twin's and 2 × 1,371.
func TestServerCountsMedia(t *testing.T) {
	_, hs := testServer(t, nil)
	img := func(seed uint64) api.Media {
		m, err := media.Image(1024, 1024, "jpeg", seed)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	sound, err := media.Audio(4, 1)
	if err != nil {
		t.Fatal(err)
	}
	images := []api.Media{img(1), img(2)}
	ctx := context.Background()
	for _, tc := range []struct {
		api   string
		media []api.Media
		want  int
	}{
		{"openai-chat", images, 2 * 1371},
		{"openai-chat", []api.Media{sound}, 4*25 + 2},
		{"anthropic", images, 2 * 1371},
		{"ollama-chat", images, 2 * 1371},
		{"ollama-generate", images, 2 * 1371},
		{"llamacpp", images, 2 * 1371},
		{"llamacpp", []api.Media{sound}, 4*25 + 2},
	} {
		a, err := api.ByName(tc.api)
		if err != nil {
			t.Fatal(err)
		}
		cl := &api.Client{HTTP: http.DefaultClient, Adapter: a, BaseURL: hs.URL}
		text := &api.Request{Model: "sim-test", MaxTokens: 2, Messages: []api.Message{{Role: "user", Content: "one two three four"}}}
		with := *text
		with.Media = tc.media
		twin, got := cl.Do(ctx, text), cl.Do(ctx, &with)
		if twin.Failed() || got.Failed() {
			t.Fatalf("%s: %s / %s", tc.api, twin.Error, got.Error)
		}
		if d := got.Usage.PromptTokens - twin.Usage.PromptTokens; d != tc.want {
			t.Errorf("%s: %d prompt tokens with media, %d without: %d for the media, want %d",
				tc.api, got.Usage.PromptTokens, twin.Usage.PromptTokens, d, tc.want)
		}
	}
}

// TestServerRefusesBadMedia: media that are no image, or a URL the
// simulator would have to fetch, are a 400 naming the field.
func TestServerRefusesBadMedia(t *testing.T) {
	_, hs := testServer(t, nil)
	for _, body := range []string{
		`{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,aGVsbG8="}}]}]}`,
		`{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"https://example.com/a.png"}}]}]}`,
		`{"model":"m","messages":[{"role":"user","content":[{"type":"input_audio","input_audio":{"data":"!!"}}]}]}`,
	} {
		resp := post(t, context.Background(), hs.URL+"/v1/chat/completions", body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("%s: HTTP %d, want 400", body, resp.StatusCode)
		}
	}
}

// TestTTFTRisesWithImageSize: in virtual time, one request's TTFT is the
// encoder's time and the prefill of text and image tokens, so it rises
// with the image's size, and by the physics: the difference between
// sizes is at least the encoder's time difference.
func TestTTFTRisesWithImageSize(t *testing.T) {
	cost, err := DeploymentCost(DefaultModel, DefaultQuant, DefaultHardware, 1)
	if err != nil {
		t.Fatal(err)
	}
	var last float64
	var lastEnc time.Duration
	for _, size := range []int{256, 512, 1024, 2048} {
		m := MediaLoad{Images: 2, Width: size, Height: size}
		levels, err := Curve(context.Background(), EngineConfig{}.withDefaults(), cost, CurveConfig{
			Users: []int{1}, Requests: 4, PromptTokens: 64, MaxTokens: 8, Media: m,
		})
		if err != nil {
			t.Fatal(err)
		}
		lv := levels[0]
		ttft := lv.TTFT.P50
		enc := EncoderTime(2*ImageEncoderFLOPs(size, size), DefaultHardware, 1)
		if lv.Media == nil || lv.Media.TokensPerImg != float64(ImageTokens(size, size)) {
			t.Fatalf("%d²: media %+v, want %d tokens an image", size, lv.Media, ImageTokens(size, size))
		}
		if ttft <= last || ttft-last < float64(enc-lastEnc)/1e6 {
			t.Errorf("%d²: TTFT %.2f ms after %.2f ms for the size before; encoder %v after %v", size, ttft, last, enc, lastEnc)
		}
		if ttft < float64(enc)/1e6 {
			t.Errorf("%d²: TTFT %.2f ms is less than the encoder's %v", size, ttft, enc)
		}
		last, lastEnc = ttft, enc
	}
}

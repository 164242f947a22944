package cli

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tokbench/tokbench/metrics"
	"github.com/tokbench/tokbench/sim"
)

// TestSimulateImages: simulate answers what images cost: their tokens
// (Qwen2-VL's 1,371 for 1024×1024) in every request's prompt, and a TTFT
// that rises with their size by at least their encoder's time.
func TestSimulateImages(t *testing.T) {
	ttft := map[string]float64{}
	for _, size := range []string{"512x512", "1024x1024"} {
		code, stdout, stderr := runCLI(t.Context(), nil, "simulate", "--concurrency", "1", "--requests", "4",
			"--input-tokens", "100", "--output-tokens", "8", "--images", "2", "--image-size", size, "--format", "json")
		if code != 0 {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		var got struct {
			Levels []metrics.Level `json:"levels"`
		}
		if err := json.Unmarshal([]byte(stdout), &got); err != nil {
			t.Fatal(err)
		}
		lv := got.Levels[0]
		want := map[string]int{"512x512": 326, "1024x1024": 1371}[size]
		if m := lv.Media; m == nil || m.TokensPerImg != float64(want) || m.Images != 8 || lv.InputTokens != 4*(100+2*want) {
			t.Fatalf("%s: media %+v, input %d; want %d tokens an image", size, lv.Media, lv.InputTokens, want)
		}
		ttft[size] = lv.TTFT.P50
	}
	enc := sim.EncoderTime(2*(sim.ImageEncoderFLOPs(1024, 1024)-sim.ImageEncoderFLOPs(512, 512)), "h100-sxm", 1)
	if d := ttft["1024x1024"] - ttft["512x512"]; d < float64(enc)/1e6 {
		t.Errorf("TTFT rose by %.2f ms from 512² to 1024², less than the encoder's %v", d, enc)
	}
}

// TestCeilingImages: ceiling's prefill floor counts an image's tokens and
// its encoder's FLOPs at peak.
func TestCeilingImages(t *testing.T) {
	read := func(args ...string) map[string]any {
		t.Helper()
		code, stdout, stderr := runCLI(t.Context(), nil, append([]string{"ceiling", "--model", "llama-3.1-8b", "--format", "json", "--prompt-tokens", "100"}, args...)...)
		if code != 0 {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(stdout), &m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	plain, img := read(), read("--images", "1", "--image-size", "1024x1024")
	if img["prompt_tokens"] != float64(100+1371) {
		t.Errorf("prompt tokens %v, want 1471", img["prompt_tokens"])
	}
	withText := read("--prompt-tokens", "1471")
	enc := sim.ImageEncoderFLOPs(1024, 1024) / 989.4e12 * 1000
	if d := img["prefill_floor_ms"].(float64) - withText["prefill_floor_ms"].(float64); math.Abs(d-enc) > 1e-6 {
		t.Errorf("the image adds %.4f ms to the floor beyond its tokens', want the encoder's %.4f ms at peak", d, enc)
	}
	if !(img["prefill_floor_ms"].(float64) > plain["prefill_floor_ms"].(float64)) {
		t.Error("the image did not raise the floor")
	}
}

// TestMediaFlagsRefused: media flags that cannot be met are one clear
// line naming the flag, exit 2.
func TestMediaFlagsRefused(t *testing.T) {
	rows := filepath.Join(t.TempDir(), "rows.jsonl")
	if err := os.WriteFile(rows, []byte(`{"prompt": "look", "images": ["/dev/zero"]}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"simulate", "--images", "1", "--image-size", "huge"}, "--image-size: want WIDTHxHEIGHT"},
		{[]string{"simulate", "--audio-seconds", "-1"}, "--audio-seconds:"},
		{[]string{"bench", "--dataset", rows, "--requests", "1", "--concurrency", "1", "--quiet"}, `--dataset: rows.jsonl:1: field "images[0]": /dev/zero is not a regular file`},
		{[]string{"bench", "--images", "1", "--api", "openai-completions", "--requests", "1", "--concurrency", "1", "--quiet"}, "--images: the openai-completions API cannot carry image"},
		{[]string{"bench", "--images", "1", "--image-format", "bmp", "--requests", "1", "--concurrency", "1", "--quiet"}, "--image-format: want png or jpeg"},
		{[]string{"bench", "--api", "llamacpp", "--llamacpp-media", "image", "--requests", "1", "--quiet"}, `--llamacpp-media: unknown "image" (known: multimodal_data, image_data)`},
		{[]string{"bench", "--api", "openai-chat", "--llamacpp-media", "image_data", "--requests", "1", "--quiet"}, "--llamacpp-media: applies to --api llamacpp, not openai-chat"},
		{[]string{"bench", "--api", "llamacpp", "--llamacpp-media", "image_data", "--audio-seconds", "1", "--requests", "1", "--concurrency", "1", "--quiet"},
			"--audio-seconds: llama.cpp's image_data form carries images only, not audio"},
	} {
		code, _, stderr := runCLI(t.Context(), nil, tc.args...)
		if code != ExitUsage || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", tc.args, code, stderr, tc.want)
		}
	}
}

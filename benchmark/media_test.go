package benchmark

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tokbench/tokbench/api"
	"github.com/tokbench/tokbench/internal/busy"
	"github.com/tokbench/tokbench/media"
	"github.com/tokbench/tokbench/metrics"
	"github.com/tokbench/tokbench/report"
	"github.com/tokbench/tokbench/sim"
	"github.com/tokbench/tokbench/workload"
)

// visionServer is a scripted OpenAI chat server that knows the truth: it
// reads every image a request carries (and keeps their sizes), and counts
// its prompt as the text's words, a template of 7 tokens and
// perImage tokens an image.
type visionServer struct {
	perImage int
	mu       sync.Mutex
	sizes    []string // of every image received
	requests int
}

func (v *visionServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Messages []struct {
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	words, images := 0, 0
	var sizes []string
	for _, m := range body.Messages {
		var s string
		if json.Unmarshal(m.Content, &s) == nil {
			words += len(strings.Fields(s))
			continue
		}
		var parts []struct {
			Type     string `json:"type"`
			Text     string `json:"text"`
			ImageURL struct {
				URL string `json:"url"`
			} `json:"image_url"`
		}
		if err := json.Unmarshal(m.Content, &parts); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		for _, p := range parts {
			switch p.Type {
			case "text":
				words += len(strings.Fields(p.Text))
			case "image_url":
				_, data, _ := strings.Cut(p.ImageURL.URL, ";base64,")
				raw, err := base64.StdEncoding.DecodeString(data)
				info, derr := media.Describe(raw)
				if err != nil || derr != nil {
					http.Error(w, "bad image", http.StatusBadRequest)
					return
				}
				images++
				sizes = append(sizes, fmt.Sprintf("%dx%d %s", info.Width, info.Height, info.MIME))
			}
		}
	}
	v.mu.Lock()
	v.sizes = append(v.sizes, sizes...)
	v.requests++
	v.mu.Unlock()
	prompt := words + 7 + v.perImage*images
	w.Header().Set("Content-Type", "text/event-stream")
	for _, tok := range []string{" a", " b"} {
		fmt.Fprintf(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":%q}}]}\n\n", tok)
	}
	fmt.Fprintf(w, "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"length\"}]}\n\n")
	fmt.Fprintf(w, "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":%d,\"completion_tokens\":2,\"total_tokens\":%d}}\n\n", prompt, prompt+2)
	fmt.Fprint(w, "data: [DONE]\n\n")
}

// TestMediaTokensPerImage: against a server that counts 777 tokens an
// image and a chat template of 7, a run with two 320x200 images a request
// reports 777 tokens an image (the text-only twin took the template's 7
// out), the images the server read are the size asked, and the body and
// build cost are measured.
func TestMediaTokensPerImage(t *testing.T) {
	vs := &visionServer{perImage: 777}
	srv := httptest.NewServer(vs)
	defer srv.Close()
	p := testPlan(t, srv.URL+"/v1", LevelSpec{Concurrency: []int{2}, Requests: 6})
	p.Workload.Media = workload.MediaSpec{Images: 2, Width: 320, Height: 200, Format: "jpeg"}
	if c := p.Config().Prompts; c.Images != 2 || c.ImageSize != "320x200" || c.ImageFormat != "jpeg" || c.AudioSeconds != 0 {
		t.Errorf("run.json's prompts %+v, want 2 images of 320x200 jpeg", c)
	}
	res, err := Run(context.Background(), p, Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	lv := res.Summary.Levels[0]
	m := lv.Media
	if m == nil {
		t.Fatal("the level has no media figures")
	}
	if m.Requests != 6 || m.Images != 12 || m.TokensPerImg != 777 || m.Counted != 6 || m.TextSource != metrics.TextTwin || m.ImageSize != "320x200" {
		t.Errorf("media %+v; want 6 requests, 12 images of 320x200, 777 tokens an image counted by the twin", *m)
	}
	// The prompt tokens beyond the text leave the images' out: the
	// template's 7 (counted with tiktoken, not the model's tokenizer).
	if lv.ExtraPromptTokensPerRequest != 7 {
		t.Errorf("prompt tokens beyond the text %.2f a request, want the server's 7", lv.ExtraPromptTokensPerRequest)
	}
	// Base64 takes 4 bytes for 3: the body holds the images and more.
	if m.BodyBytes.Mean < m.BytesPerReq*4/3 || m.BuildMs.Min <= 0 {
		t.Errorf("body %v bytes (mean) for %.0f bytes of images, build %v ms", m.BodyBytes.Mean, m.BytesPerReq, m.BuildMs.Min)
	}
	vs.mu.Lock()
	defer vs.mu.Unlock()
	// The level's 6, the twin (no image), and three of each measuring
	// what the images add to TTFT.
	if vs.requests != 13 || len(vs.sizes) != 18 {
		t.Errorf("the server saw %d requests and %d images, want 13 and 18", vs.requests, len(vs.sizes))
	}
	for _, s := range vs.sizes {
		if s != "320x200 image/jpeg" {
			t.Errorf("the server read an image of %s, want 320x200 image/jpeg", s)
		}
	}
	if !strings.Contains(strings.Join(lv.Notes, "\n"), "777.0 tokens an image") {
		t.Errorf("notes %q do not give the tokens an image", lv.Notes)
	}
}

// TestMediaAgainstSimulator: two 1024x1024 images a request against the
// embedded simulator cost the tokens it counts for them (Qwen2-VL's
// 1,371), and its TTFT rises with the image size.
func TestMediaAgainstSimulator(t *testing.T) {
	ttft := map[string]float64{}
	for _, size := range []string{"256x256", "1024x1024"} {
		p := testPlan(t, "", LevelSpec{Concurrency: []int{1}, Requests: 3})
		p.Model = ""
		var w, h int
		fmt.Sscanf(size, "%dx%d", &w, &h)
		p.Workload.Media = workload.MediaSpec{Images: 2, Width: w, Height: h, Format: "png"}
		res, err := Run(context.Background(), p, Hooks{})
		if err != nil {
			t.Fatal(err)
		}
		lv := res.Summary.Levels[0]
		if lv.Media == nil || lv.Media.TokensPerImg != float64(sim.ImageTokens(w, h)) || lv.Media.TextSource != metrics.TextTwin {
			t.Fatalf("%s: media %+v, want %d tokens an image", size, lv.Media, sim.ImageTokens(w, h))
		}
		ttft[size] = lv.TTFT.P50
		// At idle, an image costs its encoder's time at least.
		one := sim.EncoderTime(sim.ImageEncoderFLOPs(w, h), sim.DefaultHardware, 1)
		if c := res.Summary.MediaCost; c == nil || c.TTFTCostImageMs < float64(one)/float64(time.Millisecond) {
			t.Errorf("%s: media cost at idle %+v, want at least the encoder's %v an image", size, c, one)
		}
	}
	// The simulator's physics: the larger image's encoder and prefill
	// take longer than the smaller's by at least the encoder's difference.
	enc := sim.EncoderTime(2*(sim.ImageEncoderFLOPs(1024, 1024)-sim.ImageEncoderFLOPs(256, 256)), sim.DefaultHardware, 1)
	if d := ttft["1024x1024"] - ttft["256x256"]; d < float64(enc.Milliseconds()) {
		t.Errorf("TTFT %.1f ms at 1024², %.1f ms at 256²: a rise of %.1f ms, want at least the encoder's %v", ttft["1024x1024"], ttft["256x256"], d, enc)
	}
}

// TestMediaRefusedByAPI: media the protocol cannot carry stop the run
// before any request with an InputError naming the flag.
func TestMediaRefusedByAPI(t *testing.T) {
	vs := &visionServer{perImage: 1}
	srv := httptest.NewServer(vs)
	defer srv.Close()
	p := testPlan(t, srv.URL+"/v1", LevelSpec{Concurrency: []int{1}, Requests: 1})
	p.API = "openai-completions"
	p.Workload.Media = workload.MediaSpec{Images: 1, Width: 8, Height: 8, Format: "png"}
	_, err := Run(context.Background(), p, Hooks{})
	if !IsInputError(err) || !strings.Contains(err.Error(), "Workload.Media.Images: the openai-completions API cannot carry image") {
		t.Errorf("Run = %v, want an InputError naming Workload.Media.Images", err)
	}
	for _, bad := range []workload.MediaSpec{{Images: -1}, {Images: 1, Format: "png"}, {Images: 1, Width: 8, Height: 8, Format: "bmp"}, {AudioSeconds: -2}} {
		p.API, p.Workload.Media = "openai-chat", bad
		if _, err := Run(context.Background(), p, Hooks{}); !IsInputError(err) || !strings.Contains(err.Error(), "Workload.Media.") {
			t.Errorf("Run with media %+v = %v, want an InputError naming Workload.Media", bad, err)
		}
	}
	vs.mu.Lock()
	defer vs.mu.Unlock()
	if vs.requests != 0 {
		t.Errorf("%d requests were sent", vs.requests)
	}
}

// TestAudioAgainstSimulator: four seconds of sound a request cost the
// simulator's 25 tokens a second and two markers: 25.5 a second.
func TestAudioAgainstSimulator(t *testing.T) {
	p := testPlan(t, "", LevelSpec{Concurrency: []int{1}, Requests: 2})
	p.Model = ""
	p.Workload.Media = workload.MediaSpec{AudioSeconds: 4}
	p.Workload.MinTokens = 8 // the twin, of one output token, must not send it
	res, err := Run(context.Background(), p, Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	m := res.Summary.Levels[0].Media
	if m == nil || m.TextSource != metrics.TextTwin || m.AudioS != 8 || m.TokensPerSec != float64(sim.AudioTokens(4))/4 || m.TokensPerImg != 0 {
		t.Fatalf("media %+v, want 8 s of sound at %g tokens a second", m, float64(sim.AudioTokens(4))/4)
	}
}

// slowVision is a scripted llama.cpp /completion server that knows what an
// image costs: its first token comes base after the request, and perImage
// later for each image, and its timings say prompt_ms 10.5 and 20.25 an
// image; it counts the prompt as the text's words, 5 and 300 an image.
type slowVision struct {
	base, perImage time.Duration
	mu             sync.Mutex
	withImages     int // requests with images
	textOnly       int
}

func (v *slowVision) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/completion" {
		http.NotFound(w, r)
		return
	}
	var body struct {
		Prompt json.RawMessage `json:"prompt"`
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var text string
	var obj struct {
		PromptString   string   `json:"prompt_string"`
		MultimodalData []string `json:"multimodal_data"`
	}
	if json.Unmarshal(body.Prompt, &text) != nil {
		if err := json.Unmarshal(body.Prompt, &obj); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		text = strings.ReplaceAll(obj.PromptString, api.LlamaCppMediaMarker, "")
	}
	images := len(obj.MultimodalData)
	v.mu.Lock()
	if images > 0 {
		v.withImages++
	} else {
		v.textOnly++
	}
	v.mu.Unlock()
	time.Sleep(v.base + time.Duration(images)*v.perImage)
	prompt := len(strings.Fields(text)) + 5 + 300*images
	w.Header().Set("Content-Type", "text/event-stream")
	fmt.Fprint(w, "data: {\"content\":\" a\",\"stop\":false}\n\n")
	fmt.Fprintf(w, "data: {\"content\":\"\",\"stop\":true,\"stop_type\":\"limit\",\"tokens_predicted\":1,\"tokens_evaluated\":%d,"+
		"\"timings\":{\"prompt_n\":%d,\"prompt_ms\":%g,\"predicted_n\":1,\"predicted_ms\":0.5}}\n\n", prompt, prompt, 10.5+20.25*float64(images))
}

// TestMediaCostAtIdle: before the level, three requests with two images
// and three without, one at a time, measure what the images add: the
// server's prompt time exactly (it says 20.25 ms an image), TTFT by the
// scripted 25 ms an image (judged when the machine let the test run), and
// the tokens the server counted (300 an image); summary.json, the table's
// notes and the report carry it.
func TestMediaCostAtIdle(t *testing.T) {
	vs := &slowVision{base: 15 * time.Millisecond, perImage: 25 * time.Millisecond}
	srv := httptest.NewServer(vs)
	defer srv.Close()
	p := testPlan(t, srv.URL, LevelSpec{Concurrency: []int{1}, Requests: 2})
	p.API = "llamacpp"
	p.Workload.Media = workload.MediaSpec{Images: 2, Width: 64, Height: 48, Format: "png"}
	watch := busy.Start()
	res, err := Run(context.Background(), p, Hooks{})
	lag := watch.Stop()
	if err != nil {
		t.Fatal(err)
	}
	c := res.Summary.MediaCost
	if c == nil {
		t.Fatalf("no media cost; warnings %q", res.Summary.Warnings)
	}
	if c.Pairs != 3 || c.ImagesPerRequest != 2 || c.ImageSize != "64x48" || c.Tokens != 600 {
		t.Errorf("media cost %+v; want 3 pairs of 2 images of 64x48, 600 tokens", *c)
	}
	if c.ServerMediaMs != 51 || c.ServerTextMs != 10.5 || c.ServerCostMs != 40.5 || c.ServerCostImageMs != 20.25 {
		t.Errorf("server prompt time %.3f with images, %.3f without, cost %.3f (%.3f an image); want 51, 10.5, 40.5, 20.25",
			c.ServerMediaMs, c.ServerTextMs, c.ServerCostMs, c.ServerCostImageMs)
	}
	if lag.Judge(t, "TTFT at idle") {
		if d := c.TTFTCostImageMs - 25; d < -2 || d > 2+lag.P99Ms {
			t.Errorf("TTFT %.2f ms with images, %.2f without: %.2f ms an image, want 25 (lag %v)", c.TTFTMediaMs, c.TTFTTextMs, c.TTFTCostImageMs, lag)
		}
	}
	vs.mu.Lock()
	with, text := vs.withImages, vs.textOnly
	vs.mu.Unlock()
	// The level's 2 and the 3 measuring; the twin and the 3 measuring.
	if with != 5 || text != 4 {
		t.Errorf("the server saw %d requests with images and %d without, want 5 and 4", with, text)
	}
	var out strings.Builder
	if err := report.Table(&out, res.Summary); err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("media at idle: TTFT %.1f ms with them", c.TTFTMediaMs); !strings.Contains(out.String(), want) || !strings.Contains(out.String(), "(20.2 ms an image)") {
		t.Errorf("the table does not carry the cost (%q):\n%s", want, out.String())
	}
}

// TestMediaMeta: run.json's meta says what every request carried beside
// its prompt, and nothing of what none carried (compare reads a missing
// key as none).
func TestMediaMeta(t *testing.T) {
	wl := Workload{EmbedInputs: 16}
	wl.Media.Images, wl.Media.Width, wl.Media.Height, wl.Media.Format = 2, 1024, 768, "png"
	wl.Media.AudioSeconds = 4.5
	got := mediaMeta(wl)
	want := map[string]string{"embed_inputs": "16", "images": "2 × 1024x768 png", "audio_seconds": "4.5"}
	if !maps.Equal(got, want) {
		t.Errorf("mediaMeta = %v, want %v", got, want)
	}
	if got := mediaMeta(Workload{}); len(got) != 0 {
		t.Errorf("mediaMeta of a text workload = %v, want none", got)
	}
}

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

	"github.com/tokbench/tokbench/media"
	"github.com/tokbench/tokbench/metrics"
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
	// The level's 6, and the twin (no image).
	if vs.requests != 7 || len(vs.sizes) != 12 {
		t.Errorf("the server saw %d requests and %d images, want 7 and 12", vs.requests, len(vs.sizes))
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

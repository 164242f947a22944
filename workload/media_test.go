package workload

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tokbench/tokbench/api"
	"github.com/tokbench/tokbench/media"
	"github.com/tokbench/tokbench/tokenize"
)

// TestSourceMediaAreNew: every request, warm-up and later round of a
// level sends images of its own, of the size asked, and the prompt's
// text keeps its exact length.
func TestSourceMediaAreNew(t *testing.T) {
	tok, err := tokenize.Open(tokenize.Default)
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Tokenizer: tok, Input: Fixed(20), Output: Fixed(4), Seed: 3,
		Media: MediaSpec{Images: 2, Width: 96, Height: 64, Format: "png", AudioSeconds: 1}}
	src, err := NewSource(context.Background(), cfg, 3)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]string{}
	check := func(what string, req *api.Request, in int) {
		t.Helper()
		if in != 20 {
			t.Errorf("%s: %d input tokens, want 20", what, in)
		}
		if len(req.Media) != 3 || req.Media[2].Kind != api.KindAudio || req.Media[2].Seconds != 1 {
			t.Fatalf("%s: media %d, want 2 images and a sound of 1 s", what, len(req.Media))
		}
		for k, m := range req.Media {
			if k < 2 && (m.Width != 96 || m.Height != 64 || m.MIME != "image/png") {
				t.Errorf("%s: image %d is %s %dx%d", what, k, m.MIME, m.Width, m.Height)
			}
			if prev, ok := seen[m.Base64]; ok {
				t.Errorf("%s sends %s's media %d again", what, prev, k)
			}
			seen[m.Base64] = what
		}
	}
	for i := range 3 {
		req, in := src.Request(i)
		check(fmt.Sprintf("request %d", i), req, in)
	}
	req, in := src.Request(3) // the list's second round
	check("request 3", req, in)
	req, in = src.WarmupRequest(0)
	check("warm-up 0", req, in)
	if again, _ := NewSource(context.Background(), cfg, 1); again.reqs[0].Media[0].Base64 != src.reqs[0].Media[0].Base64 {
		t.Error("the same seed made other images")
	}
	// The level's media are bounded: past its budget NewSource says so.
	cfg.MaxBytes = 10_000
	if _, err := NewSource(context.Background(), cfg, 3); !errors.Is(err, ErrBudget) {
		t.Errorf("NewSource over its media budget = %v, want ErrBudget", err)
	}
}

// TestDatasetMedia: rows carry images as JSONL "images" (paths relative
// to the dataset, data: URLs), as OpenAI content parts, and as ShareGPT's
// "image"; the kept rows' files are read, checked and sent.
func TestDatasetMedia(t *testing.T) {
	dir := t.TempDir()
	img, err := media.Image(40, 30, "png", 1)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := base64.StdEncoding.DecodeString(img.Base64)
	if err := os.WriteFile(filepath.Join(dir, "a.png"), raw, 0o644); err != nil {
		t.Fatal(err)
	}
	snd, err := media.Audio(2, 1)
	if err != nil {
		t.Fatal(err)
	}
	jsonl := filepath.Join(dir, "rows.jsonl")
	lines := []string{
		`{"prompt": "describe", "images": ["a.png", "` + img.DataURL() + `"]}`,
		`{"messages": [{"role": "user", "content": [{"type": "text", "text": "and this"}, {"type": "image_url", "image_url": {"url": "a.png"}}, {"type": "input_audio", "input_audio": {"data": "` + snd.Base64 + `", "format": "wav"}}]}]}`,
	}
	if err := os.WriteFile(jsonl, []byte(strings.Join(lines, "\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	d, err := OpenDataset(jsonl, FormatAuto, 10, 1, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	byLine := map[int]Row{}
	for _, r := range d.Rows {
		byLine[r.Line] = r
	}
	if r := byLine[1]; len(r.Media) != 2 || r.Media[0].Width != 40 || r.Media[1].Base64 != img.Base64 || r.Prompt != "describe" {
		t.Errorf("line 1: %d media, prompt %q", len(r.Media), r.Prompt)
	}
	if r := byLine[2]; len(r.Media) != 2 || r.Media[0].Height != 30 || r.Media[1].Seconds != 2 || r.Messages[0].Content != "and this" {
		t.Errorf("line 2: %d media, messages %v", len(r.Media), r.Messages)
	}
	tok, _ := tokenize.Open(tokenize.Default)
	src, err := NewSource(context.Background(), Config{Tokenizer: tok, Output: Fixed(4), Rows: d.Rows, Seed: 1}, 2)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if req, _ := src.Request(i); len(req.Media) != 2 {
			t.Errorf("request %d sends %d media, want its row's 2", i, len(req.Media))
		}
	}

	sharegpt := filepath.Join(dir, "sg.json")
	if err := os.WriteFile(sharegpt, []byte(`[{"image": "a.png", "conversations": [{"from": "human", "value": "<image>\nWhat is it?"}, {"from": "gpt", "value": "A test."}]}]`), 0o644); err != nil {
		t.Fatal(err)
	}
	if d, err := OpenDataset(sharegpt, FormatAuto, 10, 1, Limits{}); err != nil || len(d.Rows[0].Media) != 1 || d.Rows[0].Prompt != "What is it?" {
		t.Errorf("ShareGPT with an image: %v", err)
	}
}

// TestDatasetMediaHostile: a row pointing at a device, at a file that is
// no image or at a file too large is refused with its file, line and
// field, before anything is sent.
func TestDatasetMediaHostile(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("plain text"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(filepath.Join(dir, "huge.png"))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(2 << 30); err != nil { // sparse: no disk
		t.Fatal(err)
	}
	f.Close()
	for _, tc := range []struct{ row, want string }{
		{`{"prompt": "x", "images": ["/dev/zero"]}`, `rows.jsonl:2: field "images[0]": /dev/zero is not a regular file`},
		{`{"prompt": "x", "images": "notes.txt"}`, `rows.jsonl:2: field "images": not a PNG, JPEG or GIF image`},
		{`{"prompt": "x", "image": ["huge.png"]}`, `rows.jsonl:2: field "images[0]": ` + filepath.Join(dir, "huge.png") + ` is 2147483648 bytes`},
		{`{"prompt": "x", "images": [3]}`, `rows.jsonl:2: field "images": want a path or a data: URL`},
		{`{"messages": [{"role": "user", "content": [{"type": "video", "url": "v.mp4"}]}]}`, `field "messages[0].content": messages[0].content[0]: a part of type "video"`},
	} {
		path := filepath.Join(dir, "rows.jsonl")
		if err := os.WriteFile(path, []byte(`{"prompt": "fine"}`+"\n"+tc.row+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := OpenDataset(path, FormatJSONL, 10, 1, Limits{})
		var re *RowError
		if !errors.As(err, &re) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want a row error with %q", tc.row, err, tc.want)
		}
	}
}

package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
)

// imageTokens is what a scripted server counts for each image it took.
const imageTokens = 100

// mtmdServer answers /completion as a llama.cpp server built on libmtmd
// (2025 on) does: a prompt object with multimodal_data needs one media
// marker per file and a model that reads images (else 400, the server's
// JSON error); any other field, image_data among them, is ignored, and a
// string prompt is text alone. Its events carry no "multimodal".
func mtmdServer(t *testing.T, vision bool) *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Prompt json.RawMessage `json:"prompt"`
		}
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			t.Errorf("mtmd: %v", err)
		}
		var text string
		images := 0
		if err := json.Unmarshal(body.Prompt, &text); err != nil {
			var obj struct {
				PromptString   string   `json:"prompt_string"`
				MultimodalData []string `json:"multimodal_data"`
			}
			if err := json.Unmarshal(body.Prompt, &obj); err != nil {
				t.Fatalf("mtmd: prompt %s", body.Prompt)
			}
			refuse := func(msg string) {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusBadRequest)
				fmt.Fprintf(w, `{"error":{"code":400,"message":%q,"type":"invalid_request_error"}}`, msg)
			}
			if !vision {
				refuse("Multimodal data provided, but model does not support multimodal requests.")
				return
			}
			if strings.Count(obj.PromptString, LlamaCppMediaMarker) != len(obj.MultimodalData) {
				refuse("number of bitmaps does not match number of markers")
				return
			}
			text, images = strings.ReplaceAll(obj.PromptString, LlamaCppMediaMarker, ""), len(obj.MultimodalData)
		}
		w.Header().Set("Content-Type", "text/event-stream")
		n := len(strings.Fields(text)) + imageTokens*images
		fmt.Fprintf(w, "data: {\"content\":\" a\",\"stop\":false,\"tokens_evaluated\":%d}\n\n", n)
		fmt.Fprintf(w, "data: {\"content\":\"\",\"stop\":true,\"stop_type\":\"limit\",\"tokens_predicted\":1,\"tokens_evaluated\":%d}\n\n", n)
	}))
}

// llavaServer answers /completion as a LLaVA-era llama.cpp server (October
// 2023 to March 2024) and llamafile's do: a prompt that is an object
// throws in the handler (500, text/plain), image_data is read only with a
// projector (mmproj), where every [img-N] of the prompt must name an image
// given (else an "error:" line and the end of the stream); every event
// says "multimodal".
func llavaServer(t *testing.T, mmproj bool) *httptest.Server {
	img := regexp.MustCompile(`\[img-(\d+)\]`)
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Prompt    json.RawMessage `json:"prompt"`
			ImageData []struct {
				Data string `json:"data"`
				ID   int    `json:"id"`
			} `json:"image_data"`
		}
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			t.Errorf("llava: %v", err)
		}
		var text string
		if err := json.Unmarshal(body.Prompt, &text); err != nil {
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			w.WriteHeader(http.StatusInternalServerError)
			fmt.Fprint(w, "500 Internal Server Error\n[json.exception.type_error.305] cannot use operator[] with a numeric argument with object")
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		images := 0
		if mmproj && len(body.ImageData) > 0 {
			ids := map[string]bool{}
			for _, im := range body.ImageData {
				ids[fmt.Sprint(im.ID)] = true
			}
			for _, m := range img.FindAllStringSubmatch(text, -1) {
				if !ids[m[1]] {
					fmt.Fprint(w, "error: {\"content\":\"internal_error\"}\n\n")
					return
				}
			}
			text, images = img.ReplaceAllString(text, ""), len(body.ImageData)
		}
		n := len(strings.Fields(text)) + imageTokens*images
		fmt.Fprintf(w, "data: {\"content\":\" a\",\"stop\":false,\"multimodal\":%v}\n\n", mmproj)
		fmt.Fprintf(w, "data: {\"content\":\"\",\"stop\":true,\"multimodal\":%v,\"tokens_predicted\":1,\"tokens_evaluated\":%d,\"stopped_limit\":true}\n\n", mmproj, n)
	}))
}

// TestLlamaCppMediaForms: each form is taken by the servers that take it,
// with the images counted, and refused by the others with a message that
// names the form to use instead.
func TestLlamaCppMediaForms(t *testing.T) {
	img := Media{Kind: KindImage, MIME: "image/png", Base64: "iVBORw0K", Width: 2, Height: 2}
	for _, tc := range []struct {
		name    string
		srv     *httptest.Server
		adapter LlamaCpp
		class   Class  // "" when the request succeeds
		says    string // in the message, after the class
	}{
		{"multimodal_data to libmtmd", mtmdServer(t, true), LlamaCpp{}, "", ""},
		{"image_data to LLaVA-era", llavaServer(t, true), LlamaCpp{ImageData: true}, "", ""},
		{"multimodal_data to LLaVA-era", llavaServer(t, true), LlamaCpp{}, HTTPClass(500), "(--llamacpp-media image_data)"},
		{"image_data to libmtmd", mtmdServer(t, true), LlamaCpp{ImageData: true}, ClassStreamError, "say nothing of multimodal"},
		{"image_data without a projector", llavaServer(t, false), LlamaCpp{ImageData: true}, ClassStreamError, "multimodal false"},
		{"multimodal_data to a text model", mtmdServer(t, false), LlamaCpp{}, HTTPClass(400), "does not support multimodal"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer tc.srv.Close()
			cl := &Client{HTTP: tc.srv.Client(), Adapter: tc.adapter, BaseURL: tc.srv.URL}
			resp := cl.Do(context.Background(), &Request{MaxTokens: 1, Media: []Media{img, img},
				Messages: []Message{{Role: "user", Content: "what are these"}}})
			if tc.class == "" {
				if resp.Failed() || resp.Usage == nil || resp.Usage.PromptTokens != 3+2*imageTokens {
					t.Fatalf("failed %q (%s), usage %+v; want prompt tokens %d", resp.ErrorClass, resp.Error, resp.Usage, 3+2*imageTokens)
				}
				return
			}
			if resp.ErrorClass != tc.class || !strings.Contains(resp.Error, tc.says) {
				t.Errorf("class %q, error %q; want %q saying %q", resp.ErrorClass, resp.Error, tc.class, tc.says)
			}
			other := LlamaCppImageData
			if tc.adapter.ImageData {
				other = LlamaCppMultimodalData
			}
			want := "(--llamacpp-media " + other + ")"
			if right := tc.says == "multimodal false"; strings.HasSuffix(resp.Error, want+")") == right {
				t.Errorf("error %q: naming the other form %s is %v, want %v (the server took this form)", resp.Error, want, !right, right)
			}
		})
	}
}

// TestLlamaCppImageDataBody: the older form puts [img-N] before the text
// and the images beside the prompt with those ids, and carries no sound.
func TestLlamaCppImageDataBody(t *testing.T) {
	img := Media{Kind: KindImage, MIME: "image/png", Base64: "iVBORw0K"}
	b := mediaBody(t, LlamaCpp{ImageData: true}, &Request{MaxTokens: 4, Media: []Media{img, img},
		Messages: []Message{{Role: "user", Content: "what is this?"}}})
	if at(t, b, "prompt") != "[img-1]\n[img-2]\nwhat is this?" || at(t, b, "image_data", 1, "id") != 2.0 ||
		at(t, b, "image_data", 0, "data") != "iVBORw0K" {
		t.Errorf("image_data body %v", b)
	}
	if CarriesMedia(LlamaCpp{ImageData: true}, KindAudio) || !CarriesMedia(LlamaCpp{}, KindAudio) {
		t.Error("image_data carries sound, or multimodal_data does not")
	}
}

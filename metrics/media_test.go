package metrics

import (
	"strings"
	"testing"
)

// TestMediaStats: a level's media figures are the sums and means of its
// completed requests' (a failed one counts in none), per image when the
// requests carried images only, and the template's share leaves them out.
func TestMediaStats(t *testing.T) {
	rec := func(ok bool, tokens int) Record {
		return Record{OK: ok, TTFTMs: 10, InputTokens: 100 + 6 + tokens, InputTokensRequested: 100,
			Media: &MediaRecord{Images: 2, ImageSize: "64x64", Bytes: 3000, BodyBytes: 4500, BuildMs: 2,
				TextTokens: 106, TextSource: TextTwin, Tokens: tokens, Counted: ok}}
	}
	recs := []Record{rec(true, 300), rec(true, 300), rec(false, 0), {OK: true, TTFTMs: 5, InputTokens: 50, InputTokensRequested: 44}}
	lv := Summarize(Load{Mode: ModeConcurrency, Concurrency: 1}, recs, 1)
	m := lv.Media
	if m == nil || m.Requests != 2 || m.Images != 4 || m.Tokens != 600 || m.TokensPerImg != 150 || m.Counted != 2 ||
		m.ImageSize != "64x64" || m.BodyBytes.P50 != 4500 || m.TextSource != TextTwin {
		t.Fatalf("media %+v", m)
	}
	if lv.TemplateTokensPerRequest != 6 {
		t.Errorf("template tokens %v a request, want 6 (the media's left out)", lv.TemplateTokensPerRequest)
	}
	if note := strings.Join(lv.Notes, "\n"); !strings.Contains(note, "2 images a request of 64x64, 150.0 tokens an image") {
		t.Errorf("notes %q", note)
	}
	if lv := Summarize(Load{Mode: ModeConcurrency, Concurrency: 1}, recs[3:], 1); lv.Media != nil {
		t.Errorf("a level without media has %+v", lv.Media)
	}
}

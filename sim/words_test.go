package sim

import (
	"strings"
	"testing"

	"github.com/tiktoken-go/tokenizer"
)

// TestOutputWordsAreOneToken checks the promise clients rely on: every
// output word is one token, and a stream of them tokenizes word by word, under
// both encodings tokbench counts with.
func TestOutputWordsAreOneToken(t *testing.T) {
	for _, enc := range []tokenizer.Encoding{tokenizer.Cl100kBase, tokenizer.O200kBase} {
		codec, err := tokenizer.Get(enc)
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range outputWords {
			ids, _, err := codec.Encode(w)
			if err != nil || len(ids) != 1 {
				t.Errorf("%s: %q is %d tokens (%v), want 1", enc, w, len(ids), err)
			}
		}
		text := string(appendWords(nil, 7, 42, 0, 2000))
		n, err := codec.Count(text)
		if err != nil || n != 2000 {
			t.Errorf("%s: 2000 streamed words count as %d tokens (%v), want 2000", enc, n, err)
		}
	}
}

func TestPromptTokens(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int
	}{
		{"", 0}, {"   ", 0}, {"one", 1}, {" the time\nwater\t\tof ", 4}, {"naïve café", 2},
		{strings.Repeat("word ", 512), 512},
	} {
		if got := PromptTokens(tc.in); got != tc.want || got != len(strings.Fields(tc.in)) {
			t.Errorf("PromptTokens(%q) = %d, want %d", tc.in, got, tc.want)
		}
	}
}

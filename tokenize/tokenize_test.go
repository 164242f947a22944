package tokenize

import (
	"strings"
	"testing"
)

func TestCounts(t *testing.T) {
	cases := []struct {
		enc, text string
		want      int
	}{
		{"cl100k_base", "hello world", 2},
		{"cl100k_base", " the time water", 3},
		{"cl100k_base", "", 0},
		{"o200k_base", "hello world", 2},
	}
	for _, c := range cases {
		tok, err := Get(c.enc)
		if err != nil {
			t.Fatal(err)
		}
		if got := tok.Count(c.text); got != c.want {
			t.Errorf("%s.Count(%q) = %d, want %d", c.enc, c.text, got, c.want)
		}
		if got := tok.Decode(tok.Encode(c.text)); got != c.text {
			t.Errorf("%s round trip of %q = %q", c.enc, c.text, got)
		}
	}
	if _, err := Get("gpt2"); err == nil {
		t.Error("Get accepted an unknown encoding")
	}
}

func BenchmarkCount(b *testing.B) {
	tok, _ := Get("cl100k_base")
	text := strings.Repeat(" the time water people", 10)
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		tok.Count(text)
	}
}

func TestCached(t *testing.T) {
	base, _ := Get("cl100k_base")
	c := Cached(base, 2)
	for _, s := range []string{" the", " the", " time water", "x", strings.Repeat(" water", 20), " the"} {
		if got, want := c.Count(s), base.Count(s); got != want {
			t.Errorf("Cached.Count(%q) = %d, want %d", s, got, want)
		}
	}
	if n := len(c.(*cached).m); n != 2 {
		t.Errorf("memo holds %d entries, want its cap of 2", n)
	}
}

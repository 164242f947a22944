package workload

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCheckText(t *testing.T) {
	dir := t.TempDir()
	cases := []struct {
		name, data, want string // want: "" for text, else part of the error
	}{
		{"prose.txt", strings.Repeat("Ünïcode prose, line after line.\n", 10), ""},
		{"short.txt", "tiny", "needs some text"},
		{"nul.bin", "GGUF\x03\x00\x00\x00" + strings.Repeat("x", 32), "NUL byte at offset 5"},
		{"latin1.txt", strings.Repeat("caf\xe9 au lait ", 4), "offset 3"},
	}
	for _, c := range cases {
		p := filepath.Join(dir, c.name)
		if err := os.WriteFile(p, []byte(c.data), 0o644); err != nil {
			t.Fatal(err)
		}
		err := CheckText(p)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v, want text", c.name, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: error %v, want one containing %q", c.name, err, c.want)
		}
	}
}

func TestOpenDataset(t *testing.T) {
	dir := t.TempDir()
	jsonl := filepath.Join(dir, "p.jsonl")
	if err := os.WriteFile(jsonl, []byte("{\"prompt\":\"a b c\"}\n{\"prompt\":\"d e\"}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	text := filepath.Join(dir, "book.txt")
	if err := os.WriteFile(text, []byte(strings.Repeat("words of a book. ", 8)), 0o644); err != nil {
		t.Fatal(err)
	}
	if d, err := OpenDataset(jsonl, FormatAuto, 10, 1, Limits{}); err != nil || d.Format != FormatJSONL || len(d.Rows) != 2 {
		t.Errorf("jsonl: %+v, %v", d, err)
	}
	if d, err := OpenDataset(text, FormatAuto, 10, 1, Limits{}); err != nil || d.Format != FormatText || d.Corpus != text {
		t.Errorf("text: %+v, %v", d, err)
	}
	if _, err := OpenDataset(dir, FormatAuto, 10, 1, Limits{}); err == nil || !strings.Contains(err.Error(), "directory") {
		t.Errorf("a directory: %v", err)
	}
	if _, err := OpenDataset(jsonl, "yaml", 10, 1, Limits{}); !errors.Is(err, ErrFormat) {
		t.Errorf("an unknown format: %v", err)
	}
}

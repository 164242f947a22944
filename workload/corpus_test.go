package workload

import (
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

package workload

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestRowBounds: a row past its bound in bytes or tokens is refused with
// its file and line; a row at the bound is read.
func TestRowBounds(t *testing.T) {
	tok := cl100k(t)
	line := func(n int) string { // a JSONL line of exactly n bytes
		return `{"prompt": "` + strings.Repeat("a", n-len(`{"prompt": ""}`)) + `"}`
	}
	words := strings.Repeat(" hello", 150) // 150 tokens in 900 bytes
	if n := tok.Count(words); n != 150 {
		t.Fatalf("%d tokens in the test's prompt, want 150", n)
	}
	bytesOnly := Limits{RowBytes: 1024, RowTokens: 1 << 20, Tokenizer: tok}
	tokens := Limits{RowBytes: 1024, RowTokens: 100, Tokenizer: tok}
	cases := []struct {
		name, format, text, want string
		lim                      Limits
	}{
		{"at.jsonl", FormatJSONL, line(1024) + "\r\n" + line(20) + "\n", "", bytesOnly},
		{"over.jsonl", FormatJSONL, line(20) + "\n\n" + line(1025) + "\n" + line(20), "over.jsonl:3: the row is more than 1024 bytes, the most a row may hold", bytesOnly},
		{"last.jsonl", FormatJSONL, line(20) + "\n" + line(5000), "last.jsonl:2: the row is more than 1024 bytes", bytesOnly},
		{"tokens.jsonl", FormatJSONL, line(20) + "\n" + `{"prompt": "` + words + `"}` + "\n", "tokens.jsonl:2: the prompt has 150 tokens (cl100k_base), more than the 100 a row may have", tokens},
		{"over.json", FormatShareGPT, "[\n" + `{"conversations": [{"from": "human", "value": "x"}]},` + "\n" +
			`{"conversations": [{"from": "human", "value": "` + strings.Repeat("b", 1100) + `"}]}` + "\n]", "over.json:3: the row is more than 1024 bytes", bytesOnly},
		{"turn.json", FormatShareGPT, "[\n" + `{"conversations": [{"from": "human", "value": "x"}, {"from": "gpt", "value": "y"}, {"from": "human", "value": "` + words + `"}]}` + "\n]",
			"turn.json:2: turn 2 has 150 tokens (cl100k_base), more than the 100 a row may have", tokens},
		{"at.json", FormatShareGPT, "[\n" + `{"conversations": [{"from": "human", "value": "` + strings.Repeat("c", 900) + `"}]}` + "\n]", "", bytesOnly},
		// The same 150 tokens are read at a bound of 150.
		{"ok.jsonl", FormatJSONL, `{"prompt": "` + words + `"}`, "", Limits{RowBytes: 1024, RowTokens: 150, Tokenizer: tok}},
	}
	for _, c := range cases {
		path := filepath.Join(t.TempDir(), c.name)
		if err := os.WriteFile(path, []byte(c.text), 0o644); err != nil {
			t.Fatal(err)
		}
		rows, err := Sample(path, c.format, 10, 1, c.lim)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v, want its rows", c.name, err)
		case c.want == "" && len(rows) == 0:
			t.Errorf("%s: no rows", c.name)
		case c.want != "" && (err == nil || !strings.HasPrefix(err.Error(), c.want)):
			t.Errorf("%s: err = %v, want %q", c.name, err, c.want)
		}
	}
}

// endless is a dataset of one line that does not end: head, then fill
// bytes up to size, then EOF. It counts what was read of it.
type endless struct {
	head      string
	fill      byte
	size, off int64
}

func (e *endless) Read(p []byte) (int, error) {
	if e.off >= e.size {
		return 0, io.EOF
	}
	p = p[:min(int64(len(p)), e.size-e.off)]
	n := 0
	if e.off < int64(len(e.head)) {
		n = copy(p, e.head[e.off:])
	}
	for i := range p[n:] {
		p[n+i] = e.fill
	}
	e.off += int64(len(p))
	return len(p), nil
}

// TestHugeRowStopsAtTheBound is issue 34's 2 GB one-line dataset, streamed
// rather than written: 256 MiB of one JSONL line, and of one ShareGPT
// entry. Each is refused at the default bound with its line, having read
// no more than the bound and a buffer of it and allocated a few times the
// bound, not the row.
func TestHugeRowStopsAtTheBound(t *testing.T) {
	const size = 256 << 20
	cases := []struct {
		name string
		read func(r io.Reader) error
		src  *endless
	}{
		{"one.jsonl", func(r io.Reader) error { return ReadJSONL(r, "one.jsonl", Limits{}, func(Row) error { return nil }) },
			&endless{head: "{\"prompt\": \"hi\"}\n{\"prompt\": \"", fill: 'a', size: size}},
		{"one.json", func(r io.Reader) error { return ReadShareGPT(r, "one.json", Limits{}, func(Row) error { return nil }) },
			&endless{head: "[\n{\"conversations\": [{\"from\": \"human\", \"value\": \"", fill: 'a', size: size}},
	}
	for _, c := range cases {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		err := c.read(c.src)
		runtime.ReadMemStats(&after)
		var re *RowError
		if !errors.As(err, &re) || re.Line != 2 || !strings.Contains(err.Error(), "more than 16777216 bytes") {
			t.Errorf("%s: err = %v, want line 2 past 16777216 bytes", c.name, err)
		}
		if c.src.off > DefaultRowBytes+256<<10 {
			t.Errorf("%s: read %d bytes, want at most the bound %d and 256 KiB", c.name, c.src.off, DefaultRowBytes)
		}
		if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 8*DefaultRowBytes {
			t.Errorf("%s: allocated %d bytes, want under %d", c.name, alloc, 8*DefaultRowBytes)
		}
	}
}

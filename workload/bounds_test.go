package workload

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"github.com/valyala/fastjson"

	"github.com/tokbench/tokbench/api"
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

// TestDatasetBudget: rows each within their bound but past the budget of
// all of them together are refused with the file and the line of the row
// with which the rows kept passed it; rows that fill it exactly are read.
func TestDatasetBudget(t *testing.T) {
	row := func(n int) string { return `{"prompt": "` + strings.Repeat("a", n) + `"}` + "\n" }
	conv := func(human, gpt int) string {
		return `{"conversations": [{"from": "human", "value": "` + strings.Repeat("h", human) + `"}, {"from": "gpt", "value": "` + strings.Repeat("g", gpt) + `"}]}`
	}
	cases := []struct {
		name, format, text string
		k                  int
		budget             int64
		want               string
	}{
		{"at.jsonl", FormatJSONL, strings.Repeat(row(1000), 4), 10, 4000, ""},
		{"over.jsonl", FormatJSONL, row(10) + "\n" + strings.Repeat(row(1000), 6), 10, 3500,
			"over.jsonl:6: with this row the rows kept hold 4010 bytes of text, more than the 3000"},
		// The reply counts: 3 × 600 + 3 × 400 is 3000, the budget; a
		// fourth entry passes it.
		{"over.json", FormatShareGPT, "[\n" + strings.Repeat(conv(600, 400)+",\n", 4) + conv(1, 1) + "\n]", 10, 3000,
			"over.json:5: with this row the rows kept hold 4000 bytes of text, more than the 3000"},
		{"at.json", FormatShareGPT, "[\n" + strings.Repeat(conv(600, 400)+",\n", 2) + conv(600, 400) + "\n]", 10, 3000, ""},
		// A sample of 2: small rows kept first, then larger ones take their
		// places, and the text kept grows past the budget.
		{"grows.jsonl", FormatJSONL, strings.Repeat(row(100), 2) + strings.Repeat(row(2000), 50), 2, 3000, "with this row the rows kept hold 4000 bytes"},
	}
	for _, c := range cases {
		c.want = strings.Replace(c.want, "3000", strconv.FormatInt(c.budget, 10), 1)
		path := filepath.Join(t.TempDir(), c.name)
		if err := os.WriteFile(path, []byte(c.text), 0o644); err != nil {
			t.Fatal(err)
		}
		rows, err := Sample(path, c.format, c.k, 1, Limits{Budget: c.budget})
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v, want its rows", c.name, err)
		case c.want == "" && RowsBytes(rows) != c.budget:
			t.Errorf("%s: the rows hold %d bytes, want the budget, %d", c.name, RowsBytes(rows), c.budget)
		case c.want != "" && (!errors.Is(err, ErrBudget) || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: err = %v, want ErrBudget and %q", c.name, err, c.want)
		}
	}
}

// rows is an endless dataset of JSONL rows of size bytes each (newline
// included), counting what was read of it.
type rows struct {
	row  []byte
	off  int64
	stop int64 // the most it gives: a test's safety, far past any bound
}

func (r *rows) Read(p []byte) (int, error) {
	if r.off >= r.stop {
		return 0, io.EOF
	}
	n := 0
	for n < len(p) {
		i := int(r.off % int64(len(r.row)))
		k := copy(p[n:], r.row[i:])
		n += k
		r.off += int64(k)
	}
	return n, nil
}

// TestManyRowsStopAtTheBudget: a dataset of rows of 128 KiB without end —
// each row within its bound, the whole of them past any — is refused at
// its budget (8 MiB here) with the line of the row that passed it,
// having read no more than the budget, that row and a buffer, and
// allocated a few times the budget (each row is read, decoded as JSON and
// kept as text: three copies), not the dataset.
func TestManyRowsStopAtTheBudget(t *testing.T) {
	const budget, size = 8 << 20, 128 << 10
	for _, format := range []string{FormatJSONL, FormatShareGPT} {
		src := &rows{stop: 1 << 40}
		var text string
		switch format {
		case FormatJSONL:
			text = `{"prompt": "` + strings.Repeat("a", size-len(`{"prompt": ""}`+"\n")) + `"}` + "\n"
		case FormatShareGPT:
			text = `{"conversations": [{"from": "human", "value": "` + strings.Repeat("a", size-len(`{"conversations": [{"from": "human", "value": ""}]},`+"\n")) + `"}]},` + "\n"
		}
		src.row = []byte(text)
		var r io.Reader = src
		if format == FormatShareGPT {
			r = io.MultiReader(strings.NewReader("[\n"), src)
		}
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		_, err := sample(r, "many", format, 100_000, 1, Limits{Budget: budget})
		runtime.ReadMemStats(&after)
		var re *RowError
		if !errors.As(err, &re) || !errors.Is(err, ErrBudget) {
			t.Fatalf("%s: err = %v, want the budget's RowError", format, err)
		}
		// Each row holds a little less than 128 KiB of text: the 65th passes
		// 8 MiB (on line 65; ShareGPT's rows start a line after "[").
		wantLine := budget/size + 1
		if format == FormatShareGPT {
			wantLine++
		}
		if re.Line != wantLine {
			t.Errorf("%s: refused at line %d, want %d: %v", format, re.Line, wantLine, err)
		}
		if src.off > budget+2*size+128<<10 {
			t.Errorf("%s: read %d bytes, want at most the budget %d, two rows and 128 KiB", format, src.off, budget)
		}
		if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 4*budget {
			t.Errorf("%s: allocated %d bytes, want under %d", format, alloc, 4*budget)
		} else {
			t.Logf("%s: refused at line %d having read %.1f MiB and allocated %.1f MiB", format, re.Line, float64(src.off)/(1<<20), float64(alloc)/(1<<20))
		}
	}
}

// TestSourceCopiesBudget: what CheckCopies counts of a level's requests
// is what the requests NewSource makes hold beyond the rows — measured
// on them: each request's list of messages, and every text that is not
// a row's own memory — give or take the two words a row sent again gets
// in front; NewSource refuses, with ErrBudget and before making any,
// requests past MaxBytes, and makes the same requests as without it
// when they fit.
func TestSourceCopiesBudget(t *testing.T) {
	tok := cl100k(t)
	var data []Row
	for i := range 10 {
		data = append(data, Row{Prompt: strings.Repeat("lorem ", 150+i), Line: i + 1})
	}
	for i := range 3 {
		data = append(data, Row{Messages: []api.Message{{Role: "system", Content: strings.Repeat("be brief ", 40)}, {Role: "user", Content: strings.Repeat("why ", 90+i)}}, Line: 11 + i})
	}
	// shared reports whether s is (part of) a row's own text.
	shared := func(s string) bool {
		p := uintptr(unsafe.Pointer(unsafe.StringData(s)))
		for _, r := range data {
			texts := []string{r.Prompt}
			for _, m := range r.Messages {
				texts = append(texts, m.Content)
			}
			for _, x := range texts {
				if b := uintptr(unsafe.Pointer(unsafe.StringData(x))); len(x) > 0 && p >= b && p < b+uintptr(len(x)) {
					return true
				}
			}
		}
		return false
	}
	for _, c := range []struct {
		name   string
		n      int
		prefix int
	}{
		{"each row once", 13, 0},
		{"rows sent again", 40, 0},
		{"a shared prefix", 13, 30},
		{"both", 30, 30},
	} {
		cfg := Config{Tokenizer: tok, Output: Fixed(8), Rows: data, PrefixTokens: c.prefix, PrefixGroups: 2, Seed: 7, Level: 1}
		src, err := NewSource(context.Background(), cfg, c.n)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		var held int64
		again := 0
		for i := range c.n {
			req, _ := src.Request(i)
			held += int64(len(req.Messages)) * messageBytes
			for _, m := range req.Messages {
				if !shared(m.Content) {
					held += int64(len(m.Content))
				}
			}
			if i >= len(data) {
				again++
			}
		}
		// Counted at least what is held, and no more than the words in
		// front of the rows sent again besides.
		cfg.MaxBytes = held - 1
		if err := cfg.CheckCopies(c.n); !errors.Is(err, ErrBudget) {
			t.Errorf("%s: the requests hold %d bytes besides the rows, and a budget of one less passes (%v)", c.name, held, err)
		} else if _, err := NewSource(context.Background(), cfg, c.n); !errors.Is(err, ErrBudget) || !strings.Contains(err.Error(), "the row of line ") {
			t.Errorf("%s: NewSource past its budget: %v, want ErrBudget naming the row", c.name, err)
		}
		cfg.MaxBytes = held + int64(again)*redrawBytes
		if err := cfg.CheckCopies(c.n); err != nil {
			t.Errorf("%s: the requests hold %d bytes besides the rows, %d sent again, and %d do not pass: %v", c.name, held, again, cfg.MaxBytes, err)
		}
		fit, err := NewSource(context.Background(), cfg, c.n)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		for i := range c.n {
			a, na := src.Request(i)
			b, nb := fit.Request(i)
			if a.Prompt() != b.Prompt() || na != nb || a.MaxTokens != b.MaxTokens {
				t.Fatalf("%s: request %d differs under a budget it fits", c.name, i)
			}
		}
		t.Logf("%s: %d requests hold %d bytes besides the rows (%d sent again)", c.name, c.n, held, again)
	}
}

// TestJSONLRowsReadAsEncodingJSON: a JSONL line is read as encoding/json
// reads it into {"prompt", "messages", "max_tokens"} — keys whatever their
// case, the last of a key given twice, escapes and surrogate pairs, nulls
// — and a line it refuses is refused.
func TestJSONLRowsReadAsEncodingJSON(t *testing.T) {
	type msg struct{ Role, Content string }
	var ref struct {
		Prompt    *string
		Messages  []msg
		MaxTokens *int `json:"max_tokens"`
	}
	var p fastjson.Parser
	for _, line := range []string{
		`{"prompt": "hi"}`,
		`{"Prompt": "case", "MAX_TOKENS": 7}`,
		`{"prompt": "first", "prompt": "last"}`,
		`{"prompt": "caf\u00e9 \ud83e\udd80 \"q\"\n\t\/"}`,
		`{"prompt": null, "messages": [{"role": "user", "content": "m"}]}`,
		`{"messages": [{"role": "system", "content": null}, {"ROLE": "user", "Content": "x", "content": "y"}], "max_tokens": 3}`,
		`{"prompt": "p", "messages": null, "max_tokens": null}`,
		`{"prompt": "p", "max_tokens": 5.0}`,
		`{"prompt": "p", "max_tokens": "5"}`,
		`{"prompt": 5}`,
		`{"messages": [{"role": "user", "content": ["part"]}]}`,
		`{"messages": ["hi"]}`,
		`[1, 2]`,
		`{nope`,
	} {
		ref.Prompt, ref.Messages, ref.MaxTokens = nil, nil, nil
		refErr := json.Unmarshal([]byte(line), &ref)
		row, err := parseJSONLRow(&p, []byte(line), "t.jsonl", 1)
		if refErr != nil {
			if err == nil {
				t.Errorf("%s: read as %+v; encoding/json refuses it: %v", line, row, refErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v; encoding/json reads it", line, err)
			continue
		}
		var want Row
		switch {
		case len(ref.Messages) > 0:
			for _, m := range ref.Messages {
				want.Messages = append(want.Messages, api.Message{Role: m.Role, Content: m.Content})
			}
		case ref.Prompt != nil:
			want.Prompt = *ref.Prompt
		}
		if ref.MaxTokens != nil {
			want.MaxTokens = *ref.MaxTokens
		}
		if row.Prompt != want.Prompt || row.MaxTokens != want.MaxTokens || !slices.Equal(row.Messages, want.Messages) {
			t.Errorf("%s: read as %+v, encoding/json as %+v", line, row, want)
		}
	}
}

// TestJSONLTextAsEncodingJSON: bytes that are not UTF-8 and lone UTF-16
// surrogate escapes read as encoding/json reads them (U+FFFD), which
// fastjson alone does not (FuzzJSONL found the first).
func TestJSONLTextAsEncodingJSON(t *testing.T) {
	for _, line := range []string{`{"prompt":"a\ud800b"}`, `{"prompt":"\udc00"}`, `{"prompt":"\ud83d\ude00 ok"}`,
		"{\"prompt\":\"\xff\xfe x\"}", "{\"prompt\":\"\xf1\"}", `{"prompt":"\ud800\ud800"}`,
		`{"messages":[{"role":"user","content":"x\udfff"}]}`, `{"prompt":"a \\ud800 literal"}`} {
		var want struct {
			Prompt   string
			Messages []api.Message
		}
		if err := json.Unmarshal([]byte(line), &want); err != nil {
			t.Fatal(err)
		}
		var p fastjson.Parser
		got, err := parseJSONLRow(&p, []byte(line), "f.jsonl", 1)
		if err != nil || got.Prompt != want.Prompt || len(got.Messages) != len(want.Messages) || len(want.Messages) > 0 && got.Messages[0].Content != want.Messages[0].Content {
			t.Errorf("%s: read %+v (%v), encoding/json reads %+v", line, got, err, want)
		}
	}
}

package workload

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tokbench/tokbench/api"
	"github.com/tokbench/tokbench/tokenize"
)

func TestParseDist(t *testing.T) {
	cases := []struct {
		in   string
		want Dist
	}{
		{"512", Dist{Mean: 512}},
		{"512:128", Dist{Mean: 512, StdDev: 128}},
		{"256-2048", Dist{Mean: 1152, Lo: 256, Hi: 2048}},
		{"32k", Dist{Mean: 32768}},
		{" 8K ", Dist{Mean: 8192}},
	}
	for _, c := range cases {
		got, err := ParseDist(c.in)
		if err != nil || got != c.want {
			t.Errorf("ParseDist(%q) = %+v, %v, want %+v", c.in, got, err, c.want)
		}
	}
	for _, bad := range []string{"", "0", "-5", "abc", "512:x", "2048-256", "1.5", "512:-1"} {
		if d, err := ParseDist(bad); err == nil {
			t.Errorf("ParseDist(%q) = %+v, want an error", bad, d)
		}
	}
	ds, err := ParseDists("1k,8k,32k")
	if err != nil || len(ds) != 3 || ds[0].Mean != 1024 || ds[2].Mean != 32768 {
		t.Errorf("ParseDists(1k,8k,32k) = %+v, %v", ds, err)
	}
}

func TestDistSample(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	const n = 40000
	normal, _ := ParseDist("512:128")
	var sum, sq float64
	for range n {
		v := float64(normal.Sample(rng))
		sum += v
		sq += v * v
	}
	mean := sum / n
	sd := math.Sqrt(sq/n - mean*mean)
	// Standard error of the mean is 128/200 = 0.64: 4 SE is 2.6.
	if math.Abs(mean-512) > 2.6 || math.Abs(sd-128) > 3 {
		t.Errorf("512:128 sampled mean %.1f sd %.1f", mean, sd)
	}
	uni, _ := ParseDist("256-260")
	seen := map[int]int{}
	for range n {
		seen[uni.Sample(rng)]++
	}
	for v := 256; v <= 260; v++ {
		if c := seen[v]; c < n/5-600 || c > n/5+600 {
			t.Errorf("256-260: %d drawn %d times of %d", v, c, n)
		}
	}
	if len(seen) != 5 {
		t.Errorf("256-260 drew values %v", seen)
	}
	wide, _ := ParseDist("2:50")
	for range 1000 {
		if v := wide.Sample(rng); v < 1 {
			t.Fatalf("2:50 sampled %d, want clamped to ≥ 1", v)
		}
	}
}

func cl100k(t testing.TB) tokenize.Tokenizer {
	tok, err := tokenize.Get("cl100k_base")
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func TestSourceSyntheticDistributions(t *testing.T) {
	tok := cl100k(t)
	in, _ := ParseDist("100:30")
	out, _ := ParseDist("10-20")
	cfg := Config{Tokenizer: tok, Input: in, Output: out, Model: "m", Seed: 3, MinTokens: 15}
	a, err := NewSource(context.Background(), cfg, 50)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := NewSource(context.Background(), cfg, 50)
	lengths := map[int]bool{}
	for i := range 50 {
		req, n := a.Request(i)
		if got := tok.Count(req.Prompt()); got != n {
			t.Errorf("request %d: prompt has %d tokens, source says %d", i, got, n)
		}
		lengths[n] = true
		if req.MaxTokens < 10 || req.MaxTokens > 20 {
			t.Errorf("request %d: max_tokens %d outside 10-20", i, req.MaxTokens)
		}
		if mt := req.Extra["min_tokens"]; mt != min(15, req.MaxTokens) {
			t.Errorf("request %d: min_tokens %v with max_tokens %d", i, mt, req.MaxTokens)
		}
		rb, nb := b.Request(i)
		if rb.Prompt() != req.Prompt() || nb != n || rb.MaxTokens != req.MaxTokens {
			t.Fatalf("request %d differs between two sources with one seed", i)
		}
	}
	if len(lengths) < 20 {
		t.Errorf("100:30 gave only %d distinct lengths in 50 prompts", len(lengths))
	}
}

func TestSourcePrefixGroups(t *testing.T) {
	tok := cl100k(t)
	cfg := Config{Tokenizer: tok, Input: Fixed(20), Output: Fixed(8), PrefixTokens: 64, PrefixGroups: 2, Seed: 9}
	s, err := NewSource(context.Background(), cfg, 6)
	if err != nil {
		t.Fatal(err)
	}
	prefixOf := func(i int) (string, string) {
		req, n := s.Request(i)
		if n != 84 || tok.Count(req.Prompt()) != 84 {
			t.Fatalf("request %d: %d tokens (counted %d), want 64 + 20", i, n, tok.Count(req.Prompt()))
		}
		ids := tok.Encode(req.Prompt())
		return tok.Decode(ids[:64]), tok.Decode(ids[64:])
	}
	p0, u0 := prefixOf(0)
	p1, _ := prefixOf(1)
	p2, u2 := prefixOf(2)
	p5, _ := prefixOf(5)
	if p0 != p2 || p1 != p5 {
		t.Error("requests of one prefix group do not share their first 64 tokens")
	}
	if p0 == p1 {
		t.Error("the two prefix groups are the same")
	}
	if u0 == u2 {
		t.Error("the unique parts of requests 0 and 2 are the same")
	}
	// The same prefixes at another input length (a sweep's next level).
	cfg.Input = Fixed(200)
	s2, _ := NewSource(context.Background(), cfg, 2)
	req, _ := s2.Request(0)
	if !strings.HasPrefix(req.Prompt(), p0) {
		t.Error("prefix changed with the input length")
	}
}

// wordTokenizer writes a byte-level tokenizer.json in which every
// candidate word with its leading space is one token (built by left-to-right
// merges), as in a real model's vocabulary.
func wordTokenizer(t testing.TB) tokenize.Tokenizer {
	vocab := map[string]int{}
	var enc [256]string
	n := 0
	for b := 0; b < 256; b++ {
		r := rune(b)
		if !(b >= '!' && b <= '~' || b >= 0xA1 && b <= 0xAC || b >= 0xAE && b <= 0xFF) {
			r = rune(256 + n)
			n++
		}
		enc[b] = string(r)
		vocab[enc[b]] = b
	}
	var merges [][2]string
	for _, w := range candidates {
		cur := enc[' ']
		for i := 0; i < len(w); i++ {
			next := cur + enc[w[i]]
			if _, ok := vocab[next]; !ok {
				vocab[next] = len(vocab)
				merges = append(merges, [2]string{cur, enc[w[i]]})
			}
			cur = next
		}
	}
	f := map[string]any{
		"pre_tokenizer": map[string]any{"type": "ByteLevel", "add_prefix_space": false, "use_regex": true},
		"decoder":       map[string]any{"type": "ByteLevel"},
		"model":         map[string]any{"type": "BPE", "vocab": vocab, "merges": merges},
	}
	data, _ := json.Marshal(f)
	path := filepath.Join(t.TempDir(), "tokenizer.json")
	os.WriteFile(path, data, 0o644)
	tok, err := tokenize.LoadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func TestSourceExactUnderTokenizerFile(t *testing.T) {
	tok := wordTokenizer(t)
	if got := tok.Count(" the water people"); got != 3 {
		t.Fatalf("test tokenizer: %q has %d tokens, want 3", " the water people", got)
	}
	if got := tok.Count("thewater"); got <= 2 {
		t.Fatalf("test tokenizer merges across words: %q has %d tokens", "thewater", got)
	}
	for _, n := range []int{1, 7, 300} {
		s, err := NewSource(context.Background(), Config{Tokenizer: tok, Input: Fixed(n), Output: Fixed(4), Seed: 1}, 3)
		if err != nil {
			t.Fatal(err)
		}
		for i := range 3 {
			req, want := s.Request(i)
			if got := tok.Count(req.Prompt()); got != n || want != n {
				t.Errorf("Fixed(%d) request %d: %d tokens re-encoded, source says %d", n, i, got, want)
			}
		}
	}
}

func TestSourceServerCounts(t *testing.T) {
	// A server whose tokenizer splits every word longer than 5 letters in
	// two: the source must grow or trim prompts until the server agrees.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct{ Prompt string }
		json.NewDecoder(r.Body).Decode(&body)
		n := 0
		for _, f := range strings.Fields(body.Prompt) {
			n++
			if len(f) > 5 {
				n++
			}
		}
		json.NewEncoder(w).Encode(map[string]int{"count": n})
	}))
	defer srv.Close()
	counter := &tokenize.Server{BaseURL: srv.URL + "/v1", HTTP: srv.Client()}
	cfg := Config{Tokenizer: cl100k(t), Counter: counter, Input: Fixed(200), Output: Fixed(4), Seed: 5}
	s, err := NewSource(context.Background(), cfg, 4)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		req, n := s.Request(i)
		got, _ := counter.CountContext(context.Background(), req.Prompt())
		if n != 200 || got != 200 {
			t.Errorf("request %d: server counts %d, source says %d, want 200", i, got, n)
		}
		if words := len(strings.Fields(req.Prompt())); words >= 200 {
			t.Errorf("request %d: %d words; long words should have been counted twice", i, words)
		}
	}
}

func TestSampleJSONL(t *testing.T) {
	rows, err := Sample("testdata/rows.jsonl", FormatJSONL, 100, 1, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	got := map[int]Row{}
	for _, r := range rows {
		got[r.Line] = r
	}
	if len(rows) != 4 || len(got) != 4 {
		t.Fatalf("Sample kept lines %v, want 1, 2, 4, 5", got)
	}
	if r := got[1]; r.Prompt != "Write a haiku about the sea." || r.MaxTokens != 40 {
		t.Errorf("line 1 = %+v", r)
	}
	if r := got[2]; len(r.Messages) != 2 || r.Messages[1] != (api.Message{Role: "user", Content: "What is TTFT?"}) || r.MaxTokens != 0 {
		t.Errorf("line 2 = %+v", r)
	}
	if r := got[5]; r.Prompt != "Count to five." || r.MaxTokens != 12 {
		t.Errorf("line 5 = %+v", r)
	}
	// k < rows: k distinct rows, the same for the same seed.
	a, _ := Sample("testdata/rows.jsonl", FormatJSONL, 2, 7, Limits{})
	b, _ := Sample("testdata/rows.jsonl", FormatJSONL, 2, 7, Limits{})
	if len(a) != 2 || len(b) != 2 {
		t.Fatalf("Sample(k=2) = %d rows then %d, want 2", len(a), len(b))
	}
	if a[0].Line == a[1].Line || a[0].Line != b[0].Line || a[1].Line != b[1].Line {
		t.Errorf("Sample(k=2) = lines %d,%d then %d,%d", a[0].Line, a[1].Line, b[0].Line, b[1].Line)
	}
}

func TestSampleIsUniform(t *testing.T) {
	var b strings.Builder
	for i := range 10 {
		b.WriteString(`{"prompt": "p` + string(rune('a'+i)) + `"}` + "\n")
	}
	path := filepath.Join(t.TempDir(), "ten.jsonl")
	os.WriteFile(path, []byte(b.String()), 0o644)
	counts := map[int]int{}
	for seed := range uint64(2000) {
		rows, err := Sample(path, FormatJSONL, 3, seed, Limits{})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			counts[r.Line]++
		}
	}
	// Each line is kept with probability 3/10: 600 of 2000 (sd ≈ 20.5).
	for line := 1; line <= 10; line++ {
		if c := counts[line]; c < 520 || c > 680 {
			t.Errorf("line %d kept %d times of 2000, want about 600", line, c)
		}
	}
}

func TestSampleShareGPT(t *testing.T) {
	format, _ := DetectFormat("testdata/sharegpt.json")
	if format != FormatShareGPT {
		t.Fatalf("DetectFormat = %q", format)
	}
	rows, err := Sample("testdata/sharegpt.json", format, 10, 1, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]Row{}
	for _, r := range rows {
		got[r.Prompt] = r
	}
	if r, ok := got["Hello there"]; !ok || r.Reply != "General Kenobi, you are a bold one" || r.Line != 2 {
		t.Errorf("entry a = %+v", r)
	}
	if r, ok := got["Second prompt"]; !ok || r.Reply != "ok" || r.Line != 3 {
		t.Errorf("entry b = %+v", r)
	}
	// The reply's token count becomes max_tokens.
	tok := cl100k(t)
	s, err := NewSource(context.Background(), Config{Tokenizer: tok, Rows: rows, Output: Fixed(99), Seed: 1}, 2)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		req, n := s.Request(i)
		if n != tok.Count(req.Prompt()) {
			t.Errorf("request %d: input tokens %d, prompt has %d", i, n, tok.Count(req.Prompt()))
		}
		if want := tok.Count(got[req.Prompt()].Reply); req.MaxTokens != want {
			t.Errorf("request %d: max_tokens %d, want the reply's %d tokens", i, req.MaxTokens, want)
		}
	}
}

func TestBadRows(t *testing.T) {
	cases := []struct {
		name, format, text, want string
	}{
		{"a.jsonl", FormatJSONL, "{\"prompt\": \"ok\"}\n\n{\"prompt\": 5}\n", `a.jsonl:3: field "prompt": want a string`},
		{"b.jsonl", FormatJSONL, `{"text": "x"}`, `b.jsonl:1: field "prompt": missing`},
		{"c.jsonl", FormatJSONL, "{\"prompt\": \"x\", \"max_tokens\": 0}\n", `c.jsonl:1: field "max_tokens"`},
		{"d.jsonl", FormatJSONL, "{\"prompt\": \"x\"}\n{\"messages\": [{\"content\": \"hi\"}]}\n", `d.jsonl:2: field "messages[0].role": missing`},
		{"e.jsonl", FormatJSONL, "{\"prompt\": \"x\"}\n{nope\n", `e.jsonl:2: invalid JSON`},
		{"f.jsonl", FormatJSONL, "[1,2]\n", `f.jsonl:1: want a JSON object`},
		{"g.json", FormatShareGPT, "[\n{\"conversations\": [{\"from\": \"human\", \"value\": \"x\"}]},\n{\"conversations\": [{\"from\": \"gpt\", \"value\": \"y\"}]}\n]", `g.json:3: field "[1].conversations": no human turn`},
		{"h.json", FormatShareGPT, "[\n{\"conversations\": [{\"from\": \"human\", \"value\": 3}]}\n]", `h.json:2: field "[0].conversations.value"`},
		{"i.json", FormatShareGPT, `{"conversations": []}`, `i.json:1: want a JSON array`},
	}
	for _, c := range cases {
		path := filepath.Join(t.TempDir(), c.name)
		os.WriteFile(path, []byte(c.text), 0o644)
		_, err := Sample(path, c.format, 10, 1, Limits{})
		if err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want %q", c.name, err, c.want)
		}
		if err != nil && strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: error is not one line: %q", c.name, err)
		}
	}
}

func TestCorpusCutExact(t *testing.T) {
	c, err := OpenCorpus("testdata/corpus.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, tok := range []tokenize.Tokenizer{cl100k(t), wordTokenizer(t)} {
		rng := rand.New(rand.NewPCG(4, 4))
		// 2000 tokens is more than the file holds: the cut wraps around.
		for _, n := range []int{1, 16, 100, 2000} {
			for range 5 {
				text, err := c.Cut(tok, n, rng)
				if err != nil {
					t.Fatalf("%s: Cut(%d): %v", tok.Name(), n, err)
				}
				if got := tok.Count(text); got != n {
					t.Errorf("%s: Cut(%d) has %d tokens: %q", tok.Name(), n, got, text)
				}
			}
		}
	}
	s, err := NewSource(context.Background(), Config{Tokenizer: cl100k(t), Corpus: c, Input: Fixed(50), Output: Fixed(4), Seed: 2}, 4)
	if err != nil {
		t.Fatal(err)
	}
	r0, n0 := s.Request(0)
	r1, _ := s.Request(1)
	if n0 != 50 || r0.Prompt() == r1.Prompt() {
		t.Errorf("corpus source: %d tokens, distinct prompts %v", n0, r0.Prompt() != r1.Prompt())
	}
}

func FuzzJSONL(f *testing.F) {
	for _, name := range []string{"testdata/rows.jsonl", "testdata/sharegpt.json"} {
		data, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte("{\"prompt\": \"\\u00e9\", \"max_tokens\": 1e3}\n{\"messages\": null, \"prompt\": \"x\"}"))
	f.Fuzz(func(t *testing.T, data []byte) {
		var rows []Row
		err := ReadJSONL(strings.NewReader(string(data)), "f.jsonl", Limits{}, func(r Row) error {
			rows = append(rows, r)
			return nil
		})
		if err != nil {
			if strings.Contains(err.Error(), "\n") || !strings.HasPrefix(err.Error(), "f.jsonl:") {
				t.Fatalf("error %q is not one line naming the file", err)
			}
			return
		}
		// Every accepted row has input, and writing it back reads the same.
		var out strings.Builder
		for _, r := range rows {
			if r.Text() == "" && len(r.Messages) == 0 {
				t.Fatalf("accepted a row with no input: %+v", r)
			}
			m := map[string]any{}
			if len(r.Messages) > 0 {
				m["messages"] = r.Messages
			} else {
				m["prompt"] = r.Prompt
			}
			if r.MaxTokens > 0 {
				m["max_tokens"] = r.MaxTokens
			}
			b, _ := json.Marshal(m)
			out.Write(b)
			out.WriteByte('\n')
		}
		i := 0
		err = ReadJSONL(strings.NewReader(out.String()), "g.jsonl", Limits{}, func(r Row) error {
			w := rows[i]
			if r.Prompt != w.Prompt || r.MaxTokens != w.MaxTokens || len(r.Messages) != len(w.Messages) {
				t.Fatalf("round trip of %+v gave %+v", w, r)
			}
			i++
			return nil
		})
		if err != nil || i != len(rows) {
			t.Fatalf("round trip: %v after %d of %d rows", err, i, len(rows))
		}
	})
}

func FuzzShareGPT(f *testing.F) {
	data, _ := os.ReadFile("testdata/sharegpt.json")
	f.Add(data)
	f.Fuzz(func(t *testing.T, data []byte) {
		err := ReadShareGPT(strings.NewReader(string(data)), "s.json", Limits{}, func(r Row) error {
			if r.Prompt == "" || r.Line < 1 {
				t.Fatalf("accepted %+v", r)
			}
			return nil
		})
		if err != nil && !strings.HasPrefix(err.Error(), "s.json:") {
			t.Fatalf("error %q does not name the file", err)
		}
	})
}

func TestSourceLevelsDiffer(t *testing.T) {
	tok := cl100k(t)
	cfg := Config{Tokenizer: tok, Input: Fixed(30), Output: Fixed(4), PrefixTokens: 10, Seed: 1}
	a, _ := NewSource(context.Background(), cfg, 1)
	cfg.Level = 1
	b, _ := NewSource(context.Background(), cfg, 1)
	ra, _ := a.Request(0)
	rb, _ := b.Request(0)
	pa, pb := tok.Encode(ra.Prompt()), tok.Encode(rb.Prompt())
	if tok.Decode(pa[:10]) != tok.Decode(pb[:10]) {
		t.Error("levels of one run have different shared prefixes")
	}
	if tok.Decode(pa[10:]) == tok.Decode(pb[10:]) {
		t.Error("two levels sent the same unique prompt (the second would hit the prompt cache)")
	}
}

// TestSourceRoundsAreNew: when a level comes round its list of requests
// again (a duration level), and for warm-ups, every prompt is new and a
// synthetic one keeps its exact length; a prompt from a dataset gets two
// words in front, counted.
func TestSourceRoundsAreNew(t *testing.T) {
	tok := cl100k(t)
	for _, c := range []struct {
		name string
		cfg  Config
	}{
		{"synthetic", Config{Tokenizer: tok, Input: Fixed(24), Output: Fixed(4), Seed: 3}},
		{"synthetic with a shared prefix", Config{Tokenizer: tok, Input: Fixed(24), Output: Fixed(4), Seed: 3, PrefixTokens: 16, PrefixGroups: 1}},
		{"dataset", Config{Tokenizer: tok, Output: Fixed(4), Seed: 3, Rows: []Row{{Prompt: "Tell me about the sea."}, {Prompt: "Why is the sky blue?"}}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			src, err := NewSource(context.Background(), c.cfg, 4)
			if err != nil {
				t.Fatal(err)
			}
			seen := map[string]int{}
			check := func(what string, req *api.Request, n int) {
				p := req.Prompt()
				if j, dup := seen[p]; dup {
					t.Errorf("%s: prompt already sent as request %d: %q", what, j, p)
				}
				seen[p] = len(seen)
				if got := tok.Count(p); got != n {
					t.Errorf("%s: %d tokens, the source says %d", what, got, n)
				}
				if c.cfg.PrefixTokens > 0 && !strings.HasPrefix(p, src.reqs[0].Prompt()[:40]) {
					t.Errorf("%s: the shared prefix is gone: %q", what, p)
				}
			}
			for i := range 12 {
				req, n := src.Request(i)
				check(fmt.Sprintf("request %d", i), req, n)
			}
			for i := range 6 {
				req, n := src.WarmupRequest(i)
				check(fmt.Sprintf("warm-up %d", i), req, n)
			}
			if _, n := src.Request(5); c.cfg.Rows == nil && n != c.cfg.PrefixTokens+24 {
				t.Errorf("a synthetic prompt of a later round has %d tokens, want %d", n, c.cfg.PrefixTokens+24)
			}
		})
	}
}

// longWordCounter counts as the fake server does: a word of more than
// five letters is two tokens.
type longWordCounter struct{}

func (longWordCounter) CountContext(_ context.Context, text string) (int, error) {
	n := 0
	for _, w := range strings.Fields(text) {
		n++
		if len(w) > 5 {
			n++
		}
	}
	return n, nil
}

// TestServerCountConvergesForAnySeed: prompts counted by a server whose
// tokenizer splits long words reach the exact length for every seed (a
// word added and dropped in turn must not keep missing the count).
func TestServerCountConvergesForAnySeed(t *testing.T) {
	for seed := range uint64(300) {
		src, err := NewSource(context.Background(), Config{Tokenizer: cl100k(t), Counter: longWordCounter{}, Input: Fixed(40), Output: Fixed(4), Seed: seed}, 4)
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		for i := range 4 {
			req, n := src.Request(i)
			if got, _ := (longWordCounter{}).CountContext(context.Background(), req.Prompt()); got != 40 || n != 40 {
				t.Fatalf("seed %d request %d: %d tokens by the server's count, source says %d, want 40", seed, i, got, n)
			}
		}
	}
}

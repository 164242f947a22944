package tokenize

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/dlclark/regexp2/v2"
)

// llama3Split is the pre-tokenizer pattern of Llama 3's tokenizer.json.
const llama3Split = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`

// byteLevelFile writes a Llama-3-style byte-level tokenizer.json: the 256
// byte runes with id = byte value, then one id per merge from 256 on.
func byteLevelFile(t testing.TB, merges [][2]string, added map[string]int) string {
	t.Helper()
	vocab := map[string]int{}
	for b := 0; b < 256; b++ {
		vocab[string(byteRunes[b])] = b
	}
	for i, m := range merges {
		vocab[m[0]+m[1]] = 256 + i
	}
	var addedTokens []map[string]any
	for s, id := range added {
		addedTokens = append(addedTokens, map[string]any{"id": id, "content": s, "special": true})
	}
	f := map[string]any{
		"version":      "1.0",
		"added_tokens": addedTokens,
		"normalizer":   nil,
		"pre_tokenizer": map[string]any{"type": "Sequence", "pretokenizers": []any{
			map[string]any{"type": "Split", "pattern": map[string]any{"Regex": llama3Split}, "behavior": "Isolated", "invert": false},
			map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": false},
		}},
		"post_processor": map[string]any{"type": "TemplateProcessing"},
		"decoder":        map[string]any{"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true},
		"model":          map[string]any{"type": "BPE", "vocab": vocab, "merges": merges, "ignore_merges": false, "byte_fallback": false},
	}
	return writeJSON(t, f)
}

func writeJSON(t testing.TB, v any) string {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "tokenizer.json")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

var testMerges = [][2]string{
	{"Ġ", "t"},   // 256
	{"h", "e"},   // 257
	{"Ġt", "he"}, // 258
	{"i", "n"},   // 259
	{"Ġ", "c"},   // 260
	{"a", "t"},   // 261
	{"Ġc", "at"}, // 262
	{"Ġ", "Ġ"},   // 263
}

func ids(v ...uint) []uint { return v }

func TestByteLevelEncode(t *testing.T) {
	tok, err := LoadFile(byteLevelFile(t, testMerges, map[string]int{"<|eot_id|>": 300}))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		text string
		want []uint
	}{
		// "the" is its own piece with no leading space: only h+e merges.
		{"the cat", ids('t', 257, 262)},
		// Ġ+t (rank 0) before h+e (rank 1), then Ġt+he (rank 2).
		{" the", ids(258)},
		// An added token is one id wherever it appears; text around it is
		// encoded on its own.
		{" the<|eot_id|>x", ids(258, 300, 'x')},
		// \s+(?!\S) leaves the last space to the word: " ", " x" (no ĠĠ).
		{"  x", ids(' ', ' ', 'x')},
		// Trailing spaces stay together and merge.
		{"x  ", ids('x', 263)},
		// Bytes of a multi-byte rune are separate tokens here.
		{"é", ids(0xC3, 0xA9)},
		{"a\nb", ids('a', '\n', 'b')},
		{"", nil},
	}
	for _, c := range cases {
		got := tok.Encode(c.text)
		if !slices.Equal(got, c.want) {
			t.Errorf("Encode(%q) = %v, want %v", c.text, got, c.want)
		}
		if n := tok.Count(c.text); n != len(c.want) {
			t.Errorf("Count(%q) = %d, want %d", c.text, n, len(c.want))
		}
		if back := tok.Decode(got); back != c.text {
			t.Errorf("Decode(Encode(%q)) = %q", c.text, back)
		}
	}
}

func TestMergeOrderIsRankNotPosition(t *testing.T) {
	// "abc": b+c has the lower rank, so a,bc wins although a+b comes first.
	merges := [][2]string{{"b", "c"}, {"a", "b"}}
	tok, err := LoadFile(byteLevelFile(t, merges, nil))
	if err != nil {
		t.Fatal(err)
	}
	if got := tok.Encode("abc"); !slices.Equal(got, ids('a', 256)) {
		t.Errorf("Encode(abc) = %v, want [97 256]", got)
	}
	// Equal ranks resolve leftmost first: "aaa" with a+a gives aa,a.
	tok2, _ := LoadFile(byteLevelFile(t, [][2]string{{"a", "a"}}, nil))
	if got := tok2.Encode("aaa"); !slices.Equal(got, ids(256, 'a')) {
		t.Errorf("Encode(aaa) = %v, want [256 97]", got)
	}
}

// sentencePieceFile is a Llama-2-style file: Prepend/Replace normalizer, no
// pre-tokenizer, byte fallback.
func sentencePieceFile(t testing.TB) string {
	vocab := map[string]int{"<unk>": 0, "<s>": 1, "</s>": 2}
	for b := 0; b < 256; b++ {
		vocab["<0x"+strings.ToUpper(hex2(b))+">"] = 3 + b
	}
	for i, s := range []string{"▁", "h", "i", "▁h", "▁hi"} {
		vocab[s] = 259 + i
	}
	return writeJSON(t, map[string]any{
		"added_tokens": []any{map[string]any{"id": 1, "content": "<s>", "special": true}},
		"normalizer": map[string]any{"type": "Sequence", "normalizers": []any{
			map[string]any{"type": "Prepend", "prepend": "▁"},
			map[string]any{"type": "Replace", "pattern": map[string]any{"String": " "}, "content": "▁"},
		}},
		"pre_tokenizer": nil,
		"decoder": map[string]any{"type": "Sequence", "decoders": []any{
			map[string]any{"type": "Replace", "pattern": map[string]any{"String": "▁"}, "content": " "},
			map[string]any{"type": "ByteFallback"}, map[string]any{"type": "Fuse"},
			map[string]any{"type": "Strip", "content": " ", "start": 1, "stop": 0},
		}},
		"model": map[string]any{"type": "BPE", "vocab": vocab, "merges": []string{"▁ h", "▁h i"},
			"unk_token": "<unk>", "byte_fallback": true, "fuse_unk": true},
	})
}

func hex2(b int) string {
	const digits = "0123456789abcdef"
	return string([]byte{digits[b>>4], digits[b&15]})
}

func TestSentencePieceEncode(t *testing.T) {
	tok, err := LoadFile(sentencePieceFile(t))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		text string
		want []uint
	}{
		{"hi hi", ids(263, 263)},
		{"hé", ids(262, 3+0xC3, 3+0xA9)}, // é falls back to its two bytes
		{"ih", ids(259, 261, 260)},       // ▁,i,h: no merge applies
	}
	for _, c := range cases {
		got := tok.Encode(c.text)
		if !slices.Equal(got, c.want) {
			t.Errorf("Encode(%q) = %v, want %v", c.text, got, c.want)
		}
		if back := tok.Decode(got); back != c.text {
			t.Errorf("Decode(Encode(%q)) = %q", c.text, back)
		}
	}
	// The text after an added token is normalized on its own (▁ prepended).
	if got := tok.Encode("<s>hi"); !slices.Equal(got, ids(1, 263)) {
		t.Errorf("Encode(<s>hi) = %v, want [1 263]", got)
	}
}

func TestLoadFileErrors(t *testing.T) {
	cases := []struct {
		name string
		file any
		want string
	}{
		{"wordpiece", map[string]any{"model": map[string]any{"type": "WordPiece", "vocab": map[string]int{"a": 0}}}, "WordPiece"},
		{"bad merge", map[string]any{"model": map[string]any{"type": "BPE", "vocab": map[string]int{"a": 0}, "merges": []string{"a a"}}}, "merges[0]"},
		{"unknown pre", map[string]any{"pre_tokenizer": map[string]any{"type": "Shouty"},
			"model": map[string]any{"type": "BPE", "vocab": map[string]int{"a": 0}, "merges": []string{}}}, "Shouty"},
	}
	for _, c := range cases {
		_, err := LoadFile(writeJSON(t, c.file))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want one naming %q", c.name, err, c.want)
		}
	}
	if _, err := Open(filepath.Join(t.TempDir(), "missing.json")); err == nil || !strings.Contains(err.Error(), "missing.json") {
		t.Errorf("Open(missing) err = %v", err)
	}
}

func TestSplitBehaviors(t *testing.T) {
	// Split on "-" with each HF behavior, then look at the pieces.
	cases := map[string][]string{
		"Isolated":           {"a", "-", "b", "-", "-", "c"},
		"Removed":            {"a", "b", "c"},
		"MergedWithPrevious": {"a-", "b-", "-", "c"},
		"MergedWithNext":     {"a", "-b", "--c"},
		"Contiguous":         {"a", "-", "b", "--", "c"},
	}
	for behavior, want := range cases {
		step := splitStep(mustRe("-"), behavior, false)
		if got := step("a-b--c", true); !slices.Equal(got, want) {
			t.Errorf("%s: split(a-b--c) = %q, want %q", behavior, got, want)
		}
	}
}

func FuzzByteLevelRoundTrip(f *testing.F) {
	tok, err := LoadFile(byteLevelFile(f, testMerges, map[string]int{"<|eot_id|>": 300}))
	if err != nil {
		f.Fatal(err)
	}
	for _, s := range []string{"the cat", "  x\n\n y", "héllo wörld 123456", "<|eot_id|><|eot", "\xff\xfe"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		enc := tok.Encode(s)
		if got := tok.Decode(enc); got != s {
			t.Fatalf("Decode(Encode(%q)) = %q", s, got)
		}
		if len(enc) > len(s) {
			t.Fatalf("Encode(%q) has %d ids for %d bytes", s, len(enc), len(s))
		}
	})
}

func mustRe(expr string) *regexp2.Regexp { return regexp2.MustCompile(expr, regexp2.Unicode) }

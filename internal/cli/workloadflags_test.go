package cli

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tokbench/tokbench/internal/fakellm"
)

func TestBenchWorkloadBadInput(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.jsonl")
	os.WriteFile(bad, []byte("{\"prompt\": \"ok\"}\n{\"prompt\": \"\"}\n"), 0o644)
	// A row just past the 16 MiB a row may hold (issue 34's was 2 GB).
	huge := filepath.Join(dir, "huge.jsonl")
	os.WriteFile(huge, []byte("{\"prompt\": \"ok\"}\n{\"prompt\": \""+strings.Repeat("a", 16<<20)+"\"}\n"), 0o644)
	// Many rows past the budget of their text (issue 34: bounded per row,
	// not in total), and rows within it whose copies a level of more
	// requests than rows would make pass it.
	row := func(n int) string { return "{\"prompt\": \"" + strings.Repeat("b", n) + "\"}\n" }
	many := filepath.Join(dir, "many.jsonl")
	os.WriteFile(many, []byte(strings.Repeat(row(1<<20), 5)), 0o644)
	two := filepath.Join(dir, "two.jsonl")
	os.WriteFile(two, []byte(row(512<<10)+row(512<<10)), 0o644)
	// A Llama-2-style tokenizer that knows letters only: no word is one
	// token, so no prompt of an exact length can be made of words.
	letters := map[string]int{"<unk>": 0, "▁": 1}
	for c := 'a'; c <= 'z'; c++ {
		letters[string(c)] = len(letters)
	}
	noWords, _ := json.Marshal(map[string]any{
		"normalizer": map[string]any{"type": "Sequence", "normalizers": []any{
			map[string]any{"type": "Prepend", "prepend": "▁"},
			map[string]any{"type": "Replace", "pattern": map[string]any{"String": " "}, "content": "▁"},
		}},
		"model": map[string]any{"type": "BPE", "vocab": letters, "merges": []string{}, "unk_token": "<unk>"},
	})
	letterTok := filepath.Join(dir, "letters.json")
	os.WriteFile(letterTok, noWords, 0o644)
	srv := fakellm.New(fakellm.Script{Tokens: 4, Usage: true})
	defer srv.Close()
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--input-tokens", "abc"}, "--input-tokens"},
		{[]string{"--input-tokens", "512:x"}, "--input-tokens"},
		{[]string{"--output-tokens", "9-3"}, "--output-tokens"},
		{[]string{"--dataset", bad}, `bad.jsonl:2: field "prompt": is empty`},
		{[]string{"--dataset", filepath.Join(dir, "none.jsonl")}, "--dataset"},
		{[]string{"--dataset", huge}, "--dataset: huge.jsonl:2: the row is more than 16777216 bytes"},
		{[]string{"--dataset", bad, "--dataset-format", "csv"}, "--dataset-format"},
		{[]string{"--dataset", many, "--dataset-budget", "2MiB"},
			"--dataset: many.jsonl:3: with this row the rows kept hold 3145728 bytes of text, more than the 2097152 a dataset may hold (its budget); --dataset-budget raises it"},
		// 2 rows of 512 KiB leave 1 MiB: 8 requests send each row 4 times,
		// and the fourth request's copy passes it.
		{[]string{"--dataset", two, "--dataset-budget", "2MiB", "--requests", "8", "--concurrency", "1"},
			"--dataset: two.jsonl: the 8 requests of a level made of its 2 rows would take more than the 1048576 bytes its rows leave of its budget: they pass it at request 4, the row of line "},
		{[]string{"--dataset", two, "--dataset-budget", "lots"}, "--dataset-budget: want a size"},
		{[]string{"--tokenizer", filepath.Join(dir, "tokenizer.json")}, "--tokenizer"},
		{[]string{"--tokenizer", letterTok}, "letters.json: no exact synthetic prompts: 0 of 208 common English words have a known token count, 50 needed"},
		{[]string{"--tokenizer", letterTok, "--dataset", two}, "--tokenizer: tokenizer "},
		{[]string{"--prefix-groups", "0"}, "--prefix-groups"},
		{[]string{"--input-tokens", "1k,2k", "--sweep", "auto"}, "--input-tokens"},
	}
	for _, c := range cases {
		args := append([]string{"bench", "--url", srv.URL + "/v1", "--model", "m"}, c.args...)
		code, _, stderr := runCLI(context.Background(), nil, args...)
		if code != ExitUsage || !strings.Contains(stderr, c.want) || strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
			t.Errorf("%v: exit %d, stderr %q, want 2 and one line with %q", c.args, code, stderr, c.want)
		}
	}
	if n := len(srv.Bodies()); n != 0 {
		t.Errorf("bad input sent %d requests", n)
	}
}

func TestBenchDataset(t *testing.T) {
	path := filepath.Join(t.TempDir(), "d.jsonl")
	os.WriteFile(path, []byte("{\"prompt\": \"alpha\", \"max_tokens\": 3}\n{\"messages\": [{\"role\": \"user\", \"content\": \"beta\"}]}\n"), 0o644)
	srv := fakellm.New(fakellm.Script{Tokens: 4, Usage: true})
	defer srv.Close()
	code, _, stderr := runCLI(context.Background(), nil, "bench", "--url", srv.URL+"/v1", "--model", "m",
		"--dataset", path, "--concurrency", "1", "--requests", "4", "--warmup", "0", "--output-tokens", "7", "--format", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	// Four requests from two rows: the rows come round again with two
	// words of their own in front, so no prompt is sent twice.
	seen := map[string]float64{}
	rows := map[string]int{}
	for _, b := range srv.Bodies() {
		msgs := b["messages"].([]any)
		content := msgs[0].(map[string]any)["content"].(string)
		seen[content] = b["max_tokens"].(float64)
		for _, row := range []string{"alpha", "beta"} {
			if strings.HasSuffix(content, row) {
				rows[row]++
				if want := map[string]float64{"alpha": 3, "beta": 7}[row]; b["max_tokens"].(float64) != want {
					t.Errorf("%q: max_tokens %v, want %v", content, b["max_tokens"], want)
				}
			}
		}
	}
	if len(seen) != 4 || rows["alpha"] != 2 || rows["beta"] != 2 || seen["alpha"] != 3 || seen["beta"] != 7 {
		t.Errorf("server saw prompts and max_tokens %v, want alpha:3 (its own) and beta:7 (--output-tokens), each once as it is and once with two words in front", seen)
	}
}

package workload

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/tokbench/tokbench/tokenize"
)

// TestTools: the same n and seed give the same definitions, each with a
// distinct name and a JSON-schema object of parameters; another seed
// gives others.
func TestTools(t *testing.T) {
	a, b := Tools(8, 1), Tools(8, 1)
	if len(a) != 8 || !reflect.DeepEqual(a, b) {
		t.Fatalf("Tools(8, 1) twice: %d definitions, equal %v", len(a), reflect.DeepEqual(a, b))
	}
	if reflect.DeepEqual(a, Tools(8, 2)) {
		t.Error("another seed gave the same definitions")
	}
	names := map[string]bool{}
	for _, tl := range a {
		var schema struct {
			Type       string                    `json:"type"`
			Properties map[string]map[string]any `json:"properties"`
			Required   []string                  `json:"required"`
		}
		if err := json.Unmarshal(tl.Parameters, &schema); err != nil || schema.Type != "object" || len(schema.Properties) < 1 || len(schema.Required) < 1 {
			t.Errorf("%s: parameters %s: %v", tl.Name, tl.Parameters, err)
		}
		for _, r := range schema.Required {
			if schema.Properties[r] == nil {
				t.Errorf("%s: required %q is no property", tl.Name, r)
			}
		}
		if names[tl.Name] || tl.Description == "" {
			t.Errorf("name %q again, or no description", tl.Name)
		}
		names[tl.Name] = true
	}
}

// TestReadTools: OpenAI's, Anthropic's and plain definitions read alike;
// a file that is no set of definitions, or too large, is refused with its
// name — a 10 MB file unread past the bound.
func TestReadTools(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, body := range []string{
		`[{"type":"function","function":{"name":"f","description":"d","parameters":{"type":"object"}}}]`,
		`[{"name":"f","description":"d","input_schema":{"type":"object"}}]`,
		`[{"name":"f","description":"d","parameters":{"type":"object"}}]`,
	} {
		tools, err := ReadTools(write("t.json", body))
		if err != nil || len(tools) != 1 || tools[0].Name != "f" || tools[0].Description != "d" || string(tools[0].Parameters) != `{"type":"object"}` {
			t.Errorf("%s: %+v, %v", body, tools, err)
		}
	}
	big := filepath.Join(dir, "big.json")
	f, err := os.Create(big)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`[{"name":"f","description":"`)
	f.WriteString(strings.Repeat("x", 10<<20))
	f.WriteString(`"}]`)
	f.Close()
	for path, want := range map[string]string{
		big:                               "larger than 1024 KiB",
		write("empty.json", `[]`):         "no tool definitions",
		write("obj.json", `{"name":"f"}`): "want a JSON array",
		write("noname.json", `[{}]`):      "tool 0: no name",
	} {
		_, err := ReadTools(path)
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), filepath.Base(path)) {
			t.Errorf("%s: %v, want an error naming it and saying %q", filepath.Base(path), err, want)
		}
	}
}

// TestEmbedSource: request i embeds the prompts of the base's requests
// i·n to i·n+n−1, each of the exact length asked, its tokens their sum.
func TestEmbedSource(t *testing.T) {
	tok, err := tokenize.Get("cl100k_base")
	if err != nil {
		t.Fatal(err)
	}
	base, err := NewSource(context.Background(), Config{Tokenizer: tok, Input: Fixed(32), Output: Fixed(8), Seed: 3}, 12)
	if err != nil {
		t.Fatal(err)
	}
	src := NewEmbedSource(base, 4)
	seen := map[string]bool{}
	for i := range 3 {
		req, n := src.Request(i)
		if len(req.Inputs) != 4 || n != 4*32 || len(req.Messages) != 0 || req.MaxTokens != 0 {
			t.Fatalf("request %d: %d inputs, %d tokens, %d messages", i, len(req.Inputs), n, len(req.Messages))
		}
		for k, in := range req.Inputs {
			b, _ := base.Request(i*4 + k)
			if in != b.Prompt() || tok.Count(in) != 32 || seen[in] {
				t.Errorf("request %d input %d: %d tokens, the base's prompt %v, seen %v", i, k, tok.Count(in), in == b.Prompt(), seen[in])
			}
			seen[in] = true
		}
	}
	w, n := src.WarmupRequest(0)
	if len(w.Inputs) != 4 || n != 4*32 || seen[w.Inputs[0]] {
		t.Errorf("warm-up: %d inputs, %d tokens, a level's input %v", len(w.Inputs), n, seen[w.Inputs[0]])
	}
	tools := Tools(3, 1)
	tr, _ := NewToolSource(base, tools).Request(5)
	b5, _ := base.Request(5)
	if len(tr.Tools) != 3 || tr.Prompt() != b5.Prompt() || len(b5.Tools) != 0 {
		t.Errorf("tool source: %d tools, its prompt the base's %v, the base changed %v", len(tr.Tools), tr.Prompt() == b5.Prompt(), len(b5.Tools))
	}
}

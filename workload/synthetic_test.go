package workload

import (
	"testing"

	"github.com/tokbench/tokbench/tokenize"
)

func TestPromptExactLength(t *testing.T) {
	for _, name := range tokenize.Names {
		tok, err := tokenize.Get(name)
		if err != nil {
			t.Fatal(err)
		}
		s, err := NewSynthetic(tok, 7)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range []int{1, 2, 17, 128, 1024, 4000} {
			p, err := s.Prompt(n)
			if err != nil {
				t.Fatalf("%s: Prompt(%d): %v", name, n, err)
			}
			if got := tok.Count(p); got != n {
				t.Errorf("%s: Prompt(%d) has %d tokens", name, n, got)
			}
		}
	}
}

func TestPromptDeterministicAndDistinct(t *testing.T) {
	tok, _ := tokenize.Get("cl100k_base")
	a, _ := NewSynthetic(tok, 1)
	b, _ := NewSynthetic(tok, 1)
	p1, _ := a.Prompt(64)
	p2, _ := b.Prompt(64)
	if p1 != p2 {
		t.Error("same seed gave different prompts")
	}
	p3, _ := a.Prompt(64)
	if p3 == p1 {
		t.Error("consecutive prompts are identical")
	}
}

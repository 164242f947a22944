package cli

import (
	"context"
	"strings"
	"testing"
)

// TestHelpGroupedAndWrapped: every command's help fits 100 columns; bench
// lists each flag once, in its groups, after examples.
func TestHelpGroupedAndWrapped(t *testing.T) {
	for _, cmd := range []string{"bench", "ceiling", "compare", "simulate", "serve", "merge", "report", "import-vllm"} {
		code, out, _ := runCLI(context.Background(), nil, cmd, "--help")
		if code != 0 {
			t.Fatalf("%s --help: exit %d", cmd, code)
		}
		for _, l := range strings.Split(out, "\n") {
			if n := len([]rune(l)); n > helpWidth {
				t.Errorf("%s --help: a line of %d columns: %q", cmd, n, l)
			}
		}
		if cmd != "bench" {
			continue
		}
		for _, want := range []string{"Examples:", "Target:", "Load:", "Prompts and outputs:", "Objectives, physics and cost:", "Failures and limits:", "Output:"} {
			if !strings.Contains(out, "\n"+want+"\n") {
				t.Errorf("bench --help lacks the section %q", want)
			}
		}
		for _, name := range []string{"url", "concurrency", "input-tokens", "slo", "timeout", "out", "redirects"} {
			n := 0
			for _, l := range strings.Split(out, "\n") {
				if f := strings.Fields(l); len(f) > 0 && f[0] == "--"+name {
					n++
				}
			}
			if n != 1 {
				t.Errorf("bench --help lists --%s %d times", name, n)
			}
		}
		if strings.Contains(out, "\nOther:\n") {
			t.Errorf("bench --help has flags in no group:\n%s", out[strings.Index(out, "\nOther:\n"):])
		}
	}
}

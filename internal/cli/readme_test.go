package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/tokbench/tokbench/internal/busy"
)

// readmeCommand is one "$ tokbench …" line of a console block of the
// README and the output lines shown under it.
type readmeCommand struct {
	line  string
	args  []string
	shown []string
}

// readmeExamples reads the console blocks of the README: the commands of
// one block run in one directory, in order.
func readmeExamples(t *testing.T) [][]readmeCommand {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	var blocks [][]readmeCommand
	var cur []readmeCommand
	in := false
	for _, line := range strings.Split(string(b), "\n") {
		switch {
		case line == "```console":
			in, cur = true, nil
		case in && line == "```":
			in = false
			blocks = append(blocks, cur)
		case in && strings.HasPrefix(line, "$ "):
			cmd := strings.TrimPrefix(line, "$ ")
			cmd = strings.TrimPrefix(cmd, "go run ./cmd/tokbench ")
			cmd = strings.TrimPrefix(cmd, "tokbench ")
			cur = append(cur, readmeCommand{line: line, args: shellFields(t, cmd)})
		case in:
			if len(cur) == 0 {
				t.Fatalf("README: output %q before any command of its block", line)
			}
			cur[len(cur)-1].shown = append(cur[len(cur)-1].shown, line)
		}
	}
	return blocks
}

// shellFields splits a command line as sh does for the README's simple
// commands: words, and double-quoted strings taken whole.
func shellFields(t *testing.T, s string) []string {
	var out []string
	var word strings.Builder
	inQuote, any := false, false
	for _, r := range s {
		switch {
		case r == '"':
			inQuote, any = !inQuote, true
		case r == ' ' && !inQuote:
			if any {
				out = append(out, word.String())
			}
			word.Reset()
			any = false
		default:
			word.WriteRune(r)
			any = true
		}
	}
	if inQuote {
		t.Fatalf("README: unclosed quote in %q", s)
	}
	if any {
		out = append(out, word.String())
	}
	return out
}

var figures = regexp.MustCompile(`[0-9][0-9,.]*|PORT`)

var verdicts = regexp.MustCompile(`(^| )(better|worse|~)\??( |$)`)

// signs are the signs of a compare line's changes and intervals.
var signs = regexp.MustCompile(`[-+]([0-9])`)

// noVerdict is a compare line with its verdict word blanked, and the
// signs of its figures: which way a change went is the verdict's too.
func noVerdict(line string) string {
	return signs.ReplaceAllString(verdicts.ReplaceAllString(line, "V "), "$1")
}

// shape is a line with every figure one "#" and runs of spaces one
// space: what a measured run keeps from one run to the next.
func shape(line string) string {
	return strings.Join(strings.Fields(figures.ReplaceAllString(line, "#")), " ")
}

// TestREADMEExamples runs every "$ tokbench" line of the README's console
// blocks against the simulator (the embedded one, or in virtual time),
// each block in a directory of its own, and checks that it exits 0 and
// prints the lines shown under it, in order ("…" stands for lines left
// out): byte for byte from simulate and ceiling, figures aside from the
// commands that measure (bench, and compare of what bench measured).
func TestREADMEExamples(t *testing.T) {
	blocks := readmeExamples(t)
	if len(blocks) < 4 {
		t.Fatalf("README: %d console blocks, want the first command's and three examples'", len(blocks))
	}
	for _, block := range blocks {
		dir := t.TempDir()
		// quiet says the machine let every command of the block so far
		// run: a compare of runs a busy machine slowed may find a change
		// it would call significant uncertain (better?), or the reverse,
		// or that it went the other way.
		quiet := true
		for _, c := range block {
			t.Run(strings.Join(c.args, " "), func(t *testing.T) {
				t.Chdir(dir)
				var out bytes.Buffer
				watch := busy.Start()
				code := Run(context.Background(), c.args, Env{Stdout: &out, Stderr: &out, Getenv: func(string) string { return "" }})
				lag := watch.Stop()
				if code != ExitOK {
					t.Fatalf("%s: exit %d:\n%s", c.line, code, out.String())
				}
				// simulate and ceiling compute in virtual time: the same
				// bytes every run; what bench measures differs in figures.
				same := func(got, want string) bool { return shape(got) == shape(want) }
				switch {
				case c.args[0] == "simulate" || c.args[0] == "ceiling":
					same = func(got, want string) bool { return strings.TrimRight(got, " ") == want }
				case c.args[0] == "compare" && !quiet:
					t.Logf("%s: verdicts not judged: the machine kept the runs compared from their cores", c.line)
					same = func(got, want string) bool { return shape(noVerdict(got)) == shape(noVerdict(want)) }
				}
				quiet = quiet && lag.Quiet()
				got := strings.Split(out.String(), "\n")
				i := 0
				for _, want := range c.shown {
					if strings.TrimSpace(want) == "" || want == "…" {
						continue
					}
					for i < len(got) && !same(got[i], want) {
						i++
					}
					if i == len(got) {
						t.Fatalf("%s: the README shows\n\t%s\nand the run printed no such line after the ones before it:\n%s", c.line, want, out.String())
					}
					i++
				}
			})
		}
	}
}

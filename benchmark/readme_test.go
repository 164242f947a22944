package benchmark_test

import (
	"os"
	"strings"
	"testing"
)

// TestREADMEShowsExampleRun: the README's library lines are ExampleRun's
// body, which go test runs against the embedded simulator, so they cannot
// go stale.
func TestREADMEShowsExampleRun(t *testing.T) {
	src, err := os.ReadFile("example_test.go")
	if err != nil {
		t.Fatal(err)
	}
	_, body, ok := strings.Cut(string(src), "func ExampleRun() {\n")
	body, _, ok2 := strings.Cut(body, "\t// Output:")
	if !ok || !ok2 {
		t.Fatal("example_test.go: no ExampleRun with an Output comment")
	}
	var want []string
	for _, line := range strings.Split(strings.TrimRight(body, "\n"), "\n") {
		want = append(want, strings.TrimPrefix(line, "\t"))
	}
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, lib, ok := strings.Cut(string(readme), "## As a library\n")
	_, block, ok2 := strings.Cut(lib, "```go\n")
	block, _, ok3 := strings.Cut(block, "```\n")
	if !ok || !ok2 || !ok3 {
		t.Fatal("README.md: no Go block under \"## As a library\"")
	}
	if got := strings.TrimRight(block, "\n"); got != strings.Join(want, "\n") {
		t.Errorf("README's library lines:\n%s\nExampleRun's body:\n%s", got, strings.Join(want, "\n"))
	}
}

package cli

import (
	"context"
	"runtime"
	"strings"
	"testing"
)

// TestVersionCommand: `tokbench version` is a command (issue 34), and says
// what `--version` says: the version, Go and the platform.
func TestVersionCommand(t *testing.T) {
	code, stdout, stderr := runCLI(context.Background(), nil, "version")
	want := "tokbench version " + Version + " (" + runtime.Version() + ", " + runtime.GOOS + "/" + runtime.GOARCH
	if code != 0 || !strings.HasPrefix(stdout, want) || strings.Count(stdout, "\n") != 1 || stderr != "" {
		t.Errorf("version: exit %d, stdout %q, stderr %q; want one line starting %q", code, stdout, stderr, want)
	}
	if code, flag, _ := runCLI(context.Background(), nil, "--version"); code != 0 || flag != stdout {
		t.Errorf("--version: exit %d, %q; want %q", code, flag, stdout)
	}
	if code, _, stderr := runCLI(context.Background(), nil, "version", "extra"); code != ExitUsage || !strings.Contains(stderr, "version: takes no arguments") {
		t.Errorf("version extra: exit %d, stderr %q; want 2", code, stderr)
	}
}

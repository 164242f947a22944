package cli

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// closedAddr is a loopback address nothing listens on: a port the kernel
// handed out and took back.
func closedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// busyAddr is a loopback address a listener holds until the test ends:
// a listen there fails with "address already in use".
func busyAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln.Addr().String()
}

// mkdirs makes each path a directory (holding one file, so no rename
// can replace it) and returns the first.
func mkdirs(t *testing.T, paths ...string) string {
	t.Helper()
	for _, p := range paths {
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(p, "keep"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return paths[0]
}

// TestExitCodes: every command exits 2 for bad input only, and 1 when the
// machine fails a good command line (a port in use, a file that cannot be
// written), with one line on stderr naming what failed.
func TestExitCodes(t *testing.T) {
	tmp := t.TempDir()
	fixture := filepath.Join("..", "..", "compare", "testdata", "vllm-detailed.json")
	run := filepath.Join(tmp, "run") // a run directory, imported once
	if code, _, stderr := runCLI(context.Background(), nil, "import-vllm", fixture, "--out", run); code != ExitOK {
		t.Fatalf("import-vllm: exit %d: %s", code, stderr)
	}
	file := filepath.Join(tmp, "file")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A run directory whose report.html cannot be written: a directory
	// holds its name.
	stuck := filepath.Join(tmp, "stuck")
	if code, _, stderr := runCLI(context.Background(), nil, "import-vllm", fixture, "--out", stuck); code != ExitOK {
		t.Fatalf("import-vllm: exit %d: %s", code, stderr)
	}
	if err := os.Remove(filepath.Join(stuck, "report.html")); err != nil {
		t.Fatal(err)
	}
	mkdirs(t, filepath.Join(stuck, "report.html"))
	upstream := "http://" + closedAddr(t) + "/v1"
	bench := []string{"bench", "--concurrency", "1", "--requests", "1", "--warmup", "0", "--input-tokens", "16", "--output-tokens", "4"}

	for _, c := range []struct {
		name string
		args []string
		// cancelled runs the command with its context already ended: a
		// proxy starts, stops at once and writes its summary.
		cancelled bool
		code      int
		says      string
	}{
		{"bench bad flag", []string{"bench", "--format", "yaml"}, false, ExitUsage, "--format"},
		{"bench bad metrics address", append(bench, "--metrics-addr", "127.0.0.1"), false, ExitUsage, "--metrics-addr"},
		{"bench out under a file", append(bench, "--out", filepath.Join(file, "run")), false, ExitUsage, "--out: " + file + " is a file"},
		{"bench metrics address in use", append(bench, "--metrics-addr", busyAddr(t)), false, ExitFailure, "address already in use"},
		{"bench out not writable", append(bench, "--out", filepath.Dir(mkdirs(t, filepath.Join(tmp, "b", "requests.jsonl")))), false, ExitFailure, "--out: open"},

		{"serve bad address", []string{"serve", "--addr", "127.0.0.1"}, false, ExitUsage, "--addr"},
		{"serve bad flag", []string{"serve", "--grace", "-1s"}, false, ExitUsage, "--grace"},
		{"serve address in use", []string{"serve", "--addr", busyAddr(t)}, false, ExitFailure, "address already in use"},

		{"proxy bad address", []string{"proxy", "--upstream", upstream, "--listen", "127.0.0.1:99999"}, false, ExitUsage, "--listen"},
		{"proxy out holds a run", []string{"proxy", "--upstream", upstream, "--listen", closedAddr(t), "--out", run}, false, ExitUsage, "holds a run already"},
		{"proxy address in use", []string{"proxy", "--upstream", upstream, "--listen", busyAddr(t)}, false, ExitFailure, "--listen"},
		{"proxy metrics address in use", []string{"proxy", "--upstream", upstream, "--listen", closedAddr(t), "--metrics-addr", busyAddr(t)}, false, ExitFailure, "--metrics-addr"},
		{"proxy summary not writable", []string{"proxy", "--upstream", upstream, "--listen", closedAddr(t), "--grace", "0s",
			"--out", filepath.Dir(mkdirs(t, filepath.Join(tmp, "p", "summary.json")))}, true, ExitFailure, "summary.json"},

		{"report no run", []string{"report", file}, false, ExitUsage, file},
		{"report not writable", []string{"report", stuck}, false, ExitFailure, "report.html"},

		{"import-vllm missing file", []string{"import-vllm", filepath.Join(tmp, "missing.json"), "--out", filepath.Join(tmp, "x")}, false, ExitUsage, "missing.json"},
		{"import-vllm out is a file", []string{"import-vllm", fixture, "--out", file}, false, ExitUsage, "--out: " + file + " is a file"},
		{"import-vllm out not writable", []string{"import-vllm", fixture, "--out", filepath.Dir(mkdirs(t, filepath.Join(tmp, "i", "summary.json")))}, false, ExitFailure, "summary.json"},

		{"compare bad flag", []string{"compare", run, run, "--alpha", "2"}, false, ExitUsage, "--alpha"},
		{"compare html not writable", []string{"compare", run, run, "--html", mkdirs(t, filepath.Join(tmp, "c.html"))}, false, ExitFailure, "--html"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if c.cancelled {
				cancel()
			}
			code, _, stderr := runCLI(ctx, nil, c.args...)
			lines := strings.Split(strings.TrimSpace(stderr), "\n")
			last := lines[len(lines)-1]
			if code != c.code || !strings.HasPrefix(last, "tokbench: ") || !strings.Contains(last, c.says) {
				t.Errorf("%q: exit %d, last line of stderr %q; want exit %d and a line saying %q", c.args, code, last, c.code, c.says)
			}
			if c.code == ExitUsage && len(lines) != 1 {
				t.Errorf("%q: bad input said in %d lines, want 1: %q", c.args, len(lines), stderr)
			}
		})
	}
}

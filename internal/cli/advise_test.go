package cli

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// TestAdviseCommand: advise over two saved runs names each endpoint by its
// --label (or --name) and answers for every profile; bad input is one line
// naming what is wrong, exit 2.
func TestAdviseCommand(t *testing.T) {
	dir := t.TempDir()
	for _, r := range []struct{ name, price, hw string }{{"a", "10", "h100-sxm"}, {"b", "0.5", "l4"}} {
		code, _, stderr := runCLI(context.Background(), nil, "bench", "--concurrency", "1,2", "--requests", "4", "--output-tokens", "8", "--input-tokens", "64", "--warmup", "0",
			"--hardware", r.hw, "--price-out", r.price, "--label", "ep-"+r.name, "--out", filepath.Join(dir, r.name))
		if code != 0 {
			t.Fatalf("bench %s: exit %d: %s", r.name, code, stderr)
		}
	}
	code, stdout, stderr := runCLI(context.Background(), nil, "advise", filepath.Join(dir, "a"), filepath.Join(dir, "b"),
		"--name", filepath.Join(dir, "b")+"=cheap", "--format", "json")
	if code != 0 {
		t.Fatalf("advise: exit %d: %s", code, stderr)
	}
	var out struct {
		Uses []struct {
			Profile   string `json:"profile"`
			Choice    string `json:"choice"`
			Endpoints []struct {
				Endpoint string `json:"endpoint"`
			} `json:"endpoints"`
		} `json:"uses"`
	}
	if err := json.Unmarshal([]byte(stdout), &out); err != nil {
		t.Fatal(err)
	}
	if len(out.Uses) != 5 || out.Uses[0].Endpoints[0].Endpoint != "ep-a" || out.Uses[0].Endpoints[1].Endpoint != "cheap" {
		t.Fatalf("advice %+v", out)
	}
	for _, u := range out.Uses {
		if u.Profile == "batch" && u.Choice != "cheap" {
			t.Errorf("batch goes to %q, want the cheaper L4 run", u.Choice)
		}
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"advise"}, "advise: want at least one run"},
		{[]string{"advise", filepath.Join(dir, "none")}, filepath.Join(dir, "none")},
		{[]string{"advise", filepath.Join(dir, "a"), "--name", "nameless"}, "--name: want DIR=NAME"},
		{[]string{"advise", filepath.Join(dir, "a"), "--format", "xml"}, "--format"},
	} {
		code, _, stderr := runCLI(context.Background(), nil, c.args...)
		if code != ExitUsage || !strings.Contains(stderr, c.want) || strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
			t.Errorf("%v: exit %d, %q", c.args, code, stderr)
		}
	}
}

func TestPlural(t *testing.T) {
	for _, c := range []struct {
		n    int
		want string
	}{{0, "0 windows"}, {1, "1 window"}, {3, "3 windows"}} {
		if got := plural(c.n, "window"); got != c.want {
			t.Errorf("plural(%d, \"window\") = %q, want %q", c.n, got, c.want)
		}
	}
}

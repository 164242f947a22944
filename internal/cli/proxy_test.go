package cli

import (
	"context"
	"strings"
	"testing"
)

func TestProxyFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		flag string
	}{
		{[]string{"proxy"}, "--upstream"},
		{[]string{"proxy", "--upstream", "localhost:8000"}, "--upstream"},
		{[]string{"proxy", "--upstream", "http://127.0.0.1:1/v1", "--summary-every", "10ms"}, "--summary-every"},
		{[]string{"proxy", "--upstream", "http://127.0.0.1:1/v1", "--tokenizer", "nope"}, "--tokenizer"},
		{[]string{"proxy", "--upstream", "http://127.0.0.1:1/v1", "--listen", "256.0.0.1:1"}, "--listen"},
		{[]string{"proxy", "--upstream", "http://127.0.0.1:1/v1", "--rotate-size", "lots"}, "--rotate-size"},
		{[]string{"proxy", "--upstream", "http://127.0.0.1:1/v1", "--ca-cert", "/nonexistent.pem"}, "--ca-cert"},
		{[]string{"proxy", "--upstream", "http://127.0.0.1:1/v1", "--rotate-size", "0"}, "--rotate-size"},
		{[]string{"proxy", "--upstream", "http://127.0.0.1:1/v1", "--body-budget", "lots"}, "--body-budget"},
		{[]string{"proxy", "--upstream", "http://127.0.0.1:1/v1", "--body-budget", "64MiB"}, "--body-budget"},
		{[]string{"proxy", "--upstream", "http://127.0.0.1:1/v1", "--rotate-every", "-1h"}, "--rotate-every"},
		{[]string{"proxy", "--upstream", "http://127.0.0.1:1/v1", "--rotate-every", "1h"}, "--rotate-size and --rotate-every"},
	} {
		code, _, stderr := runCLI(context.Background(), nil, c.args...)
		if code != ExitUsage || !strings.HasPrefix(stderr, "tokbench: "+c.flag) || strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
			t.Errorf("%v: exit %d, %q", c.args, code, stderr)
		}
	}
}

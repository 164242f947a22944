package benchmark

import (
	"context"
	"strings"
	"testing"

	"github.com/tokbench/tokbench/internal/fakellm"
	"github.com/tokbench/tokbench/workload"
)

// TestAbsurdLoadsRefusedBeforeTheRun is issue 34's item 7: --concurrency
// 100000 (400,000 requests planned) against an open-file limit of 20,000,
// and the same load's memory against 1 GiB, are refused by Plan with the
// numbers; loads the host can run pass.
func TestAbsurdLoadsRefusedBeforeTheRun(t *testing.T) {
	plan := func(users []int, h Host) error {
		p := DefaultPlan()
		p.Load.Concurrency = users
		return p.CheckHost(h)
	}
	err := plan([]int{1, 100000}, Host{OpenFiles: 20000})
	want := "Load.Concurrency: 100000 streams at c=100000 need 100000 connections, and this process may open 20000 files (ulimit -n)"
	if !IsInputError(err) || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("open files: err %v, want an InputError starting %q", err, want)
	}
	// 400,000 prompts of 512 tokens at 6 bytes a token and 512 bytes each
	// (1,433,600,000 B), and 100,000 streams of 16 KiB, two prompts and
	// 128 output tokens at 32 bytes (2,662,400,000 B): 4,096,000,000 B.
	err = plan([]int{100000}, Host{OpenFiles: 1 << 20, MemoryBytes: 1 << 30})
	want = "Load.Concurrency: c=100000 would need about 3.8 GiB of memory for its 400000 prompts of 512 tokens and 100000 streams, and 1.0 GiB is available"
	if !IsInputError(err) || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("memory: err %v, want an InputError starting %q", err, want)
	}
	if err := plan([]int{100000}, Host{OpenFiles: 1 << 20, MemoryBytes: 4.1e9}); err != nil {
		t.Errorf("4.1 GB for the 4.096 GB the level needs: %v", err)
	}
	if err := plan([]int{1, 4, 16}, Host{OpenFiles: 1024, MemoryBytes: 1 << 30}); err != nil {
		t.Errorf("the default load on a small host: %v", err)
	}
	if err := plan([]int{1000}, Host{}); err != nil {
		t.Errorf("an unknown host is not checked: %v", err)
	}
}

// TestPromptPastTheServersContext: a server whose model list says
// max_model_len 4096 is not sent 10,000-token prompts: the run is refused
// with the numbers before any completion request.
func TestPromptPastTheServersContext(t *testing.T) {
	srv := fakellm.New(fakellm.Script{Tokens: 2, Usage: true, MaxModelLen: 4096})
	defer srv.Close()
	run := func(in int) error {
		p := DefaultPlan()
		p.URL = srv.URL + "/v1"
		p.Load.Concurrency, p.Load.Requests, p.Load.Warmup = []int{1}, 1, 0
		p.Workload.Inputs, p.Workload.Output = []workload.Dist{workload.Fixed(in)}, workload.Fixed(16)
		_, err := Run(context.Background(), p, Hooks{})
		return err
	}
	err := run(10000)
	want := "Workload.Inputs: 10000 prompt tokens and 16 of output at c=1 are 10016, past the server's context of 4096 tokens (max_model_len)"
	if !IsInputError(err) || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("err %v, want an InputError starting %q", err, want)
	}
	if n := len(srv.Bodies()); n != 0 {
		t.Errorf("%d completion requests sent, want none", n)
	}
	if err := run(4080); err != nil { // 4080 + 16 = 4096: fits
		t.Errorf("4080+16 tokens in 4096: %v", err)
	}
	if n := len(srv.Bodies()); n != 1 {
		t.Errorf("%d completion requests sent, want 1", n)
	}
}

package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/tokbench/tokbench/internal/fakellm"
)

// TestPromptSeedRepeatsTheRun: run.json's prompt_seed is the seed exactly
// (odd, as the run draws it, and a whole number, not a float's rounding),
// and --seed with it sends the first run's prompts again.
func TestPromptSeedRepeatsTheRun(t *testing.T) {
	prompts := func(args ...string) (string, []string) {
		t.Helper()
		srv := fakellm.New(fakellm.Script{TTFT: time.Millisecond, Tokens: 2, Usage: true})
		defer srv.Close()
		dir := filepath.Join(t.TempDir(), "run")
		args = append([]string{"bench", "--url", srv.URL + "/v1", "--model", "m", "--concurrency", "1", "--requests", "3",
			"--warmup", "0", "--input-tokens", "16", "--output-tokens", "2", "--out", dir}, args...)
		if code, _, stderr := runCLI(context.Background(), nil, args...); code != 0 {
			t.Fatalf("bench: exit %d: %s", code, stderr)
		}
		var run struct {
			Config map[string]json.RawMessage `json:"config"`
		}
		b, err := os.ReadFile(filepath.Join(dir, "run.json"))
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, &run); err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, body := range srv.Bodies() {
			out = append(out, fmt.Sprint(body["messages"]))
		}
		return string(run.Config["prompt_seed"]), out
	}
	seed, first := prompts()
	n, err := strconv.ParseUint(seed, 10, 64)
	if err != nil || n%2 != 1 {
		t.Fatalf("run.json prompt_seed %s: want an odd 64-bit whole number (%v)", seed, err)
	}
	again, second := prompts("--seed", seed)
	if again != seed {
		t.Errorf("--seed %s recorded prompt_seed %s", seed, again)
	}
	if len(first) != 3 || !slices.Equal(first, second) {
		t.Errorf("--seed %s sent\n%q\nwant the first run's\n%q", seed, second, first)
	}
}

package cli

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tokbench/tokbench/internal/fakellama"
	"github.com/tokbench/tokbench/metrics"
	"github.com/tokbench/tokbench/results"
)

// tinyGGUF writes a one-layer F16 Llama GGUF (dim 512) and returns its path.
func tinyGGUF(t *testing.T) string {
	t.Helper()
	const dim = 512
	layer := map[string][]uint64{
		"blk.0.attn_q.weight": {dim, dim}, "blk.0.attn_k.weight": {dim, dim / 4}, "blk.0.attn_v.weight": {dim, dim / 4},
		"blk.0.attn_output.weight": {dim, dim}, "blk.0.ffn_gate.weight": {dim, 2 * dim}, "blk.0.ffn_up.weight": {dim, 2 * dim},
		"blk.0.ffn_down.weight": {2 * dim, dim}, "token_embd.weight": {dim, 1000}, "output.weight": {dim, 1000},
	}
	return writeGGUF(t, map[string]uint32{
		"llama.block_count": 1, "llama.embedding_length": dim, "llama.attention.head_count": dim / 64,
		"llama.attention.head_count_kv": dim / 256, "llama.feed_forward_length": 2 * dim, "llama.context_length": 8192,
	}, "llama", layer, 1)
}

// TestMBUCountsServerSlots: on a llama-server of 4 slots, c=8 decodes 4
// sequences a step as c=4 does (the other 4 wait), so its MBU counts the
// KV reads of 4, not 8: MBU over decode p50 is the same at both levels,
// the bytes of a 4-sequence step over the peak bandwidth.
func TestMBUCountsServerSlots(t *testing.T) {
	srv := fakellama.New(fakellama.Config{Slots: 4, Step: 5 * time.Millisecond, ModelPath: tinyGGUF(t)})
	defer srv.Close()
	dir := filepath.Join(t.TempDir(), "run")
	code, _, stderr := runCLI(context.Background(), nil, "bench", "--url", srv.URL+"/v1", "--api", "auto", "--hardware", "h100-sxm",
		"--concurrency", "4,8", "--requests", "8", "--output-tokens", "32", "--quiet", "--out", dir)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	s, err := results.ReadSummary(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Levels) != 2 {
		t.Fatalf("%d levels, want 2", len(s.Levels))
	}
	for _, lv := range s.Levels {
		ph := lv.Physics
		if ph == nil || ph.KVBytesPerToken <= 0 || lv.DecodeTPS.Count == 0 {
			t.Fatalf("%s: physics %+v, %d decode figures; want the GGUF's, with KV bytes", lv.Load, ph, lv.DecodeTPS.Count)
		}
		if ph.Batch != 4 {
			t.Errorf("%s: MBU batch %d, want the server's 4 slots", lv.Load, ph.Batch)
		}
		step := ph.WeightBytes + 4*float64(ph.ContextTokens)*ph.KVBytesPerToken
		want := step * lv.DecodeTPS.P50 / ph.BandwidthBytesPerSec
		if math.Abs(ph.MBU-want) > 1e-9*want {
			t.Errorf("%s: MBU %.6g, want %.6g: %s bytes a step of 4 sequences × decode p50 %.4g tok/s over %.4g B/s",
				lv.Load, ph.MBU, want, fmt.Sprint(step), lv.DecodeTPS.P50, ph.BandwidthBytesPerSec)
		}
	}
}

// TestQueueNamedByServerFigures: on a llama-server of 4 slots whose loop
// takes 1 ms a prompt token into a step, the server queue is named by
// what its figures show: one user finds the loop idle (no queue, no
// cause); 4 users fit the 4 slots, so their wait is the loop busy with
// the others' prefill; 8 users find the slots full.
func TestQueueNamedByServerFigures(t *testing.T) {
	srv := fakellama.New(fakellama.Config{Slots: 4, Step: 5 * time.Millisecond, PrefillPerToken: time.Millisecond})
	defer srv.Close()
	dir := filepath.Join(t.TempDir(), "run")
	code, stdout, stderr := runCLI(context.Background(), nil, "bench", "--url", srv.URL, "--api", "auto",
		"--concurrency", "1,4,8", "--requests", "16", "--input-tokens", "64", "--output-tokens", "16", "--quiet", "--out", dir)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	s, err := results.ReadSummary(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Levels) != 3 {
		t.Fatalf("%d levels, want 3", len(s.Levels))
	}
	for i, want := range []string{"", metrics.QueueOthersPrefill, metrics.QueueSlotsFull} {
		lv := s.Levels[i]
		g := lv.ClientMinusServer
		if g == nil || g.QueueMs == nil {
			t.Fatalf("%s: no client − server gap: %+v", lv.Load, g)
		}
		if g.QueueCause != want || g.Slots != 4 {
			t.Errorf("%s: queue p50 %.1f ms (step %.1f ms, network %.2f ms) named %q on %d slots, want %q on 4",
				lv.Load, g.QueueMs.P50, g.StepMs, g.NetworkMs, g.QueueCause, g.Slots, want)
		}
	}
	for _, want := range []string{"slots full: 8 users on the server's 4 slots", "other requests' prefill in the same batch: 4 users fit its 4 slots"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, stdout)
		}
	}
	if strings.Contains(stdout, "c=1: server-reported") && strings.Contains(stdout, "free slot") {
		t.Errorf("output gives a free slot as a cause:\n%s", stdout)
	}
}

// TestModelNotServedWarns: llama-server answers any model name with its
// one model, so --model naming another is measured in silence unless
// bench says so: it warns, and records the model the server lists.
func TestModelNotServedWarns(t *testing.T) {
	srv := fakellama.New(fakellama.Config{Slots: 2, Step: time.Millisecond})
	defer srv.Close()
	for _, c := range []struct {
		model, served string
	}{{"wrong", "model/rand-1024x8.gguf"}, {"model/rand-1024x8.gguf", ""}} {
		t.Run(c.model, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "run")
			code, stdout, stderr := runCLI(context.Background(), nil, "bench", "--url", srv.URL, "--api", "auto", "--model", c.model,
				"--concurrency", "1", "--requests", "2", "--output-tokens", "4", "--quiet", "--out", dir)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			s, err := results.ReadSummary(dir)
			if err != nil {
				t.Fatal(err)
			}
			warned := strings.Contains(stderr, `--model "wrong": the server does not list it; it lists "model/rand-1024x8.gguf" and answers any name with it`)
			if s.Target.Model != c.model || s.Target.ServedModel != c.served || warned != (c.served != "") {
				t.Errorf("target model %q served %q, warned %v; want %q served %q, warned %v\n%s",
					s.Target.Model, s.Target.ServedModel, warned, c.model, c.served, c.served != "", stderr)
			}
			if c.served != "" && !strings.Contains(stdout, "model wrong (served: model/rand-1024x8.gguf)") {
				t.Errorf("table does not name the served model:\n%s", stdout)
			}
		})
	}
}

// TestChatOnLlamaCpp: a chat run against a llama-server whose prompt
// cache serves what a prompt shares with an earlier one, and whose chat
// template opens every prompt with the same 10 tokens. The chat's figures
// are given as conversations, not agent chains; the cache serving each
// turn's history is a note (expected of a chat), not a warning; and a
// synthetic run, whose prompts share only the template's opening, is not
// said to be served from the cache.
func TestChatOnLlamaCpp(t *testing.T) {
	srv := fakellama.New(fakellama.Config{Slots: 4, Step: time.Millisecond, TemplateTokens: 10, PromptCache: true})
	defer srv.Close()
	dir := filepath.Join(t.TempDir(), "chat")
	code, stdout, stderr := runCLI(context.Background(), nil, "bench", "--url", srv.URL, "--api", "auto", "--workload", "chat", "--turns", "3",
		"--concurrency", "2", "--requests", "2", "--input-tokens", "64", "--output-tokens", "8", "--quiet", "--out", dir)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	s, err := results.ReadSummary(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Levels) != 1 {
		t.Fatalf("%d levels, want 1", len(s.Levels))
	}
	lv := s.Levels[0]
	if lv.Requests.Completed != 6 || lv.ChainKind != "conversation" || lv.ChainMs == nil || lv.ChainMs.Count != 2 {
		t.Fatalf("completed %d, chain kind %q, chains %+v; want 6 requests in 2 conversations", lv.Requests.Completed, lv.ChainKind, lv.ChainMs)
	}
	if c := lv.PromptCache; c == nil || c.HitRequests < 4 {
		t.Errorf("prompt cache %+v: want the 4 later turns served partly from it", c)
	}
	for _, w := range append(lv.Warnings, s.Warnings...) {
		if strings.Contains(w, "prompt cache") {
			t.Errorf("warning %q: a chat's history served from the cache is expected", w)
		}
	}
	if len(lv.Notes) != 1 || !strings.Contains(lv.Notes[0], "as expected of a chat") {
		t.Errorf("notes %q, want one saying the cache served the history as expected", lv.Notes)
	}
	for _, want := range []string{"conversation wall-clock p50", "over 2 conversations", "as expected of a chat"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, stdout)
		}
	}
	if strings.Contains(stdout, "agent") {
		t.Errorf("a chat's output speaks of agents:\n%s", stdout)
	}

	dir = filepath.Join(t.TempDir(), "synthetic")
	code, stdout, stderr = runCLI(context.Background(), nil, "bench", "--url", srv.URL, "--api", "auto",
		"--concurrency", "2", "--requests", "4", "--input-tokens", "64", "--output-tokens", "8", "--quiet", "--out", dir)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if s, err = results.ReadSummary(dir); err != nil || len(s.Levels) != 1 {
		t.Fatalf("summary %v, %d levels", err, len(s.Levels))
	}
	if c := s.Levels[0].PromptCache; c == nil || c.CachedTokens < 10*4 || c.HitRequests != 0 {
		t.Errorf("prompt cache %+v: want the template's 10 tokens reused by each request, and no hit", c)
	}
	if strings.Contains(stdout, "prompt cache") {
		t.Errorf("a 10-token template shared by every prompt is called a cache hit:\n%s", stdout)
	}
}

package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/tokbench/tokbench/internal/busy"
	"github.com/tokbench/tokbench/metrics"
)

// ollamaServer is a real Ollama (`ollama serve`) the test started on a
// free loopback port, in a process group of its own with its runners, and
// stops when the test ends.
type ollamaServer struct {
	base string
	pid  int
	log  string
}

// startOllama starts TOKBENCH_OLLAMA_BIN serving the models .ci/real
// imported into TOKBENCH_OLLAMA_MODELS, with one slot and env besides.
func startOllama(t *testing.T, env ...string) *ollamaServer {
	t.Helper()
	bin, models := os.Getenv("TOKBENCH_OLLAMA_BIN"), os.Getenv("TOKBENCH_OLLAMA_MODELS")
	logPath := filepath.Join(t.TempDir(), "ollama.log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "serve")
	cmd.Env = append(os.Environ(), "OLLAMA_HOST=127.0.0.1:0", "OLLAMA_MODELS="+models, "OLLAMA_NUM_PARALLEL=1", "OLLAMA_NOPRUNE=1")
	cmd.Env = append(cmd.Env, env...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		logf.Close()
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); logf.Close(); close(exited) }()
	o := &ollamaServer{pid: cmd.Process.Pid, log: logPath}
	t.Cleanup(func() {
		// Ollama stops its runners on TERM; the group catches any left.
		syscall.Kill(-o.pid, syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
		}
		syscall.Kill(-o.pid, syscall.SIGKILL)
		<-exited
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			t.Logf("ollama's log, last lines:\n%s", tail(string(b), 30))
		}
	})
	listening := regexp.MustCompile(`Listening on (127\.0\.0\.1:[0-9]+)`)
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		b, _ := os.ReadFile(logPath)
		if m := listening.FindSubmatch(b); m != nil {
			o.base = "http://" + string(m[1])
			break
		}
		select {
		case <-exited:
			t.Fatalf("ollama serve exited at start:\n%s", tail(string(b), 30))
		case <-time.After(100 * time.Millisecond):
		}
	}
	if o.base == "" {
		t.Fatal("ollama serve did not say where it listens within 60 s")
	}
	return o
}

// runners are the pids of the server's runner processes (`ollama runner`,
// its children).
func (o *ollamaServer) runners(t *testing.T) []int {
	t.Helper()
	dirs, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", d.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid …: comm may hold spaces, so read after ')'.
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(stat[i+1:]))
		if len(f) < 2 || f[1] != strconv.Itoa(o.pid) {
			continue
		}
		if cl, _ := os.ReadFile(filepath.Join("/proc", d.Name(), "cmdline")); bytes.Contains(cl, []byte("runner")) {
			pids = append(pids, pid)
		}
	}
	return pids
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// ollamaRun is a bench run's summary and records.
type ollamaRun struct {
	sum  metrics.Summary
	lv   metrics.Level
	recs []metrics.Record
}

// benchOllama runs bench against url with model and args, and reads its run.
func benchOllama(ctx context.Context, t *testing.T, url string, args ...string) ollamaRun {
	t.Helper()
	out := filepath.Join(t.TempDir(), "run")
	all := append([]string{"bench", "--url", url, "--model", os.Getenv("TOKBENCH_OLLAMA_MODEL"), "--out", out, "--format", "json"}, args...)
	code, stdout, stderr := runCLI(ctx, nil, all...)
	if code != 0 {
		t.Fatalf("bench %s exited %d\n%s\n%s", strings.Join(args, " "), code, tail(stdout, 20), stderr)
	}
	var run ollamaRun
	b, err := os.ReadFile(filepath.Join(out, "summary.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &run.sum); err != nil {
		t.Fatalf("summary.json: %v", err)
	}
	if len(run.sum.Levels) != 1 {
		t.Fatalf("%d levels, want 1", len(run.sum.Levels))
	}
	run.lv = run.sum.Levels[0]
	run.recs = readRecordsFile(t, filepath.Join(out, "requests.jsonl"))
	return run
}

// warning is the level's warning that starts with prefix, or "".
func warning(lv metrics.Level, prefix string) string {
	for _, w := range lv.Warnings {
		if strings.HasPrefix(w, prefix) {
			return w
		}
	}
	return ""
}

// TestRealOllamaServer runs bench against real Ollama servers it starts
// itself (TOKBENCH_OLLAMA_BIN, with the models .ci/real imported into
// TOKBENCH_OLLAMA_MODELS; model TOKBENCH_OLLAMA_MODEL), each configured
// for what it checks: its keep-alive, its queue limit, its runner killed
// mid-stream, its prompt cache, and tokbench proxy in front of it.
func TestRealOllamaServer(t *testing.T) {
	for _, k := range []string{"TOKBENCH_OLLAMA_BIN", "TOKBENCH_OLLAMA_MODELS", "TOKBENCH_OLLAMA_MODEL"} {
		if os.Getenv(k) == "" {
			t.Skip("set TOKBENCH_OLLAMA_BIN, TOKBENCH_OLLAMA_MODELS and TOKBENCH_OLLAMA_MODEL (.ci/real does)")
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	t.Run("keep-alive", func(t *testing.T) { ollamaKeepAlive(ctx, t) })
	t.Run("max-queue", func(t *testing.T) { ollamaMaxQueue(ctx, t) })
	t.Run("runner-killed", func(t *testing.T) { ollamaRunnerKilled(ctx, t) })
	t.Run("prompt-cache", func(t *testing.T) { ollamaPromptCache(ctx, t) })
	t.Run("proxy", func(t *testing.T) { ollamaProxy(ctx, t) })
	t.Run("timing", func(t *testing.T) { ollamaTiming(ctx, t) })
}

// ollamaKeepAlive: Ollama keeps a model loaded OLLAMA_KEEP_ALIVE (here 1 s)
// after its last request; a conversation whose turns come 4 s apart finds
// it unloaded every time. No turn fails, every turn goes on the connection
// bench opened before the level (Ollama's HTTP server sets no idle
// timeout, so a model's unload never closes one: no reconnect, none
// opened), and every turn's model load is named.
func ollamaKeepAlive(ctx context.Context, t *testing.T) {
	o := startOllama(t, "OLLAMA_KEEP_ALIVE=1s")
	run := benchOllama(ctx, t, o.base, "--api", "ollama-chat", "--workload", "chat", "--turns", "3", "--think-time", "4s",
		"--concurrency", "1", "--requests", "1", "--warmup", "0", "--input-tokens", "32", "--output-tokens", "8")
	lv := run.lv
	if lv.Requests.Completed != 3 || lv.Requests.Failed != 0 {
		t.Errorf("%d of 3 turns completed, %d failed: %v", lv.Requests.Completed, lv.Requests.Failed, lv.Requests.ErrorSamples)
	}
	loads := 0
	for _, r := range run.recs {
		if r.Server != nil && r.Server.LoadMs >= 50 {
			loads++
		}
	}
	if loads != 3 {
		t.Errorf("%d of 3 turns loaded the model (load_duration ≥ 50 ms); each came 4 s after the last, past the 1 s keep-alive", loads)
	}
	w := warning(lv, "model load: ")
	if !strings.Contains(w, "during 3 of 3 requests") {
		t.Errorf("the loads are not named: %q", w)
	}
	reused := 0
	for _, r := range run.recs {
		if r.Phases != nil && r.Phases.Reused {
			reused++
		}
	}
	c := lv.Connections
	if c == nil || reused != 3 || c.Opened != 0 || c.Reconnects != 0 {
		t.Errorf("%d of 3 turns on a kept connection; connections %+v: want every turn on the one bench opened, no reconnect", reused, c)
	} else {
		t.Logf("keep-alive 1s, turns 4 s apart: %d of 3 ok, %d loads (%q); %d of 3 turns on the kept connection, %d opened, %d reconnects",
			lv.Requests.Completed, loads, w, reused, c.Opened, c.Reconnects)
	}
}

// ollamaMaxQueue: with OLLAMA_MAX_QUEUE=1, Ollama answers 503 ("server
// busy … maximum pending requests exceeded") to requests its scheduler
// cannot queue; bench classifies each as http_503 with Ollama's words.
func ollamaMaxQueue(ctx context.Context, t *testing.T) {
	o := startOllama(t, "OLLAMA_MAX_QUEUE=1")
	run := benchOllama(ctx, t, o.base, "--api", "ollama-generate", "--concurrency", "8", "--requests", "16", "--warmup", "0",
		"--input-tokens", "32", "--output-tokens", "8")
	lv := run.lv
	refused := 0
	for _, r := range run.recs {
		if r.OK {
			continue
		}
		if r.ErrorClass == "http_503" && r.HTTPStatus == 503 && strings.Contains(r.Error, "maximum pending requests exceeded") {
			refused++
		} else {
			t.Errorf("record %d failed as %q (%d): %s", r.ID, r.ErrorClass, r.HTTPStatus, r.Error)
		}
	}
	if refused == 0 || lv.Requests.Errors["http_503"] != refused || lv.Requests.Failed != refused || lv.Requests.Completed+refused != 16 {
		t.Errorf("%d records refused with Ollama's 503; the level counts %d completed, %d failed, errors %v",
			refused, lv.Requests.Completed, lv.Requests.Failed, lv.Requests.Errors)
	}
	t.Logf("OLLAMA_MAX_QUEUE=1, c=8: %d of 16 classified http_503 (%q), %d completed", refused, lv.Requests.ErrorSamples["http_503"], lv.Requests.Completed)
}

// ollamaRunnerKilled: the runner process is killed (SIGKILL) once the
// third line of the second answer has passed on its way to bench, so
// mid-stream. That request fails as a stream error with Ollama's words and
// the tokens it had; the next request finds Ollama loading the model
// again, and bench names that load; the run is written whole.
func ollamaRunnerKilled(ctx context.Context, t *testing.T) {
	o := startOllama(t)
	u, err := url.Parse(o.base)
	if err != nil {
		t.Fatal(err)
	}
	var answers atomic.Int64
	var once sync.Once
	killed := make(chan []int, 1)
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.FlushInterval = -1
	rp.ModifyResponse = func(resp *http.Response) error {
		if p := resp.Request.URL.Path; p != "/api/chat" && p != "/api/generate" {
			return nil // bench's probes: /api/version, /api/show, …
		}
		if answers.Add(1) == 2 {
			resp.Body = &lineWatch{ReadCloser: resp.Body, at: 3, fn: func() {
				once.Do(func() {
					pids := o.runners(t)
					for _, pid := range pids {
						syscall.Kill(pid, syscall.SIGKILL)
					}
					killed <- pids
				})
			}}
		}
		return nil
	}
	front := httptest.NewServer(rp)
	defer front.Close()
	run := benchOllama(ctx, t, front.URL, "--api", "ollama-chat", "--concurrency", "1", "--requests", "5", "--warmup", "0",
		"--input-tokens", "32", "--output-tokens", "400")
	var pids []int
	select {
	case pids = <-killed:
	default:
		t.Fatal("the second answer never reached its third line: no runner was killed")
	}
	if len(pids) == 0 {
		t.Fatal("no runner process of ollama serve was found to kill")
	}
	lv := run.lv
	if len(run.recs) != 5 {
		t.Fatalf("requests.jsonl holds %d records, want 5", len(run.recs))
	}
	var failed []metrics.Record
	for _, r := range run.recs {
		if !r.OK {
			failed = append(failed, r)
		}
	}
	if len(failed) != 1 {
		t.Fatalf("%d requests failed, want the one whose runner was killed: %v", len(failed), lv.Requests.Errors)
	}
	f := failed[0]
	if f.ErrorClass != "stream_error" || len(f.ChunkMs) < 3 || f.Error == "" {
		t.Errorf("the killed stream: class %q after %d chunks (%q); want stream_error after at least 3", f.ErrorClass, len(f.ChunkMs), f.Error)
	}
	if lv.Requests.Completed != 4 || lv.Requests.Errors["stream_error"] != 1 {
		t.Errorf("summary: %d completed, errors %v; want 4 and one stream_error", lv.Requests.Completed, lv.Requests.Errors)
	}
	w := warning(lv, "model load: ")
	if !strings.Contains(w, "during 2 of 4 requests") {
		t.Errorf("want the first load and the reload after the kill named: %q", w)
	}
	t.Logf("runner %v killed mid-stream: %s after %d chunks (%q); %d of 5 completed; %q", pids, f.ErrorClass, len(f.ChunkMs), f.Error, lv.Requests.Completed, w)
}

// lineWatch calls fn once at line at of the body it reads.
type lineWatch struct {
	io.ReadCloser
	at, n int
	fn    func()
}

func (l *lineWatch) Read(p []byte) (int, error) {
	n, err := l.ReadCloser.Read(p)
	for _, c := range p[:n] {
		if c == '\n' {
			if l.n++; l.n == l.at {
				l.fn()
			}
		}
	}
	return n, err
}

// ollamaPromptCache: what Ollama says of its prompt cache, and what bench
// makes of it. Ollama's runner keeps one sequence per slot (here one): the
// last prompt and its answer. Run A sends one prompt (--seed 11); run B,
// the same seed, sends it again first, then seven new ones: B's first
// prompt is all in the cache. Run B2 repeats B exactly, yet finds only
// B's last prompt cached, which it does not send first: a repeated --seed
// run of several requests is no cache hit on Ollama. Run C (no seed) sends
// eight new prompts. The runner says what it took from its cache only in
// its debug log ("loading cache slot … prompt=N used=K"); its answers
// carry no cached count, and prompt_eval_count is the whole prompt either
// way (the runner counts it before it looks in the cache). Only its
// prompt_eval_duration shows the hit, and bench's timing heuristic names
// it against B's other requests — judged when the machine let this
// process run; B2 and C have none.
func ollamaPromptCache(ctx context.Context, t *testing.T) {
	o := startOllama(t, "OLLAMA_DEBUG=1")
	args := []string{"--api", "ollama-generate", "--concurrency", "1", "--warmup", "0", "--input-tokens", "100", "--output-tokens", "16"}
	var slots [][]cacheSlot
	run := func(extra ...string) ollamaRun {
		t.Helper()
		r := benchOllama(ctx, t, o.base, append(slices.Clone(args), extra...)...)
		all := o.cacheSlots(t)
		done := 0
		for _, s := range slots {
			done += len(s)
		}
		if len(all)-done != len(r.recs) {
			t.Fatalf("ollama's log holds %d cache-slot loads for a run of %d requests", len(all)-done, len(r.recs))
		}
		slots = append(slots, all[done:])
		return r
	}
	a := run("--seed", "11", "--requests", "1")
	// The runner's threads' time waiting for a core while B runs: the
	// interference its prompt_eval_durations may carry.
	runner := o.runners(t)
	waited := schedWaitMs(runner)
	began := time.Now()
	b := run("--seed", "11", "--requests", "8")
	waited, wall := schedWaitMs(runner)-waited, float64(time.Since(began))/1e6
	b2, c := run("--seed", "11", "--requests", "8"), run("--requests", "8")
	runs := []ollamaRun{a, b, b2, c}
	for k, r := range runs {
		slices.SortFunc(r.recs, func(x, y metrics.Record) int { return x.Start.Compare(y.Start) })
		for i, rec := range r.recs {
			s := slots[k][i]
			if !rec.OK || rec.Server == nil {
				t.Fatalf("run %d request %d: failed or no server timing: %+v", k, i, rec)
			}
			if rec.CacheReported {
				t.Errorf("run %d request %d reports cached tokens (%d): Ollama's answers have no such field", k, i, rec.CachedTokens)
			}
			if rec.Server.PromptTokens != s.prompt || rec.InputTokens != s.prompt {
				t.Errorf("run %d request %d: prompt_eval_count %d, recorded %d; the runner's prompt %d tokens (%d from its cache)",
					k, i, rec.Server.PromptTokens, rec.InputTokens, s.prompt, s.used)
			}
			hit := k == 1 && i == 0 // B's first prompt, A's again
			switch {
			case hit && s.used != s.prompt-1:
				t.Errorf("B's first prompt, A's again: the runner took %d of its %d tokens from the cache, want all but the one it samples from", s.used, s.prompt)
			case !hit && s.used*10 > s.prompt:
				t.Errorf("run %d request %d: the runner took %d of %d tokens from the cache, want none but the opening", k, i, s.used, s.prompt)
			}
		}
	}
	ra, rb, rb2 := a.recs[0], b.recs[0], b2.recs[0]
	if quiet := waited <= busy.QuietWait*wall; !quiet {
		t.Logf("the cached prefill's time not judged: Ollama's runner %v waited %.0f ms for a core in B's %.0f ms", runner, waited, wall)
	} else {
		if rb.Server.PromptMs*4 > ra.Server.PromptMs || rb.Server.PromptMs*4 > rb2.Server.PromptMs {
			t.Errorf("the same prompt's prompt_eval_duration: %.2f ms in A, %.2f ms cached in B, %.2f ms in B2; want the cached one under a quarter",
				ra.Server.PromptMs, rb.Server.PromptMs, rb2.Server.PromptMs)
		}
		if pc := b.lv.PromptCache; pc == nil || pc.LikelyHits != 1 || pc.Reported != 0 {
			t.Errorf("run B: prompt cache %+v; want the one likely hit by timing, none reported", pc)
		}
	}
	for k, r := range map[string]ollamaRun{"B2 (B again)": b2, "C (no --seed)": c} {
		if n := hits(r.lv.PromptCache); n > 0 {
			t.Errorf("run %s: %d cache hits named; Ollama's runner took none from its cache", k, n)
		}
	}
	t.Logf("runner's wait for a core in B: %.0f of %.0f ms; runner's cache: %d of %d prompt tokens for B's first (A's again), at most %d elsewhere; prompt_eval_count %d (whole prompt) every time, no cached count; prompt_eval_duration %.2f ms in A, %.2f ms cached in B, %.2f ms in B2; B: %q; B2: %d hits; C: %d hits",
		waited, wall, slots[1][0].used, slots[1][0].prompt, maxUsed(slots, 1, 0), rb.Server.PromptTokens, ra.Server.PromptMs, rb.Server.PromptMs, rb2.Server.PromptMs,
		warning(b.lv, "prompt cache: "), hits(b2.lv.PromptCache), hits(c.lv.PromptCache))
}

// cacheSlot is what Ollama's runner logs (at debug level) as it takes a
// request's prompt: its length in tokens and how many came from its cache.
type cacheSlot struct{ prompt, used int }

// cacheSlots are the runner's cache-slot loads in the server's log so far,
// in order.
func (o *ollamaServer) cacheSlots(t *testing.T) []cacheSlot {
	t.Helper()
	b, err := os.ReadFile(o.log)
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`msg="loading cache slot" id=\d+ cache=\d+ prompt=(\d+) used=(\d+)`)
	var out []cacheSlot
	for _, m := range re.FindAllSubmatch(b, -1) {
		p, _ := strconv.Atoi(string(m[1]))
		u, _ := strconv.Atoi(string(m[2]))
		out = append(out, cacheSlot{p, u})
	}
	return out
}

// schedWaitMs is the time the threads of pids have waited for a core,
// summed (the kernel's schedstat), in milliseconds.
func schedWaitMs(pids []int) float64 {
	var ns float64
	for _, pid := range pids {
		stats, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid))
		for _, f := range stats {
			b, err := os.ReadFile(f)
			if err != nil {
				continue
			}
			if fs := strings.Fields(string(b)); len(fs) >= 2 {
				v, _ := strconv.ParseFloat(fs[1], 64)
				ns += v
			}
		}
	}
	return ns / 1e6
}

// maxUsed is the most cached tokens of any request but run k's i-th.
func maxUsed(slots [][]cacheSlot, k, i int) int {
	m := 0
	for a, run := range slots {
		for b, s := range run {
			if a != k || b != i {
				m = max(m, s.used)
			}
		}
	}
	return m
}

func hits(pc *metrics.PromptCache) int {
	if pc == nil {
		return 0
	}
	return pc.Hits()
}

// ollamaProxy: bench through `tokbench proxy` in front of Ollama. The
// proxy's record of each request carries what bench's does: the tokens
// (Ollama's eval_count and prompt_eval_count) and Ollama's own timings,
// exactly; its upstream TTFT is no more than bench's.
func ollamaProxy(ctx context.Context, t *testing.T) {
	o := startOllama(t)
	bin := buildBinary(t)
	out := filepath.Join(t.TempDir(), "proxy")
	cmd := exec.Command(bin, "proxy", "--upstream", o.base, "--listen", "127.0.0.1:0", "--out", out)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stopped := false
	defer func() {
		if !stopped {
			cmd.Process.Kill()
			cmd.Wait()
		}
	}()
	lines := bufio.NewScanner(stderr)
	var front string
	for lines.Scan() {
		if m := regexp.MustCompile(`tokbench proxy: (http://\S+) →`).FindStringSubmatch(lines.Text()); m != nil {
			front = m[1]
			break
		}
	}
	if front == "" {
		t.Fatal("tokbench proxy did not say where it listens")
	}
	go io.Copy(io.Discard, stderr)
	run := benchOllama(ctx, t, front, "--api", "ollama-chat", "--concurrency", "1", "--requests", "6", "--warmup", "0",
		"--input-tokens", "64", "--output-tokens", "16")
	cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("tokbench proxy at TERM: %v", err)
	}
	stopped = true
	precs := readRecordsFile(t, filepath.Join(out, "requests.jsonl"))
	if len(precs) != len(run.recs) || len(precs) != 6 {
		t.Fatalf("the proxy recorded %d requests, bench %d; want 6 each", len(precs), len(run.recs))
	}
	// One user: the requests went one after the other, in the same order.
	byStart := func(rs []metrics.Record) {
		slices.SortFunc(rs, func(a, b metrics.Record) int { return a.Start.Compare(b.Start) })
	}
	byStart(precs)
	byStart(run.recs)
	var maxGap float64
	for i := range precs {
		p, b := precs[i], run.recs[i]
		if !p.OK || !b.OK || p.Server == nil || b.Server == nil {
			t.Errorf("request %d: ok %v through the proxy, %v in bench; server timing %v, %v", i, p.OK, b.OK, p.Server != nil, b.Server != nil)
			continue
		}
		// Ollama's token stamps are the same instants, each from its own
		// t0: the proxy's upstream write, bench's write to the proxy.
		ps, bs := *p.Server, *b.Server
		stamp := func(r metrics.Record, ms float64) time.Time {
			return r.Start.Round(0).Add(time.Duration(ms * float64(time.Millisecond)))
		}
		for _, f := range []struct{ p, b float64 }{{ps.FirstTokenMs, bs.FirstTokenMs}, {ps.LastTokenMs, bs.LastTokenMs}} {
			if d := stamp(p, f.p).Sub(stamp(b, f.b)); f.p == 0 || d.Abs() > time.Microsecond {
				t.Errorf("request %d: Ollama's token stamp read through the proxy and by bench differ by %v (%.3f and %.3f ms from each t0)", i, d, f.p, f.b)
			}
		}
		ps.FirstTokenMs, ps.LastTokenMs, bs.FirstTokenMs, bs.LastTokenMs = 0, 0, 0, 0
		if p.OutputTokens != b.OutputTokens || p.InputTokens != b.InputTokens || ps != bs {
			t.Errorf("request %d: proxy %d out, %d in, server %+v; bench %d out, %d in, server %+v",
				i, p.OutputTokens, p.InputTokens, ps, b.OutputTokens, b.InputTokens, bs)
		}
		if p.TTFTMs > b.TTFTMs {
			t.Errorf("request %d: the proxy's upstream TTFT %.2f ms exceeds bench's %.2f ms through it", i, p.TTFTMs, b.TTFTMs)
		}
		maxGap = max(maxGap, b.TTFTMs-p.TTFTMs)
	}
	t.Logf("proxy and bench agree on 6 of 6 requests' tokens and Ollama's timings; bench's TTFT exceeds the proxy's upstream TTFT by at most %.2f ms", maxGap)
}

// ollamaTiming: bench's TTFT and decode time of each request against
// Ollama's own durations, within what the same request measured outside
// them. Ollama's log has each request's handler time H (gin's latency,
// from the handler's start to its return), its answer load_duration L,
// prompt_eval_duration P and eval_duration E. The client's time to the
// answer's end (DoneMs) less H is the request's network share (loopback
// both ways, writes, reads); H less L+P+E is Ollama's own time outside its
// counters (template, tokenizing, the hop to its runner, flushes); their
// sum, DoneMs less L+P+E, is the request's share outside Ollama's
// counters. Judged per request: the intervals nest (Ollama's own share
// ≥ 0; the network share ≥ 0 but for the handler's return, which trails
// its last write by Ollama's work after it and any wait for a core, so
// may come after the client read that write: by at most the longest a
// thread here woke late in the same run; CI once read −0.02 ms), bench's
// TTFT is no less than L+P (the first token cannot come before
// Ollama's prefill ends), and bench's decode time (first to last token)
// is no more than E plus the share outside. How the rest of that share
// splits between TTFT and decode is not bounded: the first token reaches
// the client some milliseconds later than the last does, relative to
// Ollama's counters, and eval_duration runs on past the last token, so
// the test logs both differences and does not judge them. The counts
// always equal Ollama's; the times are judged when internal/busy says the
// machine let this process run.
func ollamaTiming(ctx context.Context, t *testing.T) {
	o := startOllama(t)
	const n = 8
	w := busy.Start()
	run := benchOllama(ctx, t, o.base, "--api", "ollama-chat", "--concurrency", "1", "--requests", strconv.Itoa(n), "--warmup", "0",
		"--input-tokens", "64", "--output-tokens", "32")
	lag := w.Stop()
	if len(run.recs) != n {
		t.Fatalf("%d records, want %d", len(run.recs), n)
	}
	// gin's lines for /api/chat, in the order the handlers returned: one
	// user, so the order bench sent them in.
	b, err := os.ReadFile(o.log)
	if err != nil {
		t.Fatal(err)
	}
	gin := regexp.MustCompile(`\[GIN\][^|]*\|\s*200\s*\|\s*(\S+)\s*\|[^|]*\|\s*POST\s+"/api/chat"`)
	var handler []float64
	for _, m := range gin.FindAllStringSubmatch(string(b), -1) {
		d, err := time.ParseDuration(strings.ReplaceAll(m[1], "µ", "u"))
		if err != nil {
			t.Fatalf("gin's latency %q: %v", m[1], err)
		}
		handler = append(handler, float64(d)/1e6)
	}
	if len(handler) != n {
		t.Fatalf("ollama's log has %d answered /api/chat requests, want %d:\n%s", len(handler), n, tail(string(b), 20))
	}
	slices.SortFunc(run.recs, func(a, b metrics.Record) int { return a.Start.Compare(b.Start) })
	judge := lag.Judge(t, "bench's TTFT and decode time against Ollama's durations")
	var worstTTFT, worstDecode, maxBound float64 // not judged: logged
	for i, r := range run.recs {
		s := r.Server
		if !r.OK || s == nil || s.PromptMs <= 0 || s.PredictedMs <= 0 || len(r.ChunkMs) < 2 {
			t.Errorf("request %d: ok %v, server timing %+v, %d chunks", i, r.OK, s, len(r.ChunkMs))
			continue
		}
		if r.OutputTokens != s.PredictedTokens || r.InputTokens != s.PromptTokens {
			t.Errorf("request %d: %d output and %d prompt tokens recorded; Ollama counted eval_count %d, prompt_eval_count %d",
				i, r.OutputTokens, r.InputTokens, s.PredictedTokens, s.PromptTokens)
		}
		network := r.DoneMs - handler[i]
		own := handler[i] - (s.LoadMs + s.PromptMs + s.PredictedMs)
		bound := network + own
		ttftGap := r.TTFTMs - s.TTFTMs()
		decode := r.ChunkMs[len(r.ChunkMs)-1] - r.ChunkMs[0]
		decodeGap := decode - s.PredictedMs
		worstTTFT, worstDecode, maxBound = max(worstTTFT, ttftGap), max(worstDecode, math.Abs(decodeGap)), max(maxBound, bound)
		t.Logf("request %d: TTFT %.2f ms, Ollama's load %.2f + prefill %.2f ms; decode %.2f ms, Ollama's eval %.2f ms; handler %.2f ms of %.2f: network %.2f, Ollama outside its counters %.2f ms",
			i, r.TTFTMs, s.LoadMs, s.PromptMs, decode, s.PredictedMs, handler[i], r.DoneMs, network, own)
		if !judge {
			continue
		}
		if network < -lag.MaxMs || own < 0 {
			t.Errorf("request %d: the client's %.2f ms to the answer's end, Ollama's handler %.2f ms and its counters %.2f ms do not nest (the handler may end up to %.2f ms after the client's read, the longest a wake-up here was late)",
				i, r.DoneMs, handler[i], s.LoadMs+s.PromptMs+s.PredictedMs, lag.MaxMs)
		}
		if ttftGap < 0 {
			t.Errorf("request %d: TTFT %.2f ms, less than Ollama's load+prefill %.2f ms", i, r.TTFTMs, s.TTFTMs())
		}
		if decodeGap > bound {
			t.Errorf("request %d: decode %.2f ms (%d tokens), Ollama's eval_duration %.2f ms: %.2f ms longer, more than the %.2f ms outside Ollama's counters (network %.2f + Ollama's own %.2f)",
				i, decode, r.OutputTokens, s.PredictedMs, decodeGap, bound, network, own)
		}
	}
	t.Logf("%d requests: bench's TTFT exceeds Ollama's load+prefill by at most %.2f ms, its decode time differs from eval_duration by at most %.2f ms; shares outside Ollama's counters up to %.2f ms (%v)",
		n, worstTTFT, worstDecode, maxBound, lag)
	ollamaStamps(t, run.recs, judge)
}

// chunkShareMs bounds, on a machine that let the process run, a chunk's
// way from Ollama's stamp to bench's read on loopback: Ollama's JSON
// encoding, its write and flush, the kernel, bench's receive stamp.
const chunkShareMs = 5

// ollamaStamps: bench's TTFT and decode time of each request against
// Ollama's own clock. Ollama stamps each line's created_at as it hands the
// line to its writer; bench keeps the stamps of the first and last token
// lines (first_token_ms, last_token_ms from t0). A chunk's share is bench's
// read of it less Ollama's stamp: never below 0 (bench cannot read a line
// before Ollama made it, on one clock), and on a quiet machine within
// chunkShareMs. Then bench's TTFT is Ollama's first-token instant plus the
// first chunk's share, and bench's decode time Ollama's first-to-last span
// plus the difference of the two shares: both equal Ollama's own figures
// within the network's share.
func ollamaStamps(t *testing.T, recs []metrics.Record, judge bool) {
	t.Helper()
	var worst float64
	for i, r := range recs {
		s := r.Server
		if !r.OK || s == nil || len(r.ChunkMs) < 2 {
			continue // reported above
		}
		if s.FirstTokenMs <= 0 || s.LastTokenMs < s.FirstTokenMs {
			t.Errorf("request %d: Ollama's token stamps %.3f … %.3f ms after t0: want both, in order", i, s.FirstTokenMs, s.LastTokenMs)
			continue
		}
		first, last := r.ChunkMs[0]-s.FirstTokenMs, r.ChunkMs[len(r.ChunkMs)-1]-s.LastTokenMs
		worst = max(worst, first, last)
		decode, span := r.ChunkMs[len(r.ChunkMs)-1]-r.ChunkMs[0], s.LastTokenMs-s.FirstTokenMs
		t.Logf("request %d: TTFT %.3f ms, Ollama's first token at %.3f; decode %.3f ms, Ollama's span %.3f; shares first %.3f, last %.3f ms",
			i, r.TTFTMs, s.FirstTokenMs, decode, span, first, last)
		if first < 0 || last < 0 {
			t.Errorf("request %d: bench read a chunk before Ollama stamped it (shares %.3f, %.3f ms)", i, first, last)
		}
		if judge && (first > chunkShareMs || last > chunkShareMs) {
			t.Errorf("request %d: TTFT %.3f ms against Ollama's first token at %.3f, decode %.3f ms against its span %.3f: shares %.3f and %.3f ms, over %d ms",
				i, r.TTFTMs, s.FirstTokenMs, decode, span, first, last, chunkShareMs)
		}
	}
	t.Logf("%d requests: bench's TTFT and decode time equal Ollama's own stamps within chunk shares of at most %.3f ms", len(recs), worst)
}

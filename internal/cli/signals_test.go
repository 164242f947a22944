package cli

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tokbench/tokbench/internal/fakellm"
	"github.com/tokbench/tokbench/metrics"
	"github.com/tokbench/tokbench/results"
)

// TestInterruptsRule: the first signal ends ctx, one within a second of it
// changes nothing, a later one ends hurry, and a second after that the
// signals are no longer caught.
func TestInterruptsRule(t *testing.T) {
	var sigs chan<- os.Signal
	released := make(chan struct{})
	var stderr lockedBuffer
	env := Env{Stderr: &stderr, Signals: func(c chan<- os.Signal) func() {
		sigs = c
		return func() { close(released) }
	}}
	ctx, hurry, stop := env.interrupts(context.Background())
	defer stop()
	ended := func(c context.Context) bool {
		select {
		case <-c.Done():
			return true
		case <-time.After(100 * time.Millisecond): // the watcher has had its turn
			return false
		}
	}
	if ended(ctx) || ended(hurry) {
		t.Fatal("ended before any signal")
	}
	sigs <- syscall.SIGTERM
	sigs <- syscall.SIGTERM // timeout's second TERM, to the process group
	if !ended(ctx) {
		t.Fatal("the first signal did not end ctx")
	}
	if ended(hurry) {
		t.Fatal("a second signal within a second of the first hurried: it is the same signal")
	}
	time.Sleep(sameSignal)
	sigs <- syscall.SIGTERM
	if !ended(hurry) {
		t.Fatal("a second signal a second after the first did not hurry")
	}
	select {
	case <-released:
		t.Fatal("the signals were released at once after the hurry: a doubled signal would kill")
	default:
	}
	select {
	case <-released:
	case <-time.After(sameSignal + 2*time.Second):
		t.Fatal("the signals are still caught well past a second after the hurry")
	}
	if got := stderr.String(); strings.Count(got, "\n") != 2 || !strings.Contains(got, "terminated again") {
		t.Errorf("stderr %q, want one line for the first signal and one for the second", got)
	}
}

// startGroup starts the binary with args in a process group of its own,
// as a shell or coreutils' timeout runs it, so a signal to the group
// reaches it as theirs does.
func startGroup(t *testing.T, args ...string) (cmd *exec.Cmd, done <-chan error, stderr *lockedBuffer) {
	t.Helper()
	cmd = exec.Command(buildBinary(t), args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stderr = &lockedBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	ch := make(chan error, 1)
	go func() { ch <- cmd.Wait() }()
	return cmd, ch, stderr
}

// signalGroup sends TERM to the process group cmd leads n times, 10 ms
// apart: the kernel keeps one TERM pending, so back-to-back sends could be
// one, where timeout's two often are two.
func signalGroup(t *testing.T, cmd *exec.Cmd, n int) {
	t.Helper()
	for i := range n {
		if i > 0 {
			time.Sleep(10 * time.Millisecond)
		}
		if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
	}
}

// streamsRunning waits until n of srv's streams have sent a token chunk.
func streamsRunning(t *testing.T, srv *fakellm.Server, n int) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		running := 0
		for _, st := range srv.Streams() {
			if len(st.Flushes) > 0 && st.Flushes[len(st.Flushes)-1].Before(time.Now()) {
				running++
			}
		}
		if running >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d streams started", running, n)
		}
	}
}

// waitExit waits up to within for the process's end and returns its code.
func waitExit(t *testing.T, done <-chan error, within time.Duration, stderr *lockedBuffer) int {
	t.Helper()
	select {
	case err := <-done:
		if err == nil {
			return 0
		}
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			t.Fatal(err)
		}
		return ee.ExitCode()
	case <-time.After(within):
		t.Fatalf("still running %v after the signal; stderr:\n%s", within, stderr)
		return 0
	}
}

// wroteRun checks that dir holds summary.json, marked interrupted, counting
// every record requests.jsonl holds, and a report.html.
func wroteRun(t *testing.T, dir string) (metrics.Summary, []metrics.Record) {
	t.Helper()
	s, err := results.ReadSummary(dir)
	if err != nil {
		t.Fatalf("summary.json: %v", err)
	}
	if !s.Interrupted || len(s.Levels) != 1 {
		t.Errorf("summary: interrupted %v, %d levels", s.Interrupted, len(s.Levels))
	}
	recs, _, err := results.ReadRecords(dir)
	if err != nil || len(s.Levels) == 0 || s.Levels[0].Requests.Sent != len(recs) {
		t.Fatalf("requests.jsonl holds %d records (%v), the summary counts %+v", len(recs), err, s.Levels)
	}
	if _, err := os.Stat(filepath.Join(dir, "report.html")); err != nil {
		t.Errorf("report.html: %v", err)
	}
	return s, recs
}

// TestDoubleTERMWritesEverything: coreutils' timeout signals tokbench and
// its process group, two TERMs at once. They are one: the streams in
// flight finish within the grace, summary.json and report.html are
// written, and the exit is 130.
func TestDoubleTERMWritesEverything(t *testing.T) {
	srv := fakellm.New(fakellm.Script{TTFT: 5 * time.Millisecond, Gap: 50 * time.Millisecond, Tokens: 16, Usage: true})
	t.Cleanup(srv.Close)
	dir := filepath.Join(t.TempDir(), "run")
	cmd, done, stderr := startGroup(t, "bench", "--url", srv.URL, "--model", "m", "--concurrency", "4",
		"--duration", "60s", "--warmup", "0", "--input-tokens", "16", "--grace", "30s", "--out", dir)
	streamsRunning(t, srv, 8) // a second wave is on its way
	signalGroup(t, cmd, 2)
	if code := waitExit(t, done, 20*time.Second, stderr); code != ExitInterrupted {
		t.Fatalf("exit %d, want %d; stderr:\n%s", code, ExitInterrupted, stderr)
	}
	_, recs := wroteRun(t, dir)
	for _, r := range recs {
		if !r.OK {
			t.Errorf("record %d: %s: the double TERM cut a stream the grace had time for", r.ID, r.ErrorClass)
		}
	}
	if strings.Contains(stderr.String(), "again") {
		t.Errorf("the second TERM was read as a second signal:\n%s", stderr)
	}
}

// TestTimeoutPreserveStatus is the user's own command: `timeout
// --preserve-status` ends a run with requests in flight; everything is
// written and timeout passes on tokbench's 130.
func TestTimeoutPreserveStatus(t *testing.T) {
	timeout, err := exec.LookPath("timeout")
	if err != nil {
		t.Skip("no coreutils timeout")
	}
	bin := buildBinary(t)
	srv := fakellm.New(fakellm.Script{TTFT: 5 * time.Millisecond, Gap: 50 * time.Millisecond, Tokens: 16, Usage: true})
	t.Cleanup(srv.Close)
	dir := filepath.Join(t.TempDir(), "run")
	cmd := exec.Command(timeout, "--preserve-status", "3", bin, "bench", "--url", srv.URL, "--model", "m",
		"--concurrency", "4", "--duration", "60s", "--warmup", "0", "--input-tokens", "16", "--out", dir)
	var stderr lockedBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	ch := make(chan error, 1)
	go func() { ch <- cmd.Wait() }()
	if code := waitExit(t, ch, 30*time.Second, &stderr); code != ExitInterrupted {
		t.Fatalf("exit %d, want %d; stderr:\n%s", code, ExitInterrupted, &stderr)
	}
	wroteRun(t, dir)
}

// TestLaterSecondSignalCutsGraceAndWrites: a second signal a second or
// more after the first cuts the streams the grace still waits for, and
// everything measured is written before the exit, 130.
func TestLaterSecondSignalCutsGraceAndWrites(t *testing.T) {
	srv := fakellm.New(fakellm.Script{TTFT: 5 * time.Millisecond, Gap: 500 * time.Millisecond, Tokens: 100, Usage: true})
	t.Cleanup(srv.Close)
	dir := filepath.Join(t.TempDir(), "run")
	cmd, done, stderr := startGroup(t, "bench", "--url", srv.URL, "--model", "m", "--concurrency", "2",
		"--requests", "4", "--warmup", "0", "--grace", "60s", "--out", dir)
	streamsRunning(t, srv, 2)
	signalGroup(t, cmd, 1)
	select {
	case err := <-done:
		t.Fatalf("exited on the first signal (%v), with streams that had 60 s of grace", err)
	case <-time.After(sameSignal + 200*time.Millisecond):
	}
	signalGroup(t, cmd, 1)
	if code := waitExit(t, done, 10*time.Second, stderr); code != ExitInterrupted {
		t.Fatalf("exit %d, want %d; stderr:\n%s", code, ExitInterrupted, stderr)
	}
	_, recs := wroteRun(t, dir)
	if len(recs) != 2 {
		t.Fatalf("%d records, want the 2 streams that were cut", len(recs))
	}
	for _, r := range recs {
		if r.OK || r.ErrorClass != "interrupted" || r.OutputTokens == 0 {
			t.Errorf("record %d: ok %v, class %q, %d tokens; want interrupted, with the tokens it had", r.ID, r.OK, r.ErrorClass, r.OutputTokens)
		}
	}
}

// TestProxyDoubleTERMFinishesStreams: the proxy under timeout or
// Kubernetes gets TERM, maybe twice at once: the client's stream in
// flight ends whole within the grace, and summary.json and report.html
// are written.
func TestProxyDoubleTERMFinishesStreams(t *testing.T) {
	up := fakellm.New(fakellm.Script{TTFT: 5 * time.Millisecond, Gap: 20 * time.Millisecond, Tokens: 50, Usage: true})
	t.Cleanup(up.Close)
	dir := filepath.Join(t.TempDir(), "live")
	cmd, done, stderr := startGroup(t, "proxy", "--listen", "127.0.0.1:0", "--upstream", up.URL+"/v1",
		"--grace", "20s", "--out", dir)
	var base string
	for deadline := time.Now().Add(20 * time.Second); base == ""; time.Sleep(10 * time.Millisecond) {
		if m := regexp.MustCompile(`(http://127\.0\.0\.1:\d+) →`).FindStringSubmatch(stderr.String()); m != nil {
			base = m[1]
		} else if time.Now().After(deadline) {
			t.Fatalf("the proxy never said where it listens:\n%s", stderr)
		}
	}
	resp, err := http.Post(base+"/v1/chat/completions", "application/json",
		strings.NewReader(`{"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":[]}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	if _, err := br.ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	signalGroup(t, cmd, 2)
	rest, err := io.ReadAll(br)
	if !strings.HasSuffix(string(rest), "data: [DONE]\n\n") {
		t.Errorf("the client's stream was cut (%v): it ends %q", err, lastBytes(string(rest), 120))
	}
	if code := waitExit(t, done, 20*time.Second, stderr); code != 0 {
		t.Fatalf("exit %d, want 0; stderr:\n%s", code, stderr)
	}
	s, err := results.ReadSummary(dir)
	if err != nil || len(s.Levels) != 1 || s.Levels[0].Requests.Completed != 1 {
		t.Fatalf("summary.json: %+v, %v", s.Levels, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "report.html")); err != nil {
		t.Errorf("report.html: %v", err)
	}
}

func lastBytes(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// TestServeFinishesStreamsOnTERM: serve under timeout gets two TERMs at
// once; it takes no new request and lets the stream in flight end whole.
func TestServeFinishesStreamsOnTERM(t *testing.T) {
	var sigs chan<- os.Signal
	subscribed := make(chan struct{})
	var stderr lockedBuffer
	env := Env{Stderr: &stderr, Signals: func(c chan<- os.Signal) func() {
		sigs = c
		close(subscribed)
		return func() {}
	}}
	done := make(chan int, 1)
	go func() { done <- Run(t.Context(), []string{"serve", "--addr", "127.0.0.1:0", "--grace", "20s"}, env) }()
	<-subscribed
	var base string
	for deadline := time.Now().Add(10 * time.Second); base == ""; time.Sleep(10 * time.Millisecond) {
		if base = regexp.MustCompile(`http://127\.0\.0\.1:\d+/v1`).FindString(stderr.String()); base == "" && time.Now().After(deadline) {
			t.Fatalf("no URL on stderr: %q", stderr.String())
		}
	}
	resp, err := http.Post(base+"/completions", "application/json", strings.NewReader(`{"prompt":"a","max_tokens":200,"stream":true}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	if _, err := br.ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	sigs <- syscall.SIGTERM
	sigs <- syscall.SIGTERM
	rest, err := io.ReadAll(br)
	if !strings.HasSuffix(string(rest), "data: [DONE]\n\n") {
		t.Errorf("the stream in flight was cut (%v): it ends %q", err, lastBytes(string(rest), 120))
	}
	select {
	case code := <-done:
		if code != 0 {
			t.Errorf("exit %d, want 0: %s", code, stderr.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("serve did not stop after its streams ended")
	}
}

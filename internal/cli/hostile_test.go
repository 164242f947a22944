package cli

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tokbench/tokbench/internal/fakellm"
	"github.com/tokbench/tokbench/results"
)

// TestEmptyURLRefused: --url "" (a CI script's unset variable) is bad input,
// not a benchmark of the simulator.
func TestEmptyURLRefused(t *testing.T) {
	code, _, stderr := runCLI(context.Background(), nil, "bench", "--url", "", "--requests", "1")
	if code != ExitUsage || !strings.Contains(stderr, "--url: empty") {
		t.Errorf("exit %d, stderr %q; want 2 and a line naming --url", code, stderr)
	}
}

// TestOutKeepsAnEarlierRun: --out on a directory holding a run is refused,
// and the run is intact; --replace writes over it.
func TestOutKeepsAnEarlierRun(t *testing.T) {
	srv := fakellm.New(fakellm.Script{TTFT: time.Millisecond, Gap: time.Millisecond, Tokens: 2, Usage: true})
	defer srv.Close()
	dir := filepath.Join(t.TempDir(), "run")
	args := []string{"bench", "--url", srv.URL + "/v1", "--model", "m", "--concurrency", "1", "--requests", "2", "--warmup", "0", "--out", dir}
	if code, _, stderr := runCLI(context.Background(), nil, args...); code != 0 {
		t.Fatalf("first run: exit %d: %s", code, stderr)
	}
	before, _ := os.ReadFile(filepath.Join(dir, results.RequestsFile))
	code, _, stderr := runCLI(context.Background(), nil, args...)
	if code != ExitUsage || !strings.Contains(stderr, "holds a run already") {
		t.Errorf("second run into it: exit %d, stderr %q; want 2", code, stderr)
	}
	if after, _ := os.ReadFile(filepath.Join(dir, results.RequestsFile)); string(after) != string(before) || len(before) == 0 {
		t.Error("the earlier run's requests.jsonl changed")
	}
	if code, _, stderr := runCLI(context.Background(), nil, append(args, "--replace")...); code != 0 {
		t.Errorf("--replace: exit %d: %s", code, stderr)
	}
}

// TestCompareNothingInCommonFails: two runs without a load level in common
// compared nothing; that is no passed gate.
func TestCompareNothingInCommonFails(t *testing.T) {
	srv := fakellm.New(fakellm.Script{TTFT: time.Millisecond, Gap: time.Millisecond, Tokens: 2, Usage: true})
	defer srv.Close()
	root := t.TempDir()
	for _, c := range []string{"1", "2"} {
		if code, _, stderr := runCLI(context.Background(), nil, "bench", "--url", srv.URL+"/v1", "--model", "m", "--concurrency", c,
			"--requests", "2", "--warmup", "0", "--out", filepath.Join(root, "c"+c)); code != 0 {
			t.Fatalf("exit %d: %s", code, stderr)
		}
	}
	code, _, stderr := runCLI(context.Background(), nil, "compare", filepath.Join(root, "c1"), filepath.Join(root, "c2"), "--fail-if", "ttft_p95>+10%")
	if code != ExitFailure || !strings.Contains(stderr, "share no load level") {
		t.Errorf("exit %d, stderr %q; want 1 and a line saying nothing was compared", code, stderr)
	}
}

// TestQuerySecretScrubbed: a key in the URL's query never reaches a record,
// in a connection error or an error body, in any of its encodings.
func TestQuerySecretScrubbed(t *testing.T) {
	const key = "qk-0123456789abcdef"
	dir := filepath.Join(t.TempDir(), "run")
	code, _, _ := runCLI(context.Background(), nil, "bench", "--url", "http://127.0.0.1:1/v1?api_key="+key, "--model", "m",
		"--concurrency", "1", "--requests", "1", "--warmup", "0", "--out", dir)
	if code == 0 {
		t.Fatal("a refused connection completed")
	}
	for _, f := range []string{results.RequestsFile, results.RunFile, results.SummaryFile} {
		b, _ := os.ReadFile(filepath.Join(dir, f))
		if strings.Contains(string(b), key) || strings.Contains(string(b), "cWstMDEyMzQ1Njc4OWFiY2RlZg") {
			t.Errorf("%s holds the query's key", f)
		}
	}
}

// TestFullDiskFails: when requests.jsonl cannot be written (here it is
// /dev/full, a disk that is always full), the run exits non-zero and says
// so, instead of reporting success.
func TestFullDiskFails(t *testing.T) {
	if _, err := os.Stat("/dev/full"); err != nil {
		t.Skip("no /dev/full")
	}
	srv := fakellm.New(fakellm.Script{TTFT: time.Millisecond, Gap: time.Millisecond, Tokens: 2, Usage: true})
	defer srv.Close()
	dir := filepath.Join(t.TempDir(), "run")
	os.MkdirAll(dir, 0o755)
	if err := os.Symlink("/dev/full", filepath.Join(dir, results.RequestsFile)); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := runCLI(context.Background(), nil, "bench", "--url", srv.URL+"/v1", "--model", "m",
		"--concurrency", "1", "--requests", "2", "--warmup", "0", "--out", dir)
	if code != ExitFailure || !strings.Contains(stderr, "the run was not written whole") {
		t.Errorf("exit %d, stderr %q; want 1 and a line saying the run was not written", code, stderr)
	}
	if n := strings.Count(stderr, "no space left on device"); n != 1 {
		t.Errorf("stderr gives the error %d times, want once: %q", n, stderr)
	}
}

// TestFullDiskLeavesNoTmp is issue 34's: a full disk under report.html
// (its .tmp is /dev/full here) fails the run and the report command with
// the error once, and leaves neither report.html.tmp nor a torn
// report.html; the other files of the run are whole.
func TestFullDiskLeavesNoTmp(t *testing.T) {
	if _, err := os.Stat("/dev/full"); err != nil {
		t.Skip("no /dev/full")
	}
	srv := fakellm.New(fakellm.Script{TTFT: time.Millisecond, Gap: time.Millisecond, Tokens: 2, Usage: true})
	defer srv.Close()
	dir := filepath.Join(t.TempDir(), "run")
	os.MkdirAll(dir, 0o755)
	tmp := filepath.Join(dir, "report.html.tmp")
	full := func() {
		if err := os.Symlink("/dev/full", tmp); err != nil {
			t.Fatal(err)
		}
	}
	check := func(what string, code int, stderr string) {
		t.Helper()
		if code != ExitFailure || strings.Count(stderr, "no space left on device") != 1 || !strings.Contains(stderr, "report.html") {
			t.Errorf("%s: exit %d, stderr %q; want 1 and the error once, naming report.html", what, code, stderr)
		}
		if _, err := os.Lstat(tmp); !os.IsNotExist(err) {
			t.Errorf("%s: report.html.tmp left behind (%v)", what, err)
		}
		if _, err := os.Stat(filepath.Join(dir, "report.html")); !os.IsNotExist(err) {
			t.Errorf("%s: a report.html was written (%v)", what, err)
		}
	}
	full()
	code, _, stderr := runCLI(context.Background(), nil, "bench", "--url", srv.URL+"/v1", "--model", "m",
		"--concurrency", "1", "--requests", "2", "--warmup", "0", "--out", dir)
	check("bench", code, stderr)
	if _, err := results.ReadSummary(dir); err != nil {
		t.Errorf("summary.json: %v", err)
	}
	full()
	code, _, stderr = runCLI(context.Background(), nil, "report", dir)
	check("report", code, stderr)
}

// TestURLQueryKeptForModelDiscovery: a query in --url (Azure's
// ?api-version=) stays after the path when tokbench asks for the models.
func TestURLQueryKeptForModelDiscovery(t *testing.T) {
	srv := fakellm.New(fakellm.Script{TTFT: time.Millisecond, Gap: time.Millisecond, Tokens: 2, Usage: true})
	defer srv.Close()
	code, _, stderr := runCLI(context.Background(), nil, "bench", "--url", srv.URL+"/v1?api-version=2024-10-21",
		"--concurrency", "1", "--requests", "1", "--warmup", "0")
	if code != 0 {
		t.Errorf("exit %d: %s", code, stderr)
	}
}

// TestTokenizerServerWithoutEndpoint: --tokenizer server against a server
// with no /tokenize stops before any level with one line and exit 2.
func TestTokenizerServerWithoutEndpoint(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	defer srv.Close()
	code, stdout, stderr := runCLI(context.Background(), nil, "bench", "--url", srv.URL+"/v1", "--model", "m",
		"--tokenizer", "server", "--concurrency", "1", "--requests", "1")
	if code != ExitUsage || strings.Count(strings.TrimSpace(stderr), "\n") != 0 ||
		!strings.Contains(stderr, "--tokenizer server") || !strings.Contains(stderr, "404") {
		t.Errorf("exit %d, stderr %q; want 2 and one line naming --tokenizer server and the 404", code, stderr)
	}
	if strings.Contains(stdout, "c=1") {
		t.Errorf("a level ran: %s", stdout)
	}
}

// TestUnreachableServer: a closed port is the run's failure (exit 1) and
// says which address could not be reached, under --api auto too; --model is
// not blamed.
func TestUnreachableServer(t *testing.T) {
	addr := closedAddr(t)
	for _, extra := range [][]string{nil, {"--api", "auto"}} {
		args := append([]string{"bench", "--url", "http://" + addr + "/v1", "--concurrency", "1", "--requests", "1"}, extra...)
		code, _, stderr := runCLI(context.Background(), nil, args...)
		if code != ExitFailure || strings.Count(strings.TrimSpace(stderr), "\n") != 0 ||
			!strings.Contains(stderr, "cannot reach http://"+addr+"/v1") || !strings.Contains(stderr, "connection refused") ||
			strings.Contains(stderr, "--model") {
			t.Errorf("%v: exit %d, stderr %q; want 1 and one line saying %s cannot be reached", extra, code, stderr, addr)
		}
	}
}

// TestHTTPFailuresSayWhere: a level's failures name the endpoint that
// refused and the server's message, never the query string's key, in the
// table's notes and summary.json's error_samples.
func TestHTTPFailuresSayWhere(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNotFound)
		_, _ = io.WriteString(w, `{"error":{"message":"The model `+"`m`"+` does not exist.","type":"NotFoundError"}}`)
	}))
	defer srv.Close()
	dir := filepath.Join(t.TempDir(), "run")
	code, stdout, stderr := runCLI(context.Background(), nil, "bench", "--url", srv.URL+"/v1?api_key=planted-q-secret",
		"--model", "m", "--concurrency", "1", "--requests", "2", "--warmup", "0", "--out", dir)
	if code != ExitFailure {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	want := "http_404 ×2 (HTTP 404 from POST /v1/chat/completions: The model `m` does not exist.)"
	if !strings.Contains(stdout, want) {
		t.Errorf("stdout lacks %q:\n%s", want, stdout)
	}
	sum, err := os.ReadFile(filepath.Join(dir, results.SummaryFile))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(sum), `"error_samples": {`) || !strings.Contains(string(sum), "from POST /v1/chat/completions") {
		t.Errorf("summary.json has no error sample:\n%s", sum)
	}
	for _, f := range []string{results.SummaryFile, results.RequestsFile, results.RunFile} {
		b, _ := os.ReadFile(filepath.Join(dir, f))
		if strings.Contains(string(b), "planted-q-secret") {
			t.Errorf("%s holds the query string's key", f)
		}
	}
	if strings.Contains(stdout+stderr, "planted-q-secret") {
		t.Error("the output holds the query string's key")
	}
}

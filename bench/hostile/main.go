// Command hostile runs the tokbench binary against a set of hostile
// servers on loopback and reports, per server, the client's peak RSS, its
// wall time against the run's timeouts, its exit code, and every planted
// secret it let out: into the run directory, stdout, stderr, or a request
// that reached another origin. Secrets are looked for raw, URL-encoded,
// Base64 (standard and URL alphabets) and as the Basic-auth credential of
// the URL's user and password.
//
//	go build -o /tmp/tokbench ./cmd/tokbench
//	go run ./bench/hostile -tokbench /tmp/tokbench
//
// Every run is bounded: 16 users (-concurrency), 2 requests each, --timeout 20s,
// --stall-timeout 3s, and the harness kills a run that outlives 60 s.
package main

import (
	"bytes"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// The planted secrets: the API key (in $OPENAI_API_KEY), a custom header's
// value, a query parameter and the URL's password.
const (
	apiKey    = "sk-hostilePLANTEDkey1234567890"
	headerVal = "hdrPLANTEDvalue987654"
	queryVal  = "qPLANTEDtoken555"
	urlUser   = "benchuser"
	urlPass   = "pwPLANTED4242"
)

// users is -concurrency.
var users = 16

const (
	timeout      = 20 * time.Second
	stallTimeout = 3 * time.Second
	killAfter    = 60 * time.Second
)

// scenario is one hostile server: its handler, given the URL of the
// "elsewhere" server (another origin).
type scenario struct {
	name, what string
	handler    func(elsewhere string) http.Handler
	raw        func(c net.Conn) // a raw TCP server instead of HTTP
}

func sse(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
}

// echo is everything the client sent: method, URL, headers and body.
func echo(r *http.Request) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s ", r.Method, r.URL.String())
	for k, vs := range r.Header {
		fmt.Fprintf(&b, "%s=%s ", k, strings.Join(vs, ","))
		for _, v := range vs {
			// and the credential alone, as some servers repeat it
			if f := strings.Fields(v); len(f) == 2 {
				fmt.Fprintf(&b, "%s ", f[1])
			}
		}
	}
	body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	b.Write(body)
	return b.String()
}

func models(w http.ResponseWriter) {
	_, _ = io.WriteString(w, `{"object":"list","data":[{"id":"m","object":"model"}]}`)
}

var scenarios = []scenario{
	{name: "endless", what: "a stream that never ends: tokens past max_tokens, no finish, no [DONE]",
		handler: func(string) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if strings.HasSuffix(r.URL.Path, "/models") {
					models(w)
					return
				}
				sse(w)
				chunk := []byte("data: {\"choices\":[{\"delta\":{\"content\":\" the\"}}]}\n\n")
				for r.Context().Err() == nil {
					if _, err := w.Write(bytes.Repeat(chunk, 64)); err != nil {
						return
					}
				}
			})
		}},
	{name: "event-lines", what: "one SSE event split over endless data: lines",
		handler: func(string) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				sse(w)
				line := []byte("data: " + strings.Repeat("x", 4096) + "\n")
				for r.Context().Err() == nil {
					if _, err := w.Write(line); err != nil {
						return
					}
				}
			})
		}},
	{name: "huge-headers", what: "response headers that never end",
		raw: func(c net.Conn) {
			_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n")
			line := []byte("X-Filler: " + strings.Repeat("y", 8000) + "\r\n")
			for {
				if _, err := c.Write(line); err != nil {
					return
				}
			}
		}},
	{name: "big-chunk", what: "one 50 MB token chunk, with usage",
		handler: func(string) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				sse(w)
				_, _ = io.WriteString(w, "data: {\"choices\":[{\"delta\":{\"content\":\""+strings.Repeat("word ", 10<<20)+"\"}}]}\n\n")
				_, _ = io.WriteString(w, "data: {\"choices\":[{\"delta\":{},\"finish_reason\":\"length\"}],\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":8}}\n\ndata: [DONE]\n\n")
			})
		}},
	{name: "silent", what: "accepts the request and never answers",
		raw: func(c net.Conn) {
			_, _ = io.Copy(io.Discard, c)
		}},
	{name: "early-hints", what: "an endless series of 103 Early Hints",
		raw: func(c net.Conn) {
			buf := make([]byte, 64<<10)
			_, _ = c.Read(buf)
			for {
				if _, err := io.WriteString(c, "HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\r\n"); err != nil {
					return
				}
				time.Sleep(time.Millisecond)
			}
		}},
	{name: "redirect-307", what: "307 to another origin, the query's token in the Location",
		handler: func(elsewhere string) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				http.Redirect(w, r, elsewhere+r.URL.Path+"?"+r.URL.RawQuery, http.StatusTemporaryRedirect)
			})
		}},
	{name: "redirect-302", what: "302 to another origin",
		handler: func(elsewhere string) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				http.Redirect(w, r, elsewhere+r.URL.Path, http.StatusFound)
			})
		}},
	{name: "echo-error", what: "401 whose message repeats the whole request (URL, headers, bare credentials, body)",
		handler: func(string) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusUnauthorized)
				msg, _ := jsonString(echo(r))
				_, _ = io.WriteString(w, `{"error":{"message":`+msg+`}}`)
			})
		}},
	{name: "echo-stream", what: "a stream whose error event repeats the whole request",
		handler: func(string) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				sse(w)
				msg, _ := jsonString(echo(r))
				_, _ = io.WriteString(w, "data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n\n")
				_, _ = io.WriteString(w, `data: {"error":{"message":`+msg+"}}\n\n")
			})
		}},
	{name: "html-login", what: "200 with an HTML login page",
		handler: func(string) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/html")
				_, _ = io.WriteString(w, "<html><body><form>Sign in</form></body></html>")
			})
		}},
	{name: "gzip-sse", what: "a gzip-encoded event stream",
		handler: func(string) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/event-stream")
				w.Header().Set("Content-Encoding", "gzip")
				_, _ = w.Write([]byte{0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3})
			})
		}},
}

func jsonString(s string) (string, error) {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x20:
			fmt.Fprintf(&b, "\\u%04x", r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String(), nil
}

// forms are the encodings a secret is looked for in.
func forms() map[string]string {
	out := map[string]string{}
	basic := urlUser + ":" + urlPass
	for _, s := range []string{apiKey, headerVal, queryVal, urlPass, basic} {
		for name, f := range map[string]string{
			"raw": s, "url-encoded": url.QueryEscape(s),
			"base64":    base64.StdEncoding.EncodeToString([]byte(s)),
			"base64url": base64.RawURLEncoding.EncodeToString([]byte(s)),
		} {
			if s == basic && name == "raw" {
				continue // "user:pass" raw is the URL's own form, below
			}
			out[f] = name + " " + s[:min(len(s), 12)] + "…"
		}
	}
	return out
}

// elsewhere records every request that reaches another origin.
type elsewhere struct {
	mu   sync.Mutex
	seen []string
}

func (e *elsewhere) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	e.mu.Lock()
	e.seen = append(e.seen, echo(r))
	e.mu.Unlock()
	w.WriteHeader(http.StatusOK)
}

type result struct {
	name        string
	exit        int
	wall        time.Duration
	rssMB       float64
	leaks       []string
	forwarded   int
	classes     string
	withinLimit bool
}

func main() {
	bin := flag.String("tokbench", "", "tokbench binary (default: build ./cmd/tokbench)")
	only := flag.String("only", "", "run only this scenario")
	flag.IntVar(&users, "concurrency", 16, "users per run (bench's default levels go up to 16); each sends two requests")
	serveName := flag.String("serve", "", "internal: serve this scenario, print its address, exit when stdin closes")
	elsewhereURL := flag.String("elsewhere", "", "internal: with -serve, the other origin's URL")
	flag.Parse()
	if *serveName != "" {
		if err := serve(*serveName, *elsewhereURL); err != nil {
			fmt.Fprintln(os.Stderr, "hostile -serve:", err)
			os.Exit(1)
		}
		return
	}
	if err := run(*bin, *only); err != nil {
		fmt.Fprintln(os.Stderr, "hostile:", err)
		os.Exit(1)
	}
}

func run(bin, only string) error {
	tmp, err := os.MkdirTemp("", "tokbench-hostile-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	if bin == "" {
		bin = filepath.Join(tmp, "tokbench")
		if out, err := exec.Command("go", "build", "-o", bin, "./cmd/tokbench").CombinedOutput(); err != nil {
			return fmt.Errorf("build tokbench: %v\n%s", err, out)
		}
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	other := &elsewhere{}
	otherLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	go func() { _ = http.Serve(otherLn, other) }()
	otherURL := "http://" + otherLn.Addr().String()

	fmt.Printf("%-13s %5s %8s %8s %6s %7s  %s\n", "server", "exit", "wall s", "RSS MB", "leaks", "fwd", "outcome")
	var worst float64
	bad := 0
	for _, sc := range scenarios {
		if only != "" && sc.name != only {
			continue
		}
		res, err := runOne(self, bin, tmp, sc, otherURL, other)
		if err != nil {
			return fmt.Errorf("%s: %w", sc.name, err)
		}
		worst = max(worst, res.rssMB)
		mark := ""
		if len(res.leaks) > 0 || res.forwarded > 0 || !res.withinLimit || res.rssMB > 256 {
			bad++
			mark = "  <-- FAIL"
		}
		fmt.Printf("%-13s %5d %8.1f %8.1f %6d %7d  %s%s\n", res.name, res.exit, res.wall.Seconds(), res.rssMB,
			len(res.leaks), res.forwarded, res.classes, mark)
		for _, l := range res.leaks {
			fmt.Printf("    leak: %s\n", l)
		}
	}
	fmt.Printf("\npeak RSS over all servers %.1f MB (limit 256); %d servers failed a check\n", worst, bad)
	if bad > 0 {
		return errors.New("checks failed")
	}
	return nil
}

// serve runs scenario name on a loopback port in this process (a separate
// one from the harness, so the servers' memory is not in the client's peak
// RSS: a child's ru_maxrss starts from its parent's at exec) and prints the
// address; it returns when stdin closes.
func serve(name, otherURL string) error {
	var sc *scenario
	for i := range scenarios {
		if scenarios[i].name == name {
			sc = &scenarios[i]
		}
	}
	if sc == nil {
		return fmt.Errorf("unknown scenario %q", name)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	if sc.raw != nil {
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				go func() {
					defer c.Close()
					sc.raw(c)
				}()
			}
		}()
	} else {
		go func() { _ = http.Serve(ln, sc.handler(otherURL)) }()
	}
	fmt.Println(ln.Addr())
	_, _ = io.Copy(io.Discard, os.Stdin)
	return nil
}

func runOne(self, bin, tmp string, sc scenario, otherURL string, other *elsewhere) (result, error) {
	srvCmd := exec.Command(self, "-serve", sc.name, "-elsewhere", otherURL)
	stdin, err := srvCmd.StdinPipe()
	if err != nil {
		return result{}, err
	}
	srvOut, err := srvCmd.StdoutPipe()
	if err != nil {
		return result{}, err
	}
	srvCmd.Stderr = os.Stderr
	if err := srvCmd.Start(); err != nil {
		return result{}, err
	}
	defer func() { stdin.Close(); _ = srvCmd.Wait() }()
	line := make([]byte, 64)
	n, err := srvOut.Read(line)
	if err != nil {
		return result{}, fmt.Errorf("server: %w", err)
	}
	addr := strings.TrimSpace(string(line[:n]))

	other.mu.Lock()
	before := len(other.seen)
	other.mu.Unlock()

	out := filepath.Join(tmp, sc.name)
	target := fmt.Sprintf("http://%s:%s@%s/v1?api_key=%s", urlUser, urlPass, addr, queryVal)
	args := []string{"bench", "--url", target, "--model", "m", "--concurrency", strconv.Itoa(users), "--requests", strconv.Itoa(2 * users),
		"--warmup", "0", "--output-tokens", "16", "--input-tokens", "16",
		"--timeout", timeout.String(), "--stall-timeout", stallTimeout.String(),
		"--header", "X-Custom-Token: " + headerVal, "--out", out}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "OPENAI_API_KEY="+apiKey)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return result{}, err
	}
	timer := time.AfterFunc(killAfter, func() { _ = cmd.Process.Kill() })
	err = cmd.Wait()
	timer.Stop()
	res := result{name: sc.name, wall: time.Since(start), exit: cmd.ProcessState.ExitCode()}
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		res.rssMB = float64(ru.Maxrss) / 1024
	}
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		return res, err
	}
	// Each user sends two requests, each ending within --timeout, so the
	// run ends within two rounds of it (and set-up).
	res.withinLimit = res.wall < 2*timeout+5*time.Second

	texts := map[string]string{"stdout": stdout.String(), "stderr": stderr.String()}
	_ = filepath.Walk(out, func(p string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() {
			b, _ := os.ReadFile(p)
			texts[filepath.Base(p)] = string(b)
		}
		return nil
	})
	other.mu.Lock()
	forwarded := other.seen[before:]
	other.mu.Unlock()
	res.forwarded = len(forwarded)
	for i, f := range forwarded {
		texts[fmt.Sprintf("request %d to another origin", i)] = f
	}
	for form, label := range forms() {
		for where, text := range texts {
			if strings.Contains(text, form) {
				res.leaks = append(res.leaks, fmt.Sprintf("%s in %s", label, where))
			}
		}
	}
	res.classes = outcome(texts["stdout"], texts["stderr"])
	return res, nil
}

// outcome is the failure line of the run's table, or its last stderr line.
func outcome(stdout, stderr string) string {
	for _, l := range strings.Split(stdout, "\n") {
		if strings.Contains(l, " failed: ") {
			return strings.TrimSpace(l)
		}
	}
	lines := strings.Split(strings.TrimSpace(stderr), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

package main

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

type serverProc struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	addr   string
	scheme string         // http, or https with -tls and -h2
	roots  *x509.CertPool // https: the server's certificate, to trust
	dir    string
}

// buildServer builds the fake server unless bin names one; cleanup
// removes what it built.
func buildServer(bin string) (path string, cleanup func(), err error) {
	if bin != "" {
		return bin, func() {}, nil
	}
	dir, err := os.MkdirTemp("", "tokbench-harness-")
	if err != nil {
		return "", nil, err
	}
	bin = filepath.Join(dir, "fakeserver")
	build := exec.Command("go", "build", "-o", bin, "github.com/tokbench/tokbench/bench/fakeserver")
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		os.RemoveAll(dir)
		return "", nil, fmt.Errorf("build fakeserver: %w", err)
	}
	return bin, func() { os.RemoveAll(dir) }, nil
}

// serverOpts are a fake server's flags.
type serverOpts struct {
	cpuProfile string
	tls        bool   // HTTPS, HTTP/1.1 only (-tls)
	h2         bool   // HTTPS through net/http's server, HTTP/2 and HTTP/1.1 (-h2)
	cpus       string // taskset -c list the server runs on ("": any)
}

// startServer starts the fake server bin, and waits for its address (and
// with TLS reads the certificate it made).
func startServer(bin string, o serverOpts) (*serverProc, error) {
	p := &serverProc{scheme: "http"}
	args := []string{"-addr", "127.0.0.1:0", "-max", "15m"}
	if o.cpuProfile != "" {
		args = append(args, "-cpuprofile", o.cpuProfile)
	}
	var certFile string
	if o.tls || o.h2 {
		dir, err := os.MkdirTemp("", "tokbench-harness-cert-")
		if err != nil {
			return nil, err
		}
		p.dir, p.scheme = dir, "https"
		certFile = filepath.Join(dir, "cert.pem")
		args = append(args, "-tls", "-cert-out", certFile)
		if o.h2 {
			args = append(args, "-h2")
		}
	}
	p.cmd = exec.Command(bin, args...)
	if o.cpus != "" {
		p.cmd = exec.Command("taskset", append([]string{"-c", o.cpus, bin}, args...)...)
	}
	p.cmd.Stderr = os.Stderr
	var err error
	if p.stdin, err = p.cmd.StdinPipe(); err != nil {
		return nil, err
	}
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := p.cmd.Start(); err != nil {
		if p.dir != "" {
			os.RemoveAll(p.dir)
		}
		return nil, fmt.Errorf("start fakeserver: %w", err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	addr, ok := strings.CutPrefix(strings.TrimSpace(line), "listening on ")
	if err != nil || !ok {
		p.stop()
		return nil, errors.New("fakeserver did not report its address")
	}
	p.addr = addr
	if certFile != "" {
		pemCert, err := os.ReadFile(certFile)
		p.roots = x509.NewCertPool()
		if err != nil || !p.roots.AppendCertsFromPEM(pemCert) {
			p.stop()
			return nil, fmt.Errorf("fakeserver's certificate: %v", err)
		}
	}
	return p, nil
}

// serverStats is the fake server's GET /stats: counts since it started.
type serverStats struct {
	Accepted   int `json:"accepted"`    // TCP connections
	Requests   int `json:"requests"`    // completion requests
	H2Requests int `json:"h2_requests"` // of those, over HTTP/2
}

// stats reads the server's counts over a connection of its own, closed
// after the answer (HTTP/1.1, no keep-alive): every call adds one accepted
// connection, its own, which the count it returns includes.
func (p *serverProc) stats() (serverStats, error) {
	tr := &http.Transport{DisableKeepAlives: true, TLSClientConfig: &tls.Config{RootCAs: p.roots}}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Get(p.scheme + "://" + p.addr + "/stats")
	if err != nil {
		return serverStats{}, fmt.Errorf("fakeserver stats: %w", err)
	}
	defer resp.Body.Close()
	var st serverStats
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil || resp.StatusCode != http.StatusOK {
		return serverStats{}, fmt.Errorf("fakeserver stats: HTTP %d, %v", resp.StatusCode, err)
	}
	return st, nil
}

func (p *serverProc) stop() {
	p.stdin.Close() // the server exits when its stdin closes
	done := make(chan struct{})
	go func() { p.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		p.cmd.Process.Kill()
		<-done
	}
	if p.dir != "" {
		os.RemoveAll(p.dir)
	}
}

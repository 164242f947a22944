package api

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"github.com/tokbench/tokbench/sse"
)

// foreign is an error whose text is another platform's but which wraps
// the errno: the class must follow the errno, not the words.
type foreign struct{ err error }

func (f foreign) Error() string {
	return "No connection could be made because the target machine actively refused it."
}
func (f foreign) Unwrap() error { return f.err }

func TestTransportClassesByErrnoNotText(t *testing.T) {
	ctx := context.Background()

	// A real refusal: a loopback port nothing listens on any more.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	if _, err := net.DialTimeout("tcp", addr, 2*time.Second); err == nil {
		t.Errorf("dial %s: connected to a closed listener", addr)
	} else if got := ClassifyTransport(ctx, err); got != ClassConnectionRefused {
		t.Errorf("real refusal %q: class %q, want %q", err, got, ClassConnectionRefused)
	}

	// A plain HTTP server answering a TLS handshake: tls's own error type.
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer srv.Close()
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 2 * time.Second}, "tcp", srv.Listener.Addr().String(), &tls.Config{InsecureSkipVerify: true})
	if err == nil {
		conn.Close()
		t.Error("TLS handshake with a plain HTTP server succeeded")
	} else if got := ClassifyTransport(ctx, err); got != ClassTLS {
		t.Errorf("TLS to plain HTTP %q: class %q, want %q", err, got, ClassTLS)
	}

	cases := []struct {
		name string
		err  error
		want Class
	}{
		{"refusal in Windows' words", &url.Error{Op: "Post", URL: "http://h/", Err: &net.OpError{Op: "dial", Net: "tcp", Err: foreign{refusedErrno}}}, ClassConnectionRefused},
		{"reset in other words", &net.OpError{Op: "read", Net: "tcp", Err: foreign{resetErrno[0]}}, ClassConnectionReset},
		{"DNS failure in other words", &url.Error{Op: "Post", URL: "http://h/", Err: &net.OpError{Op: "dial", Err: &net.DNSError{Err: "this is usually a temporary error during hostname resolution", Name: "h"}}}, ClassDNS},
		{"none of them", errors.New("something else"), ClassConnection},
	}
	for _, c := range cases {
		if got := ClassifyTransport(ctx, c.err); got != c.want {
			t.Errorf("%s (%q): class %q, want %q", c.name, c.err, got, c.want)
		}
	}
}

func TestReadClassesBySentinel(t *testing.T) {
	for _, c := range []struct {
		err  error
		want Class
	}{
		{fmt.Errorf("reading the stream: %w", sse.ErrLineTooLong), ClassLineTooLong},
		{fmt.Errorf("reading the stream: %w", sse.ErrEventTooLarge), ClassEventTooLarge},
		{errors.New("the line was longer than we like"), ClassConnectionDropped},
	} {
		if got := classifyRead(c.err); got != c.want {
			t.Errorf("classifyRead(%q) = %q, want %q", c.err, got, c.want)
		}
	}
}

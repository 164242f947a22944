package api

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/tokbench/tokbench/sse"
	"github.com/tokbench/tokbench/wire"
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

	for _, c := range transportCases() {
		if got := ClassifyTransport(ctx, c.err); got != c.want {
			t.Errorf("%s: ClassifyTransport(%q) = %q, want %q", c.name, c.err, got, c.want)
		}
	}
}

// transportCase is an error ClassifyTransport meets and its class.
type transportCase struct {
	name string
	err  error
	want Class
}

// transportCases are one error of every kind ClassifyTransport tells
// apart, each as the stack returns it (wrapped in *url.Error and
// *net.OpError), and texts that merely read like one.
func transportCases() []transportCase {
	post := func(err error) error { return &url.Error{Op: "Post", URL: "https://h/v1/chat/completions", Err: err} }
	dial := func(err error) error { return post(&net.OpError{Op: "dial", Net: "tcp", Err: err}) }
	read := func(err error) error { return post(&net.OpError{Op: "read", Net: "tcp", Err: err}) }
	cert := &x509.Certificate{}
	cases := []transportCase{
		{"refusal", dial(os.NewSyscallError("connect", refusedErrno)), ClassConnectionRefused},
		{"refusal in Windows' words", dial(foreign{refusedErrno}), ClassConnectionRefused},
		{"DNS failure in other words", dial(&net.DNSError{Err: "this is usually a temporary error during hostname resolution", Name: "h"}), ClassDNS},
		{"DNS: no such host", dial(&net.DNSError{Err: "no such host", Name: "h", IsNotFound: true}), ClassDNS},
		{"TLS record header", post(tls.RecordHeaderError{Msg: "first record does not look like a TLS handshake"}), ClassTLS},
		{"TLS alert (QUIC)", post(tls.AlertError(40)), ClassTLS},
		{"TLS verification", post(&tls.CertificateVerificationError{Err: x509.UnknownAuthorityError{Cert: cert}}), ClassTLS},
		{"x509 unknown authority", post(x509.UnknownAuthorityError{Cert: cert}), ClassTLS},
		{"x509 host name", post(x509.HostnameError{Certificate: cert, Host: "h"}), ClassTLS},
		{"x509 invalid", post(x509.CertificateInvalidError{Cert: cert, Reason: x509.Expired}), ClassTLS},
		{"TLS alert received", post(&net.OpError{Op: "remote error", Err: errors.New("tls: handshake failure")}), ClassTLS},
		{"TLS alert sent", post(&net.OpError{Op: "local error", Err: errors.New("tls: unexpected message")}), ClassTLS},
		{"TLS handshake in words only", post(&wire.HandshakeError{Err: errors.New("tls: server selected unsupported protocol version 300")}), ClassTLS},
		{"TLS handshake cut by the peer", post(&wire.HandshakeError{Err: io.EOF}), ClassConnectionReset},
		{"EOF", post(io.EOF), ClassConnectionReset},
		{"unexpected EOF", read(io.ErrUnexpectedEOF), ClassConnectionReset},
		{"head too large", post(fmt.Errorf("reading the answer: %w", wire.ErrHeadTooLarge)), ClassHeadTooLarge},
		{"too many interim answers", post(wire.ErrTooManyInterim), ClassTooManyInterim},
		{"deadline", read(os.ErrDeadlineExceeded), ClassTimeout},
		{"none of them", errors.New("something else"), ClassConnection},
		// Words without the error behind them are not a class.
		{"refusal's words alone", errors.New("dial tcp 127.0.0.1:1: connect: connection refused"), ClassConnection},
		{"DNS words alone", errors.New("lookup h: no such host"), ClassConnection},
		{"TLS words alone", errors.New("x509: certificate signed by unknown authority"), ClassConnection},
		{"reset words alone", errors.New("read: connection reset by peer"), ClassConnection},
	}
	for _, e := range resetErrno {
		cases = append(cases, transportCase{fmt.Sprintf("reset errno %d", uintptr(e)), read(os.NewSyscallError("read", e)), ClassConnectionReset},
			transportCase{fmt.Sprintf("reset errno %d in other words", uintptr(e)), read(foreign{e}), ClassConnectionReset})
	}
	return cases
}

// TestHandshakeFailuresThroughWire: tokbench's own transport says a TLS
// handshake failed by its type, wire.HandshakeError: a plain HTTP server
// answering the handshake is tls, a server that closes the connection
// before answering it is connection_reset.
func TestHandshakeFailuresThroughWire(t *testing.T) {
	plain := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer plain.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	tr := wire.NewTransport()
	defer tr.CloseIdleConnections()
	for _, c := range []struct {
		name, addr string
		want       Class
	}{
		{"plain HTTP", plain.Listener.Addr().String(), ClassTLS},
		{"closed at once", ln.Addr().String(), ClassConnectionReset},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+c.addr+"/v1/models", nil)
		resp, err := tr.RoundTrip(req)
		if err == nil {
			resp.Body.Close()
			t.Errorf("%s: the handshake succeeded", c.name)
		} else if _, ok := errors.AsType[*wire.HandshakeError](err); !ok {
			t.Errorf("%s: %q (%T) is not a wire.HandshakeError", c.name, err, err)
		} else if got := ClassifyTransport(ctx, err); got != c.want {
			t.Errorf("%s: ClassifyTransport(%q) = %q, want %q", c.name, err, got, c.want)
		}
		cancel()
	}
}

// TestTransportClassOfAnEndedContext: the request's own deadline is a
// timeout and a cancellation an interruption, whatever the error says.
func TestTransportClassOfAnEndedContext(t *testing.T) {
	refused := &net.OpError{Op: "dial", Err: os.NewSyscallError("connect", refusedErrno)}
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	expired, cancel2 := context.WithDeadline(context.Background(), time.Unix(1, 0))
	defer cancel2()
	if got := ClassifyTransport(canceled, refused); got != ClassInterrupted {
		t.Errorf("canceled: class %q, want %q", got, ClassInterrupted)
	}
	if got := ClassifyTransport(expired, refused); got != ClassTimeout {
		t.Errorf("past its deadline: class %q, want %q", got, ClassTimeout)
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

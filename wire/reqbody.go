package wire

import (
	"bytes"
	"io"
	"net"
	"net/http"
)

// Body is a request body held in memory whole. The transport sends its
// bytes as they are, with the request's head in one write where the
// connection allows it: a long prompt's body is neither copied nor
// appended to the head as the request goes out, which on a busy client
// cost tens to hundreds of microseconds between a send's instant and its
// write. Anything else reads it as the bytes.Reader it is.
type Body struct {
	*bytes.Reader
	b []byte
}

// Close does nothing: the bytes stay the request's.
func (*Body) Close() error { return nil }

// SetBody makes b req's body, with its length and a way to make it again
// (GetBody), as http.NewRequest does for a bytes.Reader. b must not change
// while req may be sent.
func SetBody(req *http.Request, b []byte) {
	req.Body = &Body{Reader: bytes.NewReader(b), b: b}
	req.ContentLength = int64(len(b))
	req.GetBody = func() (io.ReadCloser, error) { return &Body{Reader: bytes.NewReader(b), b: b}, nil }
	if len(b) == 0 {
		req.Body, req.GetBody = http.NoBody, func() (io.ReadCloser, error) { return http.NoBody, nil }
	}
}

// whole is the body's bytes when none was read yet.
func (b *Body) whole() ([]byte, bool) {
	return b.b, b.Reader.Len() == len(b.b)
}

// tcpOf is the TCP connection under c, written to directly (a vectored
// write of the head and the body); nil over TLS.
func tcpOf(c net.Conn) *net.TCPConn {
	switch c := c.(type) {
	case *net.TCPConn:
		return c
	case interface{ tcp() *net.TCPConn }:
		return c.tcp()
	}
	return nil
}

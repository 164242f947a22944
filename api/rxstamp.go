package api

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"net/http/httptrace"
	"time"
)

// ReceiveStamper is a connection that knows when the kernel received the
// data it last read (see ReceiveTimestampDialer).
type ReceiveStamper interface {
	// LastReceived is the kernel's receive instant of the latest data read
	// from the connection, in unix nanoseconds; 0 if unknown.
	LastReceived() int64
}

// NewTransport is the HTTP transport tokbench bench measures with (and the
// bench/ harness measures tokbench with): connections stamp chunks with the
// kernel's receive instant (Linux; elsewhere the read instant), so a busy
// client does not add its own delay to TTFT and inter-token gaps; any
// number of connections per host stay open between requests; no response
// header timeout (a server may hold the first byte back for a long prefill);
// 2 KiB read and write buffers per connection instead of 4 KiB, since every
// stream holds them for its whole life: a request's headers and a token
// chunk's event are a few hundred bytes, a larger body is written past the
// buffer in one piece, and a larger chunk is read straight into the SSE
// decoder's buffer (which grows with a fast stream).
func NewTransport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.DialContext = ReceiveTimestampDialer(&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second})
	t.MaxIdleConns = 0
	t.MaxIdleConnsPerHost = 10000
	t.MaxConnsPerHost = 0
	t.ResponseHeaderTimeout = 0
	t.WriteBufferSize = 2 << 10
	t.ReadBufferSize = 2 << 10
	return t
}

// arrivalClock returns the stamp function for a stream read from conn: the
// kernel's receive instant of the data read last, on this process's
// monotonic clock, never before start nor after now. nil when conn keeps no
// receive stamps.
func arrivalClock(conn net.Conn, start time.Time) func() time.Time {
	if tc, ok := conn.(*tls.Conn); ok {
		conn = tc.NetConn()
	}
	rs, ok := conn.(ReceiveStamper)
	if !ok {
		return nil
	}
	return func() time.Time {
		now := time.Now()
		ns := rs.LastReceived()
		if ns == 0 {
			return now
		}
		// Realtime to monotonic: subtract how long ago it was.
		ago := time.Duration(now.UnixNano() - ns)
		if ago <= 0 {
			return now
		}
		at := now.Add(-ago)
		if at.Before(start) {
			return start
		}
		return at
	}
}

// traceConn records the connection a request got.
func traceConn(ctx context.Context, conn *net.Conn) context.Context {
	return httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		GotConn: func(info httptrace.GotConnInfo) { *conn = info.Conn },
	})
}

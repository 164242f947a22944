package api

import (
	"context"
	"crypto/tls"
	"net"
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

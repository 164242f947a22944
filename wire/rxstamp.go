package wire

import (
	"crypto/tls"
	"net"
	"time"
)

// ReceiveStamper is a connection that knows when the kernel received the
// data it last read (see ReceiveTimestampDialer).
type ReceiveStamper interface {
	// LastReceived is the kernel's receive instant of the latest data read
	// from the connection, in unix nanoseconds; 0 if unknown.
	LastReceived() int64
}

// Stamper finds the receive stamps of conn (or of the TCP connection under
// a TLS one); nil when it keeps none.
func Stamper(conn net.Conn) ReceiveStamper {
	if tc, ok := conn.(*tls.Conn); ok {
		conn = tc.NetConn()
	}
	rs, _ := conn.(ReceiveStamper)
	return rs
}

// ArrivalClock returns the stamp function for a stream read from conn: the
// kernel's receive instant of the data read last, on this process's
// monotonic clock. nil when conn keeps no receive stamps.
//
// The stamps of one clock never go backwards and never precede start: the
// kernel stamps on the realtime clock, and each conversion to the monotonic
// one (now minus how long ago) carries the few nanoseconds between reading
// the two clocks, and any slew the realtime clock takes meanwhile. Without
// the clamp two chunks read a moment apart could come out in the wrong
// order by a fraction of a microsecond: a negative gap.
func ArrivalClock(conn net.Conn, start time.Time) func() time.Time {
	rs := Stamper(conn)
	if rs == nil {
		return nil
	}
	last := start
	return func() time.Time {
		now := time.Now()
		at := now
		if ns := rs.LastReceived(); ns != 0 {
			// Realtime to monotonic: subtract how long ago it was.
			if ago := time.Duration(now.UnixNano() - ns); ago > 0 {
				at = now.Add(-ago)
			}
		}
		if at.Before(last) {
			at = last
		}
		last = at
		return at
	}
}

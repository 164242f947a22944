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
		at := StampTime(time.Now(), rs.LastReceived())
		if at.Before(last) {
			at = last
		}
		last = at
		return at
	}
}

// StampTime is a kernel receive stamp (unix ns, the realtime clock) as an
// instant on this process's monotonic clock, read at now: now less how
// long ago the stamp was. A stamp of 0 (none), or one not before now, is
// now.
func StampTime(now time.Time, ns int64) time.Time {
	if ns == 0 {
		return now
	}
	if ago := time.Duration(now.UnixNano() - ns); ago > 0 {
		return now.Add(-ago)
	}
	return now
}

// StampListener is ln with every connection it accepts keeping the
// kernel's receive stamps (StampConn, stamping kept on by KeepStamping):
// what a server that measures its requests' arrival listens on.
func StampListener(ln net.Listener) net.Listener {
	KeepStamping(ln)
	return stampListener{ln}
}

type stampListener struct{ net.Listener }

func (l stampListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return StampConn(c), nil
}

// Arrival is when the data last read from conn reached this machine: the
// kernel's receive stamp where conn keeps them (a request's head, read
// by the server before its handler runs), else now.
func Arrival(conn net.Conn, now time.Time) time.Time {
	if rs := Stamper(conn); rs != nil {
		return StampTime(now, rs.LastReceived())
	}
	return now
}

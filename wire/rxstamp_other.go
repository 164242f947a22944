//go:build !linux

package wire

import (
	"context"
	"net"
)

// ReceiveTimestampDialer is the plain dialer off Linux: streams are stamped
// at the instant they are read.
func ReceiveTimestampDialer(d *net.Dialer) func(ctx context.Context, network, addr string) (net.Conn, error) {
	if d == nil {
		d = &net.Dialer{}
	}
	return d.DialContext
}

// StampConn is c itself off Linux: no kernel receive stamps.
func StampConn(c net.Conn) net.Conn { return c }

// KeepStamping does nothing off Linux.
func KeepStamping(net.Listener) bool { return false }

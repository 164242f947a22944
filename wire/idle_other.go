//go:build !unix

package wire

import "net"

// peekIdle cannot look at a socket here: a stale connection shows when
// the request fails before any byte of its answer.
func peekIdle(net.Conn) idleState { return idleUnknown }

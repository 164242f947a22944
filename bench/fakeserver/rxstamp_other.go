//go:build !linux

package main

import "net"

// Off Linux the server keeps no kernel receive stamps: a request's arrival
// is the instant the server finished reading it.
func stamped(c net.Conn) net.Conn { return c }

func keepStamping(net.Listener) bool { return false }

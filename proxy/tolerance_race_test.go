//go:build race

package proxy

// ttftTolMs is wider under the race detector, which slows every
// goroutine of the process (the fake server's as much as the proxy's).
const ttftTolMs = 25

//go:build race

package proxy

// ttftTolMs is wider under the race detector, which slows every
// goroutine of the process (the fake server's as much as the proxy's).
const ttftTolMs = 25

// throughTolMs bounds how far bench's TTFT p50 through the proxy may be
// from the same bench direct (the race detector slows the proxy's decoding of each chunk).
const throughTolMs = 5

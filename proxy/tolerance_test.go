//go:build !race

package proxy

// ttftTolMs bounds a recorded upstream TTFT's distance from the fake
// server's own first flush when server, proxy and clients share one test
// process: the measurement's own error is what BenchmarkProxyStreams
// reports on a quiet machine.
const ttftTolMs = 2

// throughTolMs bounds how far bench's TTFT p50 through the proxy may be
// from the same bench direct (the bound).
const throughTolMs = 0.5

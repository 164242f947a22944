//go:build race

package benchmark

// traceTolMs is wider under the race detector, which slows the fake
// server's handlers as much as the sender.
const traceTolMs = 20

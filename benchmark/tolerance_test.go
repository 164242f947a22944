//go:build !race

package benchmark

// traceTolMs bounds a replayed trace's send instants' distance from the
// trace's, p99, against the fake server's arrival clock (the issue's
// bound).
const traceTolMs = 2

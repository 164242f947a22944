//go:build race

package sse

// raceBuild: the race detector makes sync.Pool drop what it is given at
// random, so what a pool saves cannot be counted in race builds.
const raceBuild = true

//go:build !unix

package benchmark

func openFileLimit() int { return 0 }

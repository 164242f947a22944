//go:build !race

package sse

const raceBuild = false

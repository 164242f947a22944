//go:build !race

package load

// The promise: TTFT within 2 ms and decode TPS within 2% of the truth.
const (
	ttftTolMs = 2
	tpsTolRel = 0.02
	raceBuild = false
)

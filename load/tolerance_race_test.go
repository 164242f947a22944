//go:build race

package load

// The race detector slows the client (and the in-process fake server) five
// to twenty times, so timing is held to looser bounds in race builds; .ci/run
// also runs this package without -race, where the strict bounds apply.
const (
	ttftTolMs = 25
	tpsTolRel = 0.15
	raceBuild = true
)

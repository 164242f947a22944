//go:build !unix

package machine

import "time"

// selfCPU is unknown here: the load of other processes is not measured.
func selfCPU() (time.Duration, bool) { return 0, false }

//go:build !linux

package load

import "time"

// processCPU is not measured off Linux; the self-check then reports no CPU use.
func processCPU() time.Duration { return 0 }

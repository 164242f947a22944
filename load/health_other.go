//go:build !linux

package load

import "time"

// preciseTimer is time.Sleep off Linux.
type preciseTimer struct{}

func newPreciseTimer() *preciseTimer          { return &preciseTimer{} }
func (p *preciseTimer) sleep(d time.Duration) { time.Sleep(d) }
func (p *preciseTimer) close()                {}

// processCPU is not measured off Linux; the self-check then reports no CPU use.
func processCPU() time.Duration { return 0 }

//go:build !linux

package pace

import "time"

// fdTimer is time.Sleep off Linux.
type fdTimer struct{}

func newFDTimer() fdTimer                             { return fdTimer{} }
func (p *fdTimer) sleep(d time.Duration, _ time.Time) { time.Sleep(d) }
func (p *fdTimer) close()                             {}

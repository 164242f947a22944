//go:build !linux

package awake

type process struct{}

// Start reports ErrUnsupported: only Linux has SCHED_IDLE.
func Start() (*Keeper, error) { return nil, ErrUnsupported }

// Stop does nothing (nothing was started).
func (k *Keeper) Stop() Usage { return Usage{} }

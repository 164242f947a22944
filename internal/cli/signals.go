package cli

import (
	"context"
	"fmt"
	"os"
	"sync"
	"time"
)

// sameSignal is how soon after a signal that took effect another counts
// as the same one.
const sameSignal = time.Second

// interrupts is the one rule of every command that runs (bench, proxy,
// serve) for SIGINT and SIGTERM:
//
//   - the first ends ctx: the command takes no new work and gives work in
//     flight its grace, then writes what it measured;
//   - signals within sameSignal of it are the same one: coreutils' timeout
//     signals tokbench and its process group at once, so a command under
//     it gets two TERMs;
//   - a later one ends hurry: the grace ends now, and what was measured
//     is still written before the command returns;
//   - signals within sameSignal of that are it too; past that the signals
//     are no longer caught, so one more ends the process as it ends any
//     program.
//
// Call stop when the command returns. Without env.Signals (tests) only
// the parent's end stops the command.
func (e Env) interrupts(parent context.Context) (ctx, hurry context.Context, stop func()) {
	ctx, cancel := context.WithCancel(parent)
	hurry, cancelHurry := context.WithCancel(context.WithoutCancel(parent))
	if e.Signals == nil {
		return ctx, hurry, func() { cancel(); cancelHurry() }
	}
	c := make(chan os.Signal, 8)
	var once sync.Once
	unsubscribe := e.Signals(c)
	release := func() { once.Do(unsubscribe) }
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		var last time.Time // the signal that took effect last
		var let *time.Timer
		for step := 0; ; {
			select {
			case <-done:
				if let != nil {
					let.Stop()
				}
				return
			case sig := <-c:
				if step > 0 && time.Since(last) < sameSignal {
					continue // the same signal, sent twice
				}
				last = time.Now()
				switch step {
				case 0:
					fmt.Fprintf(e.Stderr, "tokbench: %v: stopping; streams in flight may finish (a second signal, a second or more later, cuts them short)\n", sig)
					cancel()
				case 1:
					fmt.Fprintf(e.Stderr, "tokbench: %v again: cutting streams in flight short; writing what was measured\n", sig)
					cancelHurry()
					let = time.AfterFunc(sameSignal, release)
				}
				step++
			}
		}
	})
	return ctx, hurry, func() {
		close(done)
		wg.Wait()
		release()
		cancel()
		cancelHurry()
	}
}

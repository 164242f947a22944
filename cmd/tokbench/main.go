// Command tokbench measures how fast LLM endpoints stream and explains the
// numbers against the physics of inference. See the README.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/tokbench/tokbench/internal/cli"
)

func main() {
	code := cli.Run(context.Background(), os.Args[1:], cli.Env{
		Stdin:      os.Stdin,
		Stdout:     os.Stdout,
		Stderr:     os.Stderr,
		Getenv:     os.Getenv,
		IsTerminal: cli.TerminalCheck,
		// The commands that run catch SIGINT and SIGTERM while they run
		// (cli's interrupts says what each one does); the others end as
		// any program does.
		Signals: func(c chan<- os.Signal) func() {
			signal.Notify(c, os.Interrupt, syscall.SIGTERM)
			return func() { signal.Stop(c) }
		},
	})
	os.Exit(code)
}

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
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Run(ctx, os.Args[1:], cli.Env{
		Stdin:      os.Stdin,
		Stdout:     os.Stdout,
		Stderr:     os.Stderr,
		Getenv:     os.Getenv,
		IsTerminal: cli.TerminalCheck,
	})
	stop()
	os.Exit(code)
}

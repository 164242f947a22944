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
	// The first Ctrl-C lets streams in flight finish and writes what was
	// measured; a second one exits at once.
	go func() {
		<-ctx.Done()
		again := make(chan os.Signal, 1)
		signal.Notify(again, os.Interrupt, syscall.SIGTERM)
		<-again
		os.Exit(130)
	}()
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

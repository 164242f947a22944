// Package cli turns command lines into library calls. It is the only package
// that parses flags, reads the environment or writes to the terminal; every
// other package takes values and returns values.
//
// Exit codes, the same for every command: 0 success, 1 the run failed (no
// request completed, a gate tripped, a port in use, a file that could not
// be written), 2 bad input only (a flag, file or field, named in one
// line), 130 interrupted (everything measured is still written). exit.go
// holds the rule.
//
// Signals: the commands that run (bench, proxy, serve) stop at the first
// SIGINT or SIGTERM, count more within a second as the same one, and cut
// the grace of streams in flight short at a later one, still writing
// what was measured; the other commands end as any program does.
package cli

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"
)

// Env is the slice of the operating system the commands may touch, injected
// so that tests can fake all of it.
type Env struct {
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
	Getenv func(string) string
	// IsTerminal reports whether w is an interactive terminal; nil means never.
	IsTerminal func(w io.Writer) bool
	// Signals relays SIGINT and SIGTERM to c, as signal.Notify does, for
	// a command that runs (bench, proxy, serve; see interrupts), and
	// returns the function that stops it (signal.Stop). Nil: no signal
	// arrives, and the commands stop when Run's context ends.
	Signals func(c chan<- os.Signal) (stop func())
}

func (e Env) isTerminal(w io.Writer) bool {
	if e.IsTerminal == nil {
		return false
	}
	return e.IsTerminal(w)
}

// Run executes one tokbench command line and returns the process exit code.
func Run(ctx context.Context, args []string, env Env) int {
	if env.Getenv == nil {
		env.Getenv = func(string) string { return "" }
	}
	if env.Stdout == nil {
		env.Stdout = io.Discard
	}
	if env.Stderr == nil {
		env.Stderr = io.Discard
	}
	root := newRootCmd(env)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	return exitCode(env.Stderr, err)
}

// Version is the tool version, set at build time with -ldflags.
var Version = "0.1.0-dev"

func newRootCmd(env Env) *cobra.Command {
	root := &cobra.Command{
		Use:   "tokbench",
		Short: "Measure how fast LLM endpoints really stream, and why",
		Long: `tokbench measures time to first token and tokens per second of LLM
endpoints under realistic load, and explains the numbers against the physics
of inference. Without --url, bench runs against an embedded simulated server.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       Version,
	}
	root.Args = func(cmd *cobra.Command, args []string) error {
		if len(args) == 0 {
			return nil
		}
		msg := fmt.Sprintf("unknown command %q (tokbench --help lists them)", args[0])
		if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
			msg = fmt.Sprintf("unknown command %q; did you mean %q?", args[0], s[0])
		}
		return usagef("%s", msg)
	}
	root.RunE = func(cmd *cobra.Command, _ []string) error { return cmd.Help() }
	root.SuggestionsMinimumDistance = 2
	root.SetOut(env.Stdout)
	root.SetErr(env.Stderr)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		return usagef("%v", err)
	})
	root.AddCommand(
		newBenchCmd(env),
		newServeCmd(env),
		newCeilingCmd(env),
		newSimulateCmd(env),
		newMergeCmd(env),
		newCompareCmd(env),
		newAdviseCmd(env),
		newReportCmd(env),
		newImportVLLMCmd(env),
		newCalibrateCmd(env),
		newProxyCmd(env),
		newVersionCmd(env),
	)
	root.SetVersionTemplate(versionLine() + "\n")
	for _, c := range root.Commands() {
		c.SilenceUsage = true
		c.SilenceErrors = true
		if c.Name() != "bench" && c.Name() != "help" && c.Name() != "completion" {
			groupedHelp(c, nil) // flags wrapped at helpWidth, under "Flags"
		}
	}
	return root
}

// fileIsTerminal is the production terminal check: w is an *os.File on a
// terminal (os.Stdout, os.Stderr).
func fileIsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	return isTerminalFd(f.Fd())
}

package cli

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"

	"github.com/tokbench/tokbench/benchmark"
	"github.com/tokbench/tokbench/calibrate"
	"github.com/tokbench/tokbench/results"
)

// Exit codes, the same for every command.
const (
	ExitOK          = 0
	ExitFailure     = 1   // the run failed: nothing completed, a gate tripped, a listen or a write failed
	ExitUsage       = 2   // bad input: a flag, file or field, named in one line
	ExitInterrupted = 130 // Ctrl-C or TERM; what was measured is still written
)

// One rule decides a command's exit code, and Run applies it in one place
// (k6's errext): an error that carries a code (codedError) exits with it,
// the library's input errors (benchmark.InputError, calibrate.InputError)
// are bad input, and every other error is the run's failure. A command
// marks bad input where it judges it, with usagef; a failure of the
// machine (a port in use, a full disk) needs no mark.

// codedError is an error that carries the process's exit code.
type codedError struct {
	code int
	err  error // nil: exit with code, printing nothing
}

func (e *codedError) Error() string {
	if e.err == nil {
		return ""
	}
	return e.err.Error()
}

func (e *codedError) Unwrap() error { return e.err }

// usagef is a mistake in the user's input: one line naming the flag, file
// or field; exit code 2.
func usagef(format string, args ...any) error {
	return &codedError{code: ExitUsage, err: fmt.Errorf(format, args...)}
}

// withExitCode attaches code to err.
func withExitCode(code int, err error) error { return &codedError{code: code, err: err} }

// exitCode is the rule: it prints err in one line on stderr and returns
// the code the process exits with.
func exitCode(stderr io.Writer, err error) int {
	if err == nil {
		return ExitOK
	}
	code, msg := ExitFailure, err.Error()
	if ie, ok := errors.AsType[*benchmark.InputError](err); ok {
		// The library names the Plan field; the user gave a flag.
		msg = flagMessage(msg, ie)
	}
	if ce, ok := errors.AsType[*codedError](err); ok {
		code = ce.code
	} else if _, ok := errors.AsType[*benchmark.InputError](err); ok {
		code = ExitUsage
	} else if _, ok := errors.AsType[*calibrate.InputError](err); ok {
		code = ExitUsage
	}
	if msg != "" {
		fmt.Fprintf(stderr, "tokbench: %s\n", msg)
	}
	return code
}

// addrErr marks err as bad input when its cause is an address that cannot
// be one (no port, a port out of range, a host that does not resolve); a
// good address the machine refuses (in use, not permitted) stays the
// run's failure.
func addrErr(err error) error {
	_, bad := errors.AsType[*net.AddrError](err)
	if _, ok := errors.AsType[*net.DNSError](err); ok {
		bad = true
	}
	if _, ok := errors.AsType[*net.ParseError](err); ok {
		bad = true
	}
	if bad {
		return withExitCode(ExitUsage, err)
	}
	return err
}

// checkOut is the guard of --out, the run directory a command writes: a
// path that is (or lies under) a file is refused, and so is a directory
// that holds a run already, unless replace.
func checkOut(dir string, replace bool) error {
	for p := dir; ; p = filepath.Dir(p) {
		if fi, err := os.Stat(p); err == nil {
			if !fi.IsDir() {
				return usagef("--out: %s is a file, not a directory", p)
			}
			break
		}
		if filepath.Dir(p) == p {
			break
		}
	}
	if _, err := os.Stat(filepath.Join(dir, results.RunFile)); err == nil && !replace {
		return usagef("--out: %s holds a run already; give another directory, or --replace to write over it", dir)
	}
	return nil
}

// createOut passes --out's guard and opens the run directory for writing;
// a directory the machine cannot make is the run's failure.
func createOut(dir string, replace bool) (*results.Writer, error) {
	if err := checkOut(dir, replace); err != nil {
		return nil, err
	}
	w, err := results.Create(dir)
	if err != nil {
		return nil, fmt.Errorf("--out: %w", err)
	}
	return w, nil
}

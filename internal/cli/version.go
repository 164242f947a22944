package cli

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// versionLine is what `tokbench version` and `tokbench --version` print:
// the version, the Go toolchain and platform, and the commit when the
// build recorded one.
func versionLine() string {
	s := fmt.Sprintf("tokbench version %s (%s, %s/%s", Version, runtime.Version(), runtime.GOOS, runtime.GOARCH)
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, kv := range bi.Settings {
			if kv.Key == "vcs.revision" && len(kv.Value) >= 12 {
				s += ", commit " + kv.Value[:12]
			}
		}
	}
	return s + ")"
}

func newVersionCmd(env Env) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print tokbench's version",
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usagef("version: takes no arguments, got %q", args[0])
			}
			return nil
		},
		RunE: func(_ *cobra.Command, _ []string) error {
			_, err := fmt.Fprintln(env.Stdout, versionLine())
			return err
		},
	}
}

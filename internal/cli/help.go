package cli

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// helpWidth is the column flag help is wrapped at.
const helpWidth = 100

// flagGroup is a titled group of flags in a command's help.
type flagGroup struct {
	title string
	names []string
}

// groupedHelp makes cmd's help list its flags by group, wrapped at
// helpWidth columns, after the usage line and the examples; flags no group
// names are listed last, under "Other" (under "Flags" without groups).
func groupedHelp(cmd *cobra.Command, groups []flagGroup) {
	cmd.SetHelpFunc(func(c *cobra.Command, _ []string) {
		writeGroupedHelp(c.OutOrStdout(), c, groups)
	})
	cmd.SetUsageFunc(func(c *cobra.Command) error {
		writeGroupedHelp(c.OutOrStderr(), c, groups)
		return nil
	})
}

func writeGroupedHelp(w io.Writer, c *cobra.Command, groups []flagGroup) {
	if c.Long != "" {
		fmt.Fprintf(w, "%s\n\n", strings.TrimSpace(c.Long))
	}
	fmt.Fprintf(w, "Usage:\n  %s\n", c.UseLine())
	if c.Example != "" {
		fmt.Fprintf(w, "\nExamples:\n%s\n", c.Example)
	}
	listed := map[string]bool{}
	all := c.Flags()
	print := func(title string, names []string) {
		fs := pflag.NewFlagSet(title, pflag.ContinueOnError)
		for _, n := range names {
			if f := all.Lookup(n); f != nil && !listed[n] {
				fs.AddFlag(f)
				listed[n] = true
			}
		}
		if fs.HasFlags() {
			fmt.Fprintf(w, "\n%s:\n%s", title, fs.FlagUsagesWrapped(helpWidth))
		}
	}
	for _, g := range groups {
		print(g.title, g.names)
	}
	var rest []string
	all.VisitAll(func(f *pflag.Flag) {
		if !listed[f.Name] {
			rest = append(rest, f.Name)
		}
	})
	title := "Other"
	if len(groups) == 0 {
		title = "Flags"
	}
	print(title, rest)
}

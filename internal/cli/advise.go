package cli

import (
	"cmp"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/tokbench/tokbench/advise"
	"github.com/tokbench/tokbench/results"
)

func newAdviseCmd(env Env) *cobra.Command {
	var (
		format string
		names  []string
	)
	cmd := &cobra.Command{
		Use:   "advise RUN…",
		Short: "Which endpoint for which use: chat, code, voice, batch, agent",
		Long: `advise reads runs of several endpoints (their levels, and their cost
where the runs were given prices: --price-in/--price-out or
--gpu-hour-price) and answers, for each use-case profile of bench
--profile with its objectives, which endpoints meet it, up to which load,
at what cost per million output tokens, and which is the cheapest that
does, with the figures that decide it. Each endpoint's agent chain (the
agent profile's 5 calls of 600 tokens, one after another) is timed at its
speed. An endpoint is named by its run's --label, else its directory;
--name DIR=NAME names it here.`,
		Example: `  tokbench advise fast-run cheap-run
  tokbench advise runs/* --format markdown > advice.md`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) < 1 {
				return usagef("advise: want at least one run directory")
			}
			return nil
		},
		RunE: func(_ *cobra.Command, dirs []string) error {
			given := map[string]string{}
			for _, n := range names {
				dir, name, ok := strings.Cut(n, "=")
				if !ok || dir == "" || name == "" {
					return usagef("--name: want DIR=NAME, got %q", n)
				}
				given[filepath.Clean(dir)] = name
			}
			var eps []advise.Endpoint
			for _, dir := range dirs {
				s, err := results.ReadSummary(dir)
				if err != nil {
					return usagef("%s: %v", dir, err)
				}
				label := ""
				if run, err := results.ReadRun(dir); err == nil {
					label = run.Meta["label"]
				}
				eps = append(eps, advise.Endpoint{Name: cmp.Or(given[filepath.Clean(dir)], label, dir), Levels: s.Levels})
			}
			a, err := advise.Of(eps)
			if err != nil {
				return err
			}
			switch format {
			case "table":
				return advise.WriteText(env.Stdout, a)
			case "markdown":
				return advise.WriteMarkdown(env.Stdout, a)
			case "json":
				return advise.WriteJSON(env.Stdout, a)
			}
			return usagef("--format: unknown %q (known: table, markdown, json)", format)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&format, "format", "table", "output format: table, markdown, json")
	fl.StringArrayVar(&names, "name", nil, "DIR=NAME: call the endpoint of run DIR this (repeatable)")
	return cmd
}

package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/tokbench/tokbench/report"
	"github.com/tokbench/tokbench/results"
)

func newMergeCmd(env Env) *cobra.Command {
	var out, format string
	var partial bool
	cmd := &cobra.Command{
		Use:   "merge DIR DIR... --out DIR",
		Short: "Merge the run directories of shards (bench --shard I/N) into one run",
		Long: `merge combines shard runs into the run one client would have recorded:
per level, the union of all requests, offsets aligned by wall-clock start,
loads added up, and every statistic computed again from the union (never
averaged). Shards whose configuration differs in anything but the shard
index are refused, and so is a shard whose requests.jsonl holds fewer
requests than its summary.json counts (a cut or lost file), unless
--partial: then what it holds is merged and each level it is short in
says so in its warnings.`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) < 2 {
				return usagef("merge: give at least two run directories")
			}
			return nil
		},
		RunE: func(_ *cobra.Command, args []string) error {
			if out == "" {
				return usagef("--out: required: the directory for the merged run")
			}
			switch format {
			case "table", "json":
			default:
				return usagef("--format: unknown %q (known: table, json)", format)
			}
			m, err := results.Merge(args, results.MergeOptions{Partial: partial})
			if err != nil {
				return usagef("merge: %v", err)
			}
			for _, w := range m.Warnings {
				fmt.Fprintf(env.Stderr, "tokbench: warning: %s\n", w)
			}
			if err := results.WriteMerged(out, m); err != nil {
				return fmt.Errorf("--out: %w", err)
			}
			if err := report.WriteHTMLFile(out); err != nil {
				fmt.Fprintf(env.Stderr, "tokbench: %v\n", err)
			}
			fmt.Fprintf(env.Stderr, "tokbench: merged %d runs (%d requests) into %s\n", len(args), len(m.Records), out)
			if format == "json" {
				return report.JSON(env.Stdout, m.Summary)
			}
			return report.Table(env.Stdout, m.Summary)
		},
	}
	cmd.Flags().StringVar(&out, "out", "", "directory for the merged run")
	cmd.Flags().StringVar(&format, "format", "table", "stdout format: table, json")
	cmd.Flags().BoolVar(&partial, "partial", false, "merge a shard that holds fewer requests than its summary counts, and flag the levels it is short in")
	return cmd
}

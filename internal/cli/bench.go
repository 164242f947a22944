package cli

import (
	"errors"

	"github.com/spf13/cobra"
)

func newBenchCmd(env Env) *cobra.Command {
	return &cobra.Command{
		Use: "bench",
		RunE: func(*cobra.Command, []string) error {
			return errors.New("bench: not built yet")
		},
	}
}

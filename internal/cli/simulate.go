package cli

import (
	"errors"

	"github.com/spf13/cobra"
)

// newSimulateCmd is a placeholder until the command lands.
func newSimulateCmd(env Env) *cobra.Command {
	return &cobra.Command{
		Use:    "simulate",
		Hidden: true,
		RunE: func(*cobra.Command, []string) error {
			return errors.New("simulate: not built yet")
		},
	}
}

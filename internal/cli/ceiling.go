package cli

import (
	"errors"

	"github.com/spf13/cobra"
)

// newCeilingCmd is a placeholder until the command lands.
func newCeilingCmd(env Env) *cobra.Command {
	return &cobra.Command{
		Use:    "ceiling",
		Hidden: true,
		RunE: func(*cobra.Command, []string) error {
			return errors.New("ceiling: not built yet")
		},
	}
}

package cli

import (
	"errors"

	"github.com/spf13/cobra"
)

// newServeCmd is a placeholder until the command lands.
func newServeCmd(env Env) *cobra.Command {
	return &cobra.Command{
		Use:    "serve",
		Hidden: true,
		RunE: func(*cobra.Command, []string) error {
			return errors.New("serve: not built yet")
		},
	}
}

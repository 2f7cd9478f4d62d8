// Package sandbox is `rayito sandbox`: create, list, inspect, run commands
// in and kill sandboxes on the configured platform (the local one must be
// running: `rayito local up`). One file per verb.
package sandbox

import (
	"context"

	"github.com/urfave/cli/v3"

	"github.com/rayito-dev/rayito/cli/internal/cliutil"
	"github.com/rayito-dev/rayito/cli/internal/platform"
	rayito "github.com/rayito-dev/rayito/sdk"
)

// Command returns `rayito sandbox`.
func Command(io cliutil.IO) *cli.Command {
	return &cli.Command{
		Name:    "sandbox",
		Aliases: []string{"sbx"},
		Usage:   "manage sandboxes",
		Commands: []*cli.Command{
			createCommand(io),
			listCommand(io),
			infoCommand(io),
			execCommand(io),
			shellCommand(io),
			cpCommand(io),
			killCommand(io),
		},
	}
}

// options returns the SDK options of the configured platform.
func options(ctx context.Context, getenv func(string) string) ([]rayito.Option, error) {
	t, err := platform.Existing(ctx, getenv)
	if err != nil {
		return nil, err
	}
	return t.Options, nil
}

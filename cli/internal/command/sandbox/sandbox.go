// Package sandbox is `rayito sandbox`: create, list, inspect, run commands
// in, copy files to and from, read the logs and metrics of, pause, resume,
// move the deadline of and kill sandboxes on the configured platform (the
// local one must be running: `rayito local up`). One file per verb.
package sandbox

import (
	"context"
	"sort"

	"github.com/urfave/cli/v3"

	"github.com/rayito-dev/rayito/cli/internal/cliutil"
	"github.com/rayito-dev/rayito/cli/internal/platform"
	rayito "github.com/rayito-dev/rayito/sdk"
)

// Command returns `rayito sandbox`.
func Command(f *cliutil.Factory) *cli.Command {
	return &cli.Command{
		Name:    "sandbox",
		Aliases: []string{"sbx"},
		Usage:   "manage sandboxes",
		Description: "Wherever a command takes a sandbox ID, a unique prefix of one will do, as with docker:\n" +
			"microvm-3f2a, or 3f2a (the UUID's first digits). A prefix that names several sandboxes\n" +
			"is refused with a few of them named (exit 1).",
		Commands: []*cli.Command{
			createCommand(f),
			listCommand(f),
			infoCommand(f),
			execCommand(f),
			codeCommand(f),
			shellCommand(f),
			gitCommand(f),
			cpCommand(f),
			urlCommand(f),
			proxyCommand(f),
			logsCommand(f),
			metricsCommand(f),
			networkCommand(f),
			auditCommand(f),
			pauseCommand(f),
			resumeCommand(f),
			timeoutCommand(f),
			checkpointCommand(f),
			restoreCommand(f),
			reincarnateCommand(f),
			killCommand(f),
		},
	}
}

// options returns the SDK options of the configured platform.
func options(ctx context.Context, f *cliutil.Factory) ([]rayito.Option, error) {
	t, err := platform.Existing(ctx, f.Getenv)
	if err != nil {
		return nil, err
	}
	// The SDK keeps the access tokens (create stores, connect reads, kill
	// removes) in the store it shares with every SDK program of the user,
	// located from the CLI's environment.
	dir, err := rayito.TokenStoreDir(f.Getenv)
	if err != nil {
		return nil, err
	}
	return append(t.Options, rayito.WithTokenStoreDir(dir)), nil
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

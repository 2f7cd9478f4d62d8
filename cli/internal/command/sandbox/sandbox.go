// Package sandbox is `rayito sandbox`: create, list, inspect, run commands
// in, copy files to and from, read the logs of and kill sandboxes on the
// configured platform (the local one must be running: `rayito local up`).
// One file per verb.
package sandbox

import (
	"context"
	"errors"
	"slices"
	"sort"

	"github.com/urfave/cli/v3"

	"github.com/rayito-dev/rayito/cli/internal/cliutil"
	"github.com/rayito-dev/rayito/cli/internal/platform"
	rayito "github.com/rayito-dev/rayito/sdk"
	"github.com/rayito-dev/rayito/sdk/microvms"
)

// Command returns `rayito sandbox`.
func Command(f *cliutil.Factory) *cli.Command {
	return &cli.Command{
		Name:    "sandbox",
		Aliases: []string{"sbx"},
		Usage:   "manage sandboxes",
		Commands: []*cli.Command{
			createCommand(f),
			listCommand(f),
			infoCommand(f),
			execCommand(f),
			shellCommand(f),
			cpCommand(f),
			logsCommand(f),
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

// known reports whether err already says what happened to the sandbox (or
// to the command line), so that no existence check is needed.
func known(err error) bool {
	var (
		api   *microvms.APIError
		usage *cliutil.UsageError
	)
	var se *cliutil.SandboxError
	return errors.As(err, &api) || errors.As(err, &usage) || errors.As(err, &se) || errors.Is(err, rayito.ErrSandboxEnded) ||
		errors.Is(err, cliutil.ErrNoSandbox) || errors.Is(err, context.Canceled)
}

// state returns the state the platform lists sandbox id in, "" when it
// does not list it, and "?" when that cannot be told.
func state(ctx context.Context, f *cliutil.Factory, id string) string {
	if cliutil.CheckID(id) != nil {
		return ""
	}
	opts, err := options(ctx, f)
	if err != nil {
		return "?"
	}
	infos, err := rayito.List(ctx, opts...)
	if err != nil {
		return "?"
	}
	if i := slices.IndexFunc(infos, func(in rayito.Info) bool { return in.ID == id }); i >= 0 {
		return infos[i].State
	}
	return ""
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

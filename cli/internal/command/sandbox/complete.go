package sandbox

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/urfave/cli/v3"

	"github.com/rayito-dev/rayito/cli/internal/cliutil"
	"github.com/rayito-dev/rayito/proto/microvmsapi"
	rayito "github.com/rayito-dev/rayito/sdk"
)

// completeWithin bounds how long a completion waits for the platform: a
// shell waits for it at every Tab.
const completeWithin = 1500 * time.Millisecond

// liveStates are the states of sandboxes worth completing.
var liveStates = []string{
	string(microvmsapi.StatePending), string(microvmsapi.StateRunning),
	string(microvmsapi.StateSuspending), string(microvmsapi.StateSuspended),
}

// idArgs says which positional arguments of a command are sandbox ids.
type idArgs int

const (
	firstArg idArgs = iota // ID ...
	everyArg               // ID [ID...]
)

// completeIDs is the shell completion (urfave/cli's ShellComplete) of a
// command that takes sandbox ids: a flag's name when the word begins
// with '-', else the ids of the live sandboxes of the configured
// platform where an id goes ("ID:STATE" lines: the shells show the
// state beside the id), the subcommands of a command that has some after
// the id (`sandbox git ID VERB`). When no platform answers within
// completeWithin, or anything fails, it prints nothing, never an error.
func completeIDs(f *cliutil.Factory, which idArgs) cli.ShellCompleteFunc {
	return func(ctx context.Context, cmd *cli.Command) {
		args := cmd.Args().Slice()
		if n := len(args); n > 0 && strings.HasPrefix(args[n-1], "-") {
			cli.DefaultCompleteWithFlags(ctx, cmd)
			return
		}
		switch {
		case len(args) == 0 || which == everyArg:
		case len(args) == 1 && len(cmd.Commands) > 0:
			for _, sub := range cmd.VisibleCommands() {
				fmt.Fprintf(cmd.Root().Writer, "%s:%s\n", sub.Name, sub.Usage)
			}
			return
		default:
			return
		}
		ctx, cancel := context.WithTimeout(ctx, completeWithin)
		defer cancel()
		for _, s := range liveSandboxes(ctx, f) {
			if !slices.Contains(args, s.ID) {
				fmt.Fprintf(cmd.Root().Writer, "%s:%s\n", s.ID, s.State)
			}
		}
	}
}

// liveSandboxes lists the configured platform's sandboxes that have not
// ended, newest first; nil on any failure.
func liveSandboxes(ctx context.Context, f *cliutil.Factory) []rayito.Info {
	opts, err := options(ctx, f)
	if err != nil {
		return nil
	}
	infos, err := rayito.List(ctx, append(opts, rayito.WithStates(liveStates...))...)
	if err != nil {
		return nil
	}
	return infos
}

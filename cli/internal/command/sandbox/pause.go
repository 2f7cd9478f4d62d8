package sandbox

import (
	"context"
	"fmt"

	"github.com/urfave/cli/v3"

	"github.com/rayito-dev/rayito/cli/internal/cliutil"
	rayito "github.com/rayito-dev/rayito/sdk"
)

func pauseCommand(f *cliutil.Factory) *cli.Command {
	return &cli.Command{
		Name:  "pause",
		Usage: "pause (suspend) sandboxes, keeping their memory, processes and files",
		Description: "Waits until each sandbox is SUSPENDED; pausing a paused sandbox does nothing. A paused\n" +
			"sandbox costs no compute; its paused time counts towards its maximum lifetime. Commands,\n" +
			"shells and watches attached to it wait and carry on after `rayito sandbox resume`.\n" +
			"No access token is needed.",
		ArgsUsage:     "ID [ID...]",
		ShellComplete: completeIDs(f, everyArg),
		Flags:         []cli.Flag{cliutil.JSONFlag()},
		Action: func(ctx context.Context, cmd *cli.Command) error {
			return changeState(ctx, cmd, f, "paused", "SUSPENDED", rayito.Pause)
		},
	}
}

func resumeCommand(f *cliutil.Factory) *cli.Command {
	return &cli.Command{
		Name:  "resume",
		Usage: "resume paused sandboxes",
		Description: "Waits until each sandbox's daemon answers again; resuming a running sandbox only waits\n" +
			"for that. No access token is needed.",
		ArgsUsage:     "ID [ID...]",
		ShellComplete: completeIDs(f, everyArg),
		Flags:         []cli.Flag{cliutil.JSONFlag()},
		Action: func(ctx context.Context, cmd *cli.Command) error {
			return changeState(ctx, cmd, f, "resumed", "RUNNING", rayito.Resume)
		},
	}
}

// changeState runs do (rayito.Pause or rayito.Resume) on each id given,
// in order, and prints the ids (or {"<key>": [...], "state": ...} with
// --json). Every id (or unique prefix of one) is resolved before the
// first call.
func changeState(ctx context.Context, cmd *cli.Command, f *cliutil.Factory, key, state string,
	do func(context.Context, string, ...rayito.Option) error) error {
	ids := cmd.Args().Slice()
	if len(ids) == 0 {
		return cliutil.Usagef("missing the sandbox id")
	}
	// Every id or prefix is resolved before the first call.
	ids, err := resolveIDs(ctx, f, ids)
	if err != nil {
		return err
	}
	opts, err := options(ctx, f)
	if err != nil {
		return err
	}
	done := []string{}
	for _, id := range ids {
		if err := do(ctx, id, opts...); err != nil {
			return cliutil.OnSandbox(id, err)
		}
		done = append(done, id)
		if !cmd.Bool("json") {
			fmt.Fprintln(f.IO.Out, id)
		}
	}
	if cmd.Bool("json") {
		return cliutil.PrintJSON(f.IO.Out, map[string]any{key: done, "state": state})
	}
	return nil
}

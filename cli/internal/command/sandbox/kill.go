package sandbox

import (
	"context"
	"fmt"

	"github.com/urfave/cli/v3"

	"github.com/rayito-dev/rayito/cli/internal/cliutil"
	"github.com/rayito-dev/rayito/proto/microvmsapi"
	rayito "github.com/rayito-dev/rayito/sdk"
)

func killCommand(f *cliutil.Factory) *cli.Command {
	return &cli.Command{
		Name:          "kill",
		Usage:         "terminate sandboxes",
		ArgsUsage:     "ID [ID...] | --all",
		ShellComplete: completeIDs(f, everyArg),
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "all", Usage: "terminate every sandbox that has not ended"},
			cliutil.JSONFlag(),
		},
		Action: func(ctx context.Context, cmd *cli.Command) error {
			all := cmd.Bool("all")
			ids := cmd.Args().Slice()
			switch {
			case all && len(ids) > 0:
				return cliutil.Usagef("give sandbox ids or --all, not both")
			case !all && len(ids) == 0:
				return cliutil.Usagef("missing the sandbox id (or --all)")
			}
			// Every id or prefix is resolved before the first kill: an
			// ambiguous one kills nothing.
			if len(ids) > 0 {
				var err error
				if ids, err = resolveIDs(ctx, f, ids); err != nil {
					return err
				}
			}
			opts, err := options(ctx, f)
			if err != nil {
				return err
			}
			if all {
				infos, err := rayito.List(ctx, opts...)
				if err != nil {
					return err
				}
				for _, in := range infos {
					if in.State != string(microvmsapi.StateTerminated) && in.State != string(microvmsapi.StateTerminating) {
						ids = append(ids, in.ID)
					}
				}
			}
			killed := []string{}
			for _, id := range ids {
				if err := rayito.Kill(ctx, id, opts...); err != nil {
					return cliutil.OnSandbox(id, err)
				}
				killed = append(killed, id)
			}
			if cmd.Bool("json") {
				return cliutil.PrintJSON(f.IO.Out, map[string][]string{"killed": killed})
			}
			for _, id := range killed {
				fmt.Fprintln(f.IO.Out, id)
			}
			return nil
		},
	}
}

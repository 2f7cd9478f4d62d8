package sandbox

import (
	"context"
	"fmt"
	"os"

	"github.com/urfave/cli/v3"

	"github.com/rayito-dev/rayito/cli/internal/cliutil"
	rayito "github.com/rayito-dev/rayito/sdk"
)

func killCommand(io cliutil.IO) *cli.Command {
	return &cli.Command{
		Name:      "kill",
		Usage:     "terminate sandboxes",
		ArgsUsage: "ID [ID...]",
		Flags:     []cli.Flag{cliutil.JSONFlag},
		Action: func(ctx context.Context, cmd *cli.Command) error {
			if err := cliutil.CheckArgs(cmd, 1, "the sandbox id"); err != nil {
				return err
			}
			opts, err := options(ctx, os.Getenv)
			if err != nil {
				return err
			}
			store := cliutil.DefaultTokenStore(os.Getenv)
			killed := []string{}
			for _, id := range cmd.Args().Slice() {
				if err := rayito.Kill(ctx, id, opts...); err != nil {
					return fmt.Errorf("kill %s: %w", id, err)
				}
				store.Remove(id)
				killed = append(killed, id)
			}
			if cmd.Bool("json") {
				return cliutil.PrintJSON(io.Out, map[string][]string{"killed": killed})
			}
			for _, id := range killed {
				fmt.Fprintln(io.Out, id)
			}
			return nil
		},
	}
}

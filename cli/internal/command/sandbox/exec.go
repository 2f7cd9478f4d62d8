package sandbox

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/urfave/cli/v3"

	"github.com/rayito-dev/rayito/cli/internal/cliutil"
)

func execCommand(io cliutil.IO) *cli.Command {
	return &cli.Command{
		Name:         "exec",
		Usage:        "run a command in a sandbox and exit with its code",
		ArgsUsage:    "ID [--env K=V]... [--user U] [--cwd DIR] [--timeout D] -- CMD [ARGS...]",
		Flags:        append(cliutil.ExecFlags(), tokenFlag),
		StopOnNthArg: cliutil.IntPtr(2),
		Action: func(ctx context.Context, cmd *cli.Command) error {
			if err := cliutil.CheckArgs(cmd, 2, "the sandbox id and the command"); err != nil {
				return err
			}
			if _, err := cliutil.ParseEnvs(cmd.StringSlice("env")); err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
			defer stop()
			sbx, err := connect(ctx, cmd)
			if err != nil {
				return err
			}
			return cliutil.Exec(ctx, cmd, io, sbx, cmd.Args().Slice()[1:])
		},
	}
}

package sandbox

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/urfave/cli/v3"

	"github.com/rayito-dev/rayito/cli/internal/cliutil"
)

func execCommand(f *cliutil.Factory) *cli.Command {
	return &cli.Command{
		Name:  "exec",
		Usage: "run a command in a sandbox and exit with its code",
		Description: "stdin is passed to the command, and closed at its end, when it is not a terminal (or with -i).\n" +
			cliutil.ExitCodesHelp,
		ArgsUsage:     "ID [flags] -- CMD [ARGS...]",
		ShellComplete: completeIDs(f, firstArg),
		Flags:         append(cliutil.ExecFlags(), tokenFlag()),
		StopOnNthArg:  cliutil.IntPtr(2),
		Action: func(ctx context.Context, cmd *cli.Command) error {
			if err := cliutil.CheckArgs(cmd, 1, "the sandbox id"); err != nil {
				return err
			}
			if err := cliutil.CheckArgs(cmd, 2, "the command to run (after --)"); err != nil {
				return err
			}
			spec, err := cliutil.ParseExec(cmd, f.IO.In)
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
			defer stop()
			sbx, err := connect(ctx, cmd, f)
			if err != nil {
				return cliutil.Interrupted(ctx, err)
			}
			return cliutil.Exec(ctx, spec, f.IO, sbx, cmd.Args().Slice()[1:])
		},
	}
}

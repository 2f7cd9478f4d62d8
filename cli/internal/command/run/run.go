// Package run is `rayito run`: create a sandbox, run one command in it with
// its output streamed, exit with the command's code, and kill the sandbox
// (also on Ctrl-C).
package run

import (
	"context"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/urfave/cli/v3"

	"github.com/rayito-dev/rayito/cli/internal/cliutil"
	"github.com/rayito-dev/rayito/cli/internal/platform"
	rayito "github.com/rayito-dev/rayito/sdk"
)

// Command returns `rayito run`.
func Command(io cliutil.IO) *cli.Command {
	return &cli.Command{
		Name:      "run",
		Usage:     "run a command in a fresh sandbox and exit with its code",
		ArgsUsage: "[--timeout D] [--env K=V]... [--user U] [--cwd DIR] -- CMD [ARGS...]",
		Flags: append(cliutil.ExecFlags(),
			&cli.BoolFlag{Name: "no-internet", Usage: "give the sandbox no outbound internet access"}),
		StopOnNthArg: cliutil.IntPtr(1),
		Action: func(ctx context.Context, cmd *cli.Command) error {
			return runAction(ctx, cmd, io)
		},
	}
}

func runAction(ctx context.Context, cmd *cli.Command, io cliutil.IO) error {
	if err := cliutil.CheckArgs(cmd, 1, "the command to run (after --)"); err != nil {
		return err
	}
	if _, err := cliutil.ParseEnvs(cmd.StringSlice("env")); err != nil {
		return err
	}
	// Ctrl-C or SIGTERM cancels ctx; the sandbox is killed on every path.
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	target, err := platform.Ensure(ctx, os.Getenv, io.Err)
	if err != nil {
		return err
	}
	defer func() { _ = target.Close(context.Background()) }()

	// The sandbox outlives the command's own timeout by a minute.
	life := time.Hour
	if d := cmd.Duration("timeout"); d > 0 {
		life = d + time.Minute
	}
	opts := append([]rayito.Option{rayito.WithTimeout(life)}, target.Options...)
	if cmd.Bool("no-internet") {
		opts = append(opts, rayito.WithInternetAccess(false))
	}
	sbx, err := rayito.Create(ctx, opts...)
	if err != nil {
		return cliutil.Interrupted(ctx, err)
	}
	defer func() {
		kctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = sbx.Kill(kctx)
	}()
	return cliutil.Exec(ctx, cmd, io, sbx, cmd.Args().Slice())
}

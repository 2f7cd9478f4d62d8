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
func Command(f *cliutil.Factory) *cli.Command {
	return &cli.Command{
		Name:  "run",
		Usage: "run a command in a fresh sandbox and exit with its code",
		Description: "The sandbox lives as long as the command (at most the SDK's default lifetime, " + rayito.DefaultTimeout.String() + ",\n" +
			"or --timeout plus a minute) and is killed when it ends, also on Ctrl-C (exit 130).\n" +
			"stdin is passed to the command when it is not a terminal (or with -i).\n" +
			cliutil.ExitCodesHelp,
		ArgsUsage: "[flags] -- CMD [ARGS...]  |  --code CODE",
		Flags: append(append(append(append(cliutil.ExecFlags(), cliutil.NetworkFlags()...), cliutil.SecretFlags()...), cliutil.PlacementFlags()...),
			&cli.StringFlag{Name: "code", Usage: "run `CODE` in the sandbox's code interpreter (Python unless --language) instead of a command; - reads it from stdin; the value of its last expression is printed, images it shows are saved in the current directory"},
			&cli.StringFlag{Name: "language", Usage: "the `LANGUAGE` of --code (default python)"},
			&cli.BoolFlag{Name: "unisolated", Usage: "where the local platform this command starts cannot isolate sandboxes (not root, no unprivileged user namespaces), run the command anyway, NOT isolated (also " + platform.UnisolatedEnv + "=1) " + cliutil.LocalOnly}),
		StopOnNthArg: cliutil.IntPtr(1),
		Action: func(ctx context.Context, cmd *cli.Command) error {
			return runAction(ctx, cmd, f)
		},
	}
}

func runAction(ctx context.Context, cmd *cli.Command, f *cliutil.Factory) error {
	code, isCode := "", cmd.IsSet("code")
	switch {
	case isCode && cmd.Args().Len() > 0:
		return cliutil.Usagef("--code runs code, not a command: give one or the other")
	case isCode:
		var err error
		if code, err = cliutil.ReadCode(cmd.String("code"), f.IO.In); err != nil {
			return err
		}
	case cmd.IsSet("language"):
		return cliutil.Usagef("--language goes with --code")
	default:
		if err := cliutil.CheckArgs(cmd, 1, "the command to run (after --), or --code"); err != nil {
			return err
		}
	}
	spec, err := cliutil.ParseExec(cmd, f.IO.In)
	if err != nil {
		return err
	}
	if err := platform.Check(f.Getenv); err != nil {
		return err
	}
	// What the backend cannot honour is refused before anything starts.
	backend, _ := platform.Backend(f.Getenv) // Check accepted it
	if err := cliutil.CheckCreateOptions(cmd, backend, f.Getenv); err != nil {
		return err
	}
	// Ctrl-C or SIGTERM cancels ctx; the sandbox is killed on every path.
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	target, err := platform.Ensure(ctx, f.Getenv, f.IO.Err, cmd.Bool("unisolated"))
	if err != nil {
		return err
	}
	defer func() { _ = target.Close(context.Background()) }()

	// The sandbox outlives the command's own timeout by a minute. Without
	// --timeout it lives the SDK's default lifetime (a deadline only when
	// the user set a timeout: see rayito.WithTimeout).
	opts := append([]rayito.Option(nil), target.Options...)
	if spec.Timeout > 0 {
		opts = append(opts, rayito.WithTimeout(max(rayito.DefaultTimeout, spec.Timeout+time.Minute)))
	}
	opts = append(opts, cliutil.NetworkOptions(cmd)...)
	opts = append(opts, cliutil.PlacementOptions(cmd)...)
	secretOpts, err := cliutil.SecretOptions(cmd)
	if err != nil {
		return err
	}
	opts = append(opts, secretOpts...)
	sbx, err := rayito.Create(ctx, opts...)
	if err != nil {
		return cliutil.Interrupted(ctx, err)
	}
	defer func() {
		kctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = sbx.Kill(kctx)
	}()
	platform.WarnIfUnisolated(ctx, f.IO.Err, sbx)
	if isCode {
		return cliutil.RunCell(ctx, sbx, cliutil.CodeSpec{Language: cmd.String("language"), Timeout: spec.Timeout, Envs: spec.Envs, JSON: spec.JSON}, f.IO, code)
	}
	return cliutil.Exec(ctx, spec, f.IO, sbx, cmd.Args().Slice())
}

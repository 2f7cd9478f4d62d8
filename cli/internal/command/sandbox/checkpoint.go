package sandbox

import (
	"context"
	"fmt"
	"time"

	"github.com/urfave/cli/v3"

	"github.com/rayito-dev/rayito/cli/internal/cliutil"
	rayito "github.com/rayito-dev/rayito/sdk"
)

func checkpointCommand(f *cliutil.Factory) *cli.Command {
	return &cli.Command{
		Name:  "checkpoint",
		Usage: "archive a sandbox's HOME to its persistence place (S3) and print the archive's sha256",
		Description: "The sandbox's daemon writes s3://BUCKET/PREFIX/NAME/home.tar.gz, then manifest.json with its\n" +
			"sha256 (docs/persistence.md), with the execution role's credentials (locally, the platform's\n" +
			"own store). A sandbox created with --persist is bound to that place and refuses any other.\n" +
			"Caches (~/.cache, __pycache__) and kernels' runtime files are always left out; --exclude adds\n" +
			"patterns (a glob against the path under HOME when it has a '/', else against every name;\n" +
			"a trailing '/' for directories only).",
		ArgsUsage:     "ID",
		ShellComplete: completeIDs(f, firstArg),
		Flags: append(locationFlags("to"),
			&cli.StringSliceFlag{Name: "exclude", Usage: "leave out `PATTERN` (repeatable, at most 64)"},
			tokenFlag(),
			cliutil.JSONFlag()),
		Action: func(ctx context.Context, cmd *cli.Command) error {
			if err := cliutil.CheckArgs(cmd, 1, "the sandbox id"); err != nil {
				return err
			}
			if n := cmd.Args().Len(); n > 1 {
				return cliutil.Usagef("checkpoint takes one sandbox id, got %d arguments", n)
			}
			loc, err := location(cmd, "to")
			if err != nil {
				return err
			}
			sbx, err := connect(ctx, cmd, f)
			if err != nil {
				return err
			}
			prog, done := progress(cmd, f, "checkpoint")
			info, err := sbx.CheckpointWith(ctx, rayito.PersistRequest{Location: loc, Excludes: cmd.StringSlice("exclude"), Progress: prog})
			done()
			if err != nil {
				return cliutil.OnSandbox(sbx.ID(), err)
			}
			return printPersist(cmd, f, sbx.ID(), "checkpoint", info)
		},
	}
}

// printPersist prints a checkpoint's or restore's result: the sha256 on
// stdout and a summary on stderr, or --json.
func printPersist(cmd *cli.Command, f *cliutil.Factory, id, what string, info *rayito.CheckpointInfo) error {
	if cmd.Bool("json") {
		return cliutil.PrintJSON(f.IO.Out, persistOutOf(id, info))
	}
	fmt.Fprintln(f.IO.Out, info.SHA256)
	k := info.Skipped
	skipped := k.Special + k.HardLinks + k.Unreadable + k.OtherDevice + k.Conflicts + k.Other
	fmt.Fprintf(f.IO.Err, "%s %s: %d files, %d directories, %d links (%d bytes; archive %d bytes) in %s", what, info.Name,
		info.Files, info.Directories, info.Symlinks, info.ContentBytes, info.Bytes, info.Duration.Round(time.Millisecond))
	if skipped > 0 {
		fmt.Fprintf(f.IO.Err, "; %d entries left out (--json says which kinds)", skipped)
	}
	if k.ModesSanitized > 0 {
		fmt.Fprintf(f.IO.Err, "; setuid/setgid/sticky dropped on %d", k.ModesSanitized)
	}
	fmt.Fprintln(f.IO.Err)
	return nil
}

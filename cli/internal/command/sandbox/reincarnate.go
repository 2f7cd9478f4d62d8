package sandbox

import (
	"context"
	"fmt"

	"github.com/urfave/cli/v3"

	"github.com/rayito-dev/rayito/cli/internal/cliutil"
	"github.com/rayito-dev/rayito/cli/internal/platform"
	rayito "github.com/rayito-dev/rayito/sdk"
)

func reincarnateCommand(f *cliutil.Factory) *cli.Command {
	return &cli.Command{
		Name:  "reincarnate",
		Usage: "checkpoint a sandbox, create its successor from the checkpoint, kill it, and print the new id",
		Description: "The successor is created with the flags given here, as `rayito sandbox create` takes them\n" +
			"(--persist is required: the place the sandbox is bound to), so its HOME is the old one's;\n" +
			"processes, memory and files outside HOME do not carry over. If the checkpoint or the\n" +
			"creation fails, the old sandbox is left running.",
		ArgsUsage:     "ID",
		ShellComplete: completeIDs(f, firstArg),
		Flags: append(createFlags(),
			&cli.StringSliceFlag{Name: "exclude", Usage: "leave `PATTERN` of HOME out of the checkpoint (repeatable)"},
			tokenFlag(),
			cliutil.JSONFlag()),
		Action: func(ctx context.Context, cmd *cli.Command) error {
			if err := cliutil.CheckArgs(cmd, 1, "the sandbox id"); err != nil {
				return err
			}
			if n := cmd.Args().Len(); n > 1 {
				return cliutil.Usagef("reincarnate takes one sandbox id, got %d arguments", n)
			}
			if cmd.String("persist") == "" {
				return cliutil.Usagef("reincarnate needs --persist s3://BUCKET/PREFIX: the place the sandbox is bound to")
			}
			opts, err := createOptions(ctx, cmd, f)
			if err != nil {
				return err
			}
			p, _ := rayito.ParseS3Prefix(cmd.String("persist"))
			p.Name, p.Region = cmd.String("persist-name"), cmd.String("persist-region")
			old, err := connect(ctx, cmd, f)
			if err != nil {
				return err
			}
			prog, done := progress(cmd, f, "checkpoint")
			info, err := old.CheckpointWith(ctx, rayito.PersistRequest{Location: &p, Excludes: cmd.StringSlice("exclude"), Progress: prog})
			done()
			if err != nil {
				return cliutil.OnSandbox(old.ID(), err)
			}
			sbx, err := rayito.Create(ctx, opts...)
			if err != nil {
				return err
			}
			platform.WarnIfUnisolated(ctx, f.IO.Err, sbx)
			if err := old.Kill(ctx); err != nil {
				fmt.Fprintf(f.IO.Err, "rayito: reincarnated as %s, but %s was not killed: %s\n", sbx.ID(), old.ID(), cliutil.Describe(err))
			}
			if cmd.Bool("json") {
				return cliutil.PrintJSON(f.IO.Out, map[string]any{"id": sbx.ID(), "previous": old.ID(), "checkpoint": persistOutOf(old.ID(), info)})
			}
			fmt.Fprintln(f.IO.Out, sbx.ID())
			return nil
		},
	}
}

package sandbox

import (
	"context"

	"github.com/urfave/cli/v3"

	"github.com/rayito-dev/rayito/cli/internal/cliutil"
	rayito "github.com/rayito-dev/rayito/sdk"
)

func restoreCommand(f *cliutil.Factory) *cli.Command {
	return &cli.Command{
		Name:  "restore",
		Usage: "extract a checkpoint into a sandbox's HOME and print its sha256",
		Description: "The archive is downloaded and checked against its manifest's sha256 before anything is\n" +
			"written; only files, directories and links are made, as the sandbox's user, setuid bits\n" +
			"dropped; files of HOME the checkpoint does not hold are kept. No checkpoint: exit 1,\n" +
			"not found. A sandbox created with --persist restores its own checkpoint when it is created.",
		ArgsUsage:     "ID",
		ShellComplete: completeIDs(f, firstArg),
		Flags:         append(locationFlags("from"), tokenFlag(), cliutil.JSONFlag()),
		Action: func(ctx context.Context, cmd *cli.Command) error {
			if err := cliutil.CheckArgs(cmd, 1, "the sandbox id"); err != nil {
				return err
			}
			if n := cmd.Args().Len(); n > 1 {
				return cliutil.Usagef("restore takes one sandbox id, got %d arguments", n)
			}
			loc, err := location(cmd, "from")
			if err != nil {
				return err
			}
			sbx, err := connect(ctx, cmd, f)
			if err != nil {
				return err
			}
			prog, done := progress(cmd, f, "restore")
			info, err := sbx.RestoreWith(ctx, rayito.PersistRequest{Location: loc, Progress: prog})
			done()
			if err != nil {
				return cliutil.OnSandbox(sbx.ID(), err)
			}
			return printPersist(cmd, f, sbx.ID(), "restore", info)
		},
	}
}

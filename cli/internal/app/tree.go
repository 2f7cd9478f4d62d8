package app

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/urfave/cli/v3"

	"github.com/rayito-dev/rayito/cli/internal/cliutil"
)

// prepare gives every command of the tree the same usage-error handling:
// one short message and a hint (`see 'rayito sandbox list --help'`), exit
// code 2, never the help page. A command with subcommands and no action
// prints its help when called bare and refuses an unknown subcommand.
func prepare(cmd *cli.Command) {
	cmd.OnUsageError = onUsageError
	// Every command's own setting counts for its flags: a repeated flag
	// is one value per use, commas included (--env A=1,2; --gateway
	// name=x,upstream=...).
	cmd.DisableSliceFlagSeparator = true
	if len(cmd.Commands) > 0 {
		cmd.HideHelpCommand = true
		if cmd.Action == nil {
			cmd.Action = groupAction
		}
	}
	if act := cmd.Action; act != nil {
		cmd.Action = func(ctx context.Context, c *cli.Command) error {
			return attach(act(ctx, c), c)
		}
	}
	for _, sub := range cmd.Commands {
		prepare(sub)
	}
}

func onUsageError(_ context.Context, cmd *cli.Command, err error, _ bool) error {
	return &cliutil.UsageError{Err: cliutil.FlagError(cmd, err), Command: cmd.FullName()}
}

// attach names cmd in a usage error that does not name its command yet.
func attach(err error, cmd *cli.Command) error {
	var usage *cliutil.UsageError
	if errors.As(err, &usage) && usage.Command == "" {
		usage.Command = cmd.FullName()
	}
	return err
}

// groupAction runs for a command with subcommands when none matched.
func groupAction(ctx context.Context, cmd *cli.Command) error {
	first := cmd.Args().First()
	switch first {
	case "":
		return cli.ShowSubcommandHelp(cmd)
	case "help":
		return helpFor(ctx, cmd, append(cmd.Path()[1:], cmd.Args().Tail()...))
	}
	if strings.HasPrefix(first, "-") {
		return cliutil.Usagef("unknown flag %s", first)
	}
	return cliutil.UnknownCommand(cmd, first)
}

// configureCompletion makes urfave's `completion` command visible and
// gives it the tree's usage errors.
func configureCompletion(c *cli.Command) {
	c.Hidden = false
	c.Usage = "print a shell completion script (bash, zsh, fish, pwsh)"
	c.ArgsUsage = "SHELL"
	c.Action = func(_ context.Context, cmd *cli.Command) error {
		if cmd.Args().Present() {
			shell := cmd.Args().First()
			return fmt.Errorf("unknown shell %q (bash, zsh, fish, pwsh)%s", shell, cliutil.DidYouMean(shell, cliutil.CommandNames(cmd), cliutil.Quoted))
		}
		return errors.New("missing the shell (bash, zsh, fish, pwsh)")
	}
	prepare(c)
	// prepare wrapped the action; the errors above are usage errors.
	act := c.Action
	c.Action = func(ctx context.Context, cmd *cli.Command) error {
		if err := act(ctx, cmd); err != nil {
			return &cliutil.UsageError{Err: err, Command: cmd.FullName()}
		}
		return nil
	}
}

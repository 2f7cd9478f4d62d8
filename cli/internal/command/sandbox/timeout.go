package sandbox

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/urfave/cli/v3"

	"github.com/rayito-dev/rayito/cli/internal/cliutil"
	"github.com/rayito-dev/rayito/proto/microvmsapi"
	rayito "github.com/rayito-dev/rayito/sdk"
)

// lifecycleOut is a sandbox's deadline in --json output.
type lifecycleOut struct {
	ID         string     `json:"id,omitempty"`
	Phase      string     `json:"phase"`
	Deadline   *time.Time `json:"deadline,omitempty"`
	Cap        *time.Time `json:"cap,omitempty"`
	TimeoutMs  int64      `json:"timeout_ms,omitempty"`
	OnTimeout  string     `json:"on_timeout,omitempty"`
	AutoResume bool       `json:"auto_resume,omitempty"`
	Extensions int        `json:"extensions,omitempty"`
}

func lifecycleOutOf(id string, l *rayito.Lifecycle) *lifecycleOut {
	out := &lifecycleOut{ID: id, Phase: string(l.Phase), TimeoutMs: l.Timeout.Milliseconds(), OnTimeout: string(l.OnTimeout),
		AutoResume: l.AutoResume, Extensions: l.Extensions}
	if !l.Deadline.IsZero() {
		out.Deadline = &l.Deadline
	}
	if !l.Cap.IsZero() {
		out.Cap = &l.Cap
	}
	return out
}

func timeoutCommand(f *cliutil.Factory) *cli.Command {
	return &cli.Command{
		Name:  "timeout",
		Usage: "move a sandbox's deadline to DURATION from now and print it",
		Description: "Only a sandbox created with a deadline (create --timeout, --on-timeout or --max-lifetime) has one;\n" +
			"the deadline cannot pass the sandbox's maximum lifetime. --at-least keeps a later deadline.\n" +
			"An expired sandbox (past its deadline, paused or waiting) answers again once moved.",
		ArgsUsage:     "ID DURATION",
		ShellComplete: completeIDs(f, firstArg),
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "at-least", Usage: "only move the deadline later, never sooner"},
			tokenFlag(),
			cliutil.JSONFlag(),
		},
		Action: func(ctx context.Context, cmd *cli.Command) error {
			if err := cliutil.CheckArgs(cmd, 1, "the sandbox id"); err != nil {
				return err
			}
			if err := cliutil.CheckArgs(cmd, 2, "the new timeout (a duration like 10m)"); err != nil {
				return err
			}
			if n := cmd.Args().Len(); n > 2 {
				return cliutil.Usagef("timeout takes a sandbox id and a duration, got %d arguments", n)
			}
			arg := cmd.Args().Get(1)
			d, err := time.ParseDuration(arg)
			if err != nil {
				return cliutil.Usagef("%q is not a duration (like 90s, 5m, 1h30m)", arg)
			}
			if d < time.Second || d > microvmsapi.MaxDurationSeconds*time.Second {
				return cliutil.Usagef("the timeout must be between 1s and 8h, got %s", d)
			}
			sbx, err := connect(ctx, cmd, f)
			if err != nil {
				return err
			}
			var opts []rayito.SetTimeoutOption
			if cmd.Bool("at-least") {
				opts = append(opts, rayito.AtLeast())
			}
			l, err := sbx.SetTimeout(ctx, d, opts...)
			var ce *rayito.CapExceededError
			switch {
			case errors.As(err, &ce) && !ce.Cap.IsZero():
				return cliutil.OnSandbox(sbx.ID(), fmt.Errorf("%s from now is past its maximum lifetime: the latest deadline is %s (in %s)",
					d, ce.Cap.Local().Format(time.DateTime), time.Until(ce.Cap).Round(time.Second)))
			case errors.As(err, &ce):
				return cliutil.OnSandbox(sbx.ID(), fmt.Errorf("%s from now is past its maximum lifetime", d))
			case errors.Is(err, rayito.ErrLifecycleUnmanaged):
				return cliutil.OnSandbox(sbx.ID(), errors.New("it has no deadline to move: it was created without --timeout, --on-timeout or --max-lifetime"))
			case err != nil:
				return cliutil.OnSandbox(sbx.ID(), err)
			}
			if cmd.Bool("json") {
				return cliutil.PrintJSON(f.IO.Out, lifecycleOutOf(sbx.ID(), l))
			}
			fmt.Fprintln(f.IO.Out, deadlineLine(l))
			return nil
		},
	}
}

// deadlineLine words a deadline: "2026-01-02 15:04:05 (in 10m0s), then
// kill".
func deadlineLine(l *rayito.Lifecycle) string {
	if l.Deadline.IsZero() {
		return "none (" + string(l.Phase) + ")"
	}
	line := l.Deadline.Local().Format(time.DateTime)
	if left := time.Until(l.Deadline).Round(time.Second); left > 0 {
		line += " (in " + left.String() + ")"
	} else {
		line += " (passed)"
	}
	if l.OnTimeout != "" {
		line += ", then " + string(l.OnTimeout)
	}
	return line
}

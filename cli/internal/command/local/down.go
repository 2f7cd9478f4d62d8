package local

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"

	"github.com/urfave/cli/v3"

	"github.com/rayito-dev/rayito/cli/internal/cliutil"
	"github.com/rayito-dev/rayito/cli/internal/platform"
)

func downCommand(f *cliutil.Factory) *cli.Command {
	io := f.IO
	return &cli.Command{
		Name:  "down",
		Usage: "stop the background local platform and its sandboxes",
		Flags: []cli.Flag{stateDirFlag(), cliutil.JSONFlag()},
		Action: func(ctx context.Context, cmd *cli.Command) error {
			dir := stateDir(cmd)
			out := statusOut{Endpoint: platform.Endpoint(f.Getenv), StateDir: dir}
			pid := readPid(dir)
			if pid == 0 || syscall.Kill(pid, 0) != nil {
				_ = os.Remove(pidFile(dir))
				if platform.ProbeEndpoint(ctx, out.Endpoint).Mine {
					// Yours answers, but was not started with this state
					// directory: never say "not running" of it.
					return fmt.Errorf("your platform at %s was not started from %s (no pid file there): give `rayito local down` the --state-dir you gave `rayito local up`", out.Endpoint, dir)
				}
				return report(io, cmd, out, "not running")
			}
			out.Pid = pid
			if err := syscall.Kill(pid, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
				return fmt.Errorf("stop pid %d: %w", pid, err)
			}
			deadline := time.Now().Add(90 * time.Second)
			for syscall.Kill(pid, 0) == nil {
				if time.Now().After(deadline) {
					return fmt.Errorf("pid %d did not stop within 90s", pid)
				}
				time.Sleep(100 * time.Millisecond)
			}
			_ = os.Remove(pidFile(dir))
			return report(io, cmd, out, "stopped")
		},
	}
}

func statusCommand(f *cliutil.Factory) *cli.Command {
	io := f.IO
	return &cli.Command{
		Name:  "status",
		Usage: "say whether the local platform answers",
		Flags: []cli.Flag{stateDirFlag(), cliutil.JSONFlag()},
		Action: func(ctx context.Context, cmd *cli.Command) error {
			dir := stateDir(cmd)
			ep := platform.Endpoint(f.Getenv)
			probe := platform.ProbeEndpoint(ctx, ep)
			out := statusOut{Endpoint: ep, StateDir: dir, Running: probe.Mine}
			text := "not running at " + ep
			switch {
			case out.Running:
				text = "running at " + ep
				out.Pid = readPid(dir)
			case probe.OtherUser:
				// Another user's platform is not this user's: never report
				// it (or the pid file of a platform that is gone) as ours.
				text = "not running: " + probe.OtherUserText(ep)
				out.OtherUser, out.OwnerUID = true, probe.Owner
			}
			if err := report(io, cmd, out, text); err != nil {
				return err
			}
			if !out.Running {
				return &cliutil.ExitCodeError{Code: cliutil.ExitError}
			}
			return nil
		},
	}
}

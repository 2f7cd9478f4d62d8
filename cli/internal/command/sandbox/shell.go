package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/urfave/cli/v3"
	"golang.org/x/term"

	"github.com/rayito-dev/rayito/cli/internal/cliutil"
	rayito "github.com/rayito-dev/rayito/sdk"
)

// pipedShell is what `shell` runs when stdin is not a terminal: the
// user's login shell reading commands from the pipe, without a terminal,
// so that no prompt or terminal escape code reaches stdout.
var pipedShell = []string{"/bin/sh", "-c", `exec "${SHELL:-/bin/sh}" -l`}

func shellCommand(f *cliutil.Factory) *cli.Command {
	return &cli.Command{
		Name:  "shell",
		Usage: "open an interactive shell in a sandbox and exit with its code",
		Description: "On a terminal: a login shell on a remote terminal (raw mode, window size followed).\n" +
			"With stdin not a terminal: the login shell reads the commands from stdin, without a\n" +
			"terminal, so its output has no prompts or escape codes (-t forces a terminal).\n" +
			"Exits with the shell's code; 124 or 137 when the sandbox ended under it (as for exec).",
		ArgsUsage:     "ID",
		ShellComplete: completeIDs(f, firstArg),
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "user", Aliases: []string{"u"}, Usage: "run as this `USER`"},
			&cli.StringFlag{Name: "workdir", Aliases: []string{"w", "cwd"}, Usage: "working `DIR`ectory (relative to HOME)"},
			&cli.BoolFlag{Name: "tty", Aliases: []string{"t"}, Usage: "use a terminal even when stdin is not one"},
			tokenFlag(),
			&cli.BoolFlag{Name: "json", Usage: "print the exit code as JSON when the shell ends"},
		},
		Action: func(ctx context.Context, cmd *cli.Command) error {
			if err := cliutil.CheckArgs(cmd, 1, "the sandbox id"); err != nil {
				return err
			}
			sbx, err := connect(ctx, cmd, f)
			if err != nil {
				return err
			}
			if !cmd.Bool("tty") && !cliutil.IsTerminal(f.IO.In) {
				spec := cliutil.ExecSpec{User: cmd.String("user"), Workdir: cmd.String("workdir"), Stdin: true}
				err := cliutil.Exec(ctx, spec, f.IO, sbx, pipedShell)
				var exit *cliutil.ExitCodeError
				if cmd.Bool("json") && (err == nil || errors.As(err, &exit)) {
					code := 0
					if exit != nil {
						code = exit.Code
					}
					if perr := cliutil.PrintJSON(f.IO.Out, map[string]int{"exit_code": code}); perr != nil {
						return perr
					}
				}
				return err
			}
			return shell(ctx, cmd, f.IO, sbx)
		},
	}
}

// shell runs an interactive login shell: the local terminal in raw mode,
// keystrokes sent as they come, the window size followed on SIGWINCH.
func shell(ctx context.Context, cmd *cli.Command, io cliutil.IO, sbx *rayito.Sandbox) error {
	opts := []rayito.PtyOption{
		rayito.OnData(func(b []byte) { _, _ = io.Out.Write(b) }),
	}
	if u := cmd.String("user"); u != "" {
		opts = append(opts, rayito.WithUser(u))
	}
	if dir := cmd.String("workdir"); dir != "" {
		opts = append(opts, rayito.WithCwd(dir))
	}
	in, isFile := io.In.(*os.File)
	interactive := isFile && term.IsTerminal(int(in.Fd()))
	if interactive {
		if w, h, err := term.GetSize(int(in.Fd())); err == nil {
			opts = append(opts, rayito.WithSize(uint16(w), uint16(h)))
		}
	}
	h, err := sbx.Pty.Create(ctx, opts...)
	if err != nil {
		return cliutil.OnSandbox(sbx.ID(), err)
	}
	if interactive {
		old, err := term.MakeRaw(int(in.Fd()))
		if err != nil {
			_ = h.Kill(context.WithoutCancel(ctx))
			return fmt.Errorf("raw mode: %w", err)
		}
		defer func() { _ = term.Restore(int(in.Fd()), old) }()
		winch := make(chan os.Signal, 1)
		signal.Notify(winch, syscall.SIGWINCH)
		defer signal.Stop(winch)
		go func() {
			for range winch {
				if w, hh, err := term.GetSize(int(in.Fd())); err == nil {
					_ = h.Resize(context.WithoutCancel(ctx), uint16(w), uint16(hh))
				}
			}
		}()
	}
	// Keystrokes go to the shell until it ends; a closed stdin ends the
	// input with an EOT, like a terminal's Ctrl-D.
	go func() {
		buf := make([]byte, 32<<10)
		for {
			n, err := io.In.Read(buf)
			if n > 0 {
				if h.SendInput(context.WithoutCancel(ctx), append([]byte(nil), buf[:n]...)) != nil {
					return
				}
			}
			if err != nil {
				_ = h.SendInput(context.WithoutCancel(ctx), []byte{4})
				return
			}
		}
	}()
	code, err := h.Wait(ctx)
	if ended := cliutil.EndedUnder(ctx, sbx, code, "", err); ended != nil {
		return ended
	}
	if err != nil {
		return cliutil.OnSandbox(sbx.ID(), err)
	}
	if cmd.Bool("json") {
		if err := cliutil.PrintJSON(io.Out, map[string]int{"exit_code": code}); err != nil {
			return err
		}
	}
	if code != 0 {
		return &cliutil.ExitCodeError{Code: code}
	}
	return nil
}

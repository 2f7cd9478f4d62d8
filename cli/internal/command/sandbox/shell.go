package sandbox

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/urfave/cli/v3"
	"golang.org/x/term"

	"github.com/rayito-dev/rayito/cli/internal/cliutil"
	rayito "github.com/rayito-dev/rayito/sdk"
)

func shellCommand(io cliutil.IO) *cli.Command {
	return &cli.Command{
		Name:      "shell",
		Usage:     "open an interactive shell in a sandbox and exit with its code",
		ArgsUsage: "ID",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "user", Usage: "run as this user"},
			&cli.StringFlag{Name: "cwd", Usage: "working directory (relative to HOME)"},
			tokenFlag,
			&cli.BoolFlag{Name: "json", Usage: "print the exit code as JSON when the shell ends"},
		},
		Action: func(ctx context.Context, cmd *cli.Command) error {
			if err := cliutil.CheckArgs(cmd, 1, "the sandbox id"); err != nil {
				return err
			}
			sbx, err := connect(ctx, cmd)
			if err != nil {
				return err
			}
			return shell(ctx, cmd, io, sbx)
		},
	}
}

// shell runs an interactive login shell: the local terminal in raw mode,
// keystrokes sent as they come, the window size followed on SIGWINCH.
func shell(ctx context.Context, cmd *cli.Command, io cliutil.IO, sbx *rayito.Sandbox) error {
	opts := rayito.PtyOptions{
		User:   cmd.String("user"),
		Cwd:    cmd.String("cwd"),
		OnData: func(b []byte) { _, _ = io.Out.Write(b) },
	}
	in, isFile := io.In.(*os.File)
	interactive := isFile && term.IsTerminal(int(in.Fd()))
	if interactive {
		if w, h, err := term.GetSize(int(in.Fd())); err == nil {
			opts.Cols, opts.Rows = uint16(w), uint16(h)
		}
	}
	h, err := sbx.Pty.Create(ctx, opts)
	if err != nil {
		return err
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
	if err != nil {
		return err
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

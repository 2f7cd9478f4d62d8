package sandbox

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/urfave/cli/v3"

	"github.com/rayito-dev/rayito/cli/internal/cliutil"
	rayito "github.com/rayito-dev/rayito/sdk"
)

func codeCommand(f *cliutil.Factory) *cli.Command {
	return &cli.Command{
		Name:  "code",
		Usage: "run code in a sandbox's interpreter: a REPL on a terminal, the cells of stdin otherwise",
		Description: "Variables persist from one cell to the next (the sandbox's default context of the language).\n" +
			"On a terminal: type a cell; a cell whose first line ends with ':' or '\\', or that leaves a bracket open,\n" +
			"goes on until an empty line. The value of a cell's last expression is printed; images it shows are\n" +
			"saved in --image-dir (default: the current directory) and their paths printed. Ctrl-D ends.\n" +
			"Not on a terminal: stdin is one cell, or several separated by lines that hold only '%%'.\n" +
			"Exit codes: 0; 1 when the last cell raised; 124 when it ran past --timeout; 2 usage.",
		ArgsUsage:     "ID",
		ShellComplete: completeIDs(f, firstArg),
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "language", Usage: "the cells' `LANGUAGE` (default python)"},
			&cli.DurationFlag{Name: "timeout", Usage: "interrupt a cell after this `DURATION`"},
			&cli.StringFlag{Name: "image-dir", Usage: "`DIR`ectory for the images cells show"},
			cliutil.JSONFlag(), tokenFlag(),
		},
		Action: func(ctx context.Context, cmd *cli.Command) error {
			if err := cliutil.CheckArgs(cmd, 1, "the sandbox id"); err != nil {
				return err
			}
			if cmd.Args().Len() > 1 {
				return cliutil.Usagef("code takes one sandbox id; the code comes on stdin")
			}
			if d := cmd.Duration("timeout"); d < 0 || (cmd.IsSet("timeout") && d == 0) {
				return cliutil.Usagef("--timeout must be positive, got %s", d)
			}
			spec := cliutil.CodeSpec{Language: cmd.String("language"), Timeout: cmd.Duration("timeout"), ImageDir: cmd.String("image-dir"), JSON: cmd.Bool("json")}
			ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM)
			defer stop()
			sbx, err := connect(ctx, cmd, f)
			if err != nil {
				return cliutil.Interrupted(ctx, err)
			}
			if cliutil.IsTerminal(f.IO.In) {
				return repl(ctx, sbx, spec, f.IO)
			}
			cells, err := readCells(f.IO.In)
			if err != nil {
				return err
			}
			// Every cell runs, as in a notebook; the first that failed
			// (raised, timed out) gives the exit status. Any other error
			// (the sandbox went away) stops at once.
			var failed error
			for _, c := range cells {
				if err := cliutil.RunCell(ctx, sbx, spec, f.IO, c); err != nil {
					if !errors.As(err, new(*cliutil.ExitCodeError)) {
						return err
					}
					if failed == nil {
						failed = err
					}
				}
			}
			return failed
		},
	}
}

// readCells splits stdin into cells at lines that hold only "%%".
func readCells(r io.Reader) ([]string, error) {
	b, err := io.ReadAll(io.LimitReader(r, 16*rayito.MaxCodeBytes))
	if err != nil {
		return nil, err
	}
	var cells []string
	var cur []string
	for _, line := range strings.Split(string(b), "\n") {
		if strings.TrimSpace(line) == "%%" {
			cells = append(cells, strings.Join(cur, "\n"))
			cur = nil
			continue
		}
		cur = append(cur, line)
	}
	cells = append(cells, strings.Join(cur, "\n"))
	out := cells[:0]
	for _, c := range cells {
		if strings.TrimSpace(c) != "" {
			out = append(out, c)
		}
	}
	return out, nil
}

// repl reads cells from a terminal until EOF; Ctrl-C interrupts the cell
// that runs (the kernel stops it), not the REPL.
func repl(ctx context.Context, sbx *rayito.Sandbox, spec cliutil.CodeSpec, s cliutil.IO) error {
	in := bufio.NewScanner(s.In)
	in.Buffer(make([]byte, 64<<10), rayito.MaxCodeBytes)
	for {
		cell, ok := readCell(in, s.Err)
		if !ok {
			fmt.Fprintln(s.Err)
			return in.Err()
		}
		if strings.TrimSpace(cell) == "" {
			continue
		}
		cctx, stop := signal.NotifyContext(ctx, os.Interrupt)
		err := cliutil.RunCell(cctx, sbx, spec, s, cell)
		interrupted := cctx.Err() != nil && ctx.Err() == nil
		stop()
		switch {
		case interrupted:
			fmt.Fprintln(s.Err, "KeyboardInterrupt")
		case err != nil:
			if !errors.As(err, new(*cliutil.ExitCodeError)) {
				return err
			}
		}
	}
}

// readCell reads one cell: a line, or a block until an empty line when the
// first line opens one (ends with ':' or '\', or leaves brackets open).
func readCell(in *bufio.Scanner, prompt io.Writer) (string, bool) {
	fmt.Fprint(prompt, ">>> ")
	if !in.Scan() {
		return "", false
	}
	first := in.Text()
	if !opensBlock(first) {
		return first, true
	}
	lines := []string{first}
	for {
		fmt.Fprint(prompt, "... ")
		if !in.Scan() {
			return strings.Join(lines, "\n"), true
		}
		line := in.Text()
		if strings.TrimSpace(line) == "" {
			return strings.Join(lines, "\n"), true
		}
		lines = append(lines, line)
	}
}

func opensBlock(line string) bool {
	t := strings.TrimRight(line, " \t")
	if strings.HasSuffix(t, ":") || strings.HasSuffix(t, "\\") {
		return true
	}
	depth := 0
	for _, r := range t {
		switch r {
		case '(', '[', '{':
			depth++
		case ')', ']', '}':
			depth--
		}
	}
	return depth > 0
}

// Package dashboard is `rayito dashboard`: the local management
// dashboard (dashboard/local) on 127.0.0.1, with the platform the CLI's
// other commands use. It prints a one-time URL and serves until Ctrl-C.
package dashboard

import (
	"context"
	"errors"
	"fmt"
	"html"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/urfave/cli/v3"

	"github.com/rayito-dev/rayito/cli/internal/cliutil"
	"github.com/rayito-dev/rayito/cli/internal/platform"
	"github.com/rayito-dev/rayito/dashboard/local"
	"github.com/rayito-dev/rayito/localvm"
	rayito "github.com/rayito-dev/rayito/sdk"
)

// Command is `rayito dashboard`.
func Command(f *cliutil.Factory) *cli.Command {
	return &cli.Command{
		Name:  "dashboard",
		Usage: "serve a local web page of your sandboxes (state, metrics, logs, events, cost)",
		Description: "Serves a page and a JSON API on 127.0.0.1 with your platform (local, or AWS with\n" +
			"RAYITO_BACKEND=aws) and prints a one-time URL: its token works once, for 5 minutes, and\n" +
			"becomes a cookie of that browser. Read-only unless --allow-actions (kill, pause, resume,\n" +
			"set timeout, each confirmed); --account accounts are always read-only. Ctrl-C stops it.\n" +
			"docs/dashboard.md has the rules.",
		Flags: []cli.Flag{
			&cli.IntFlag{Name: "port", Usage: "the `PORT` on 127.0.0.1 (default: a free one)", HideDefault: true},
			&cli.BoolFlag{Name: "allow-actions", Usage: "allow kill, pause, resume and set timeout"},
			&cli.BoolFlag{Name: "cost-explorer", Usage: "show your AWS bill too (Cost Explorer, USD 0.01 a query; at most 20 a day)"},
			&cli.StringFlag{Name: "theme", Usage: "a theme `FILE` (JSON: title, font, colors)"},
			&cli.StringFlag{Name: "logo", Usage: "a logo `FILE` (SVG, at most 64 KiB, no script or links)"},
			&cli.StringSliceFlag{Name: "account", Usage: "also read another AWS `ACCOUNT`, LABEL=ROLE_ARN[,EXTERNAL_ID], through its read role"},
			&cli.BoolFlag{Name: "no-open", Usage: "do not open a browser"},
			&cli.BoolFlag{Name: "json", Usage: "print the URL as a JSON object"},
		},
		Action: func(ctx context.Context, cmd *cli.Command) error {
			if cmd.Args().Present() {
				return cliutil.Usagef("dashboard takes no arguments")
			}
			port := cmd.Int("port")
			if port < 0 || port > 65535 {
				return cliutil.Usagef("--port must be 0 to 65535")
			}
			accounts, err := parseAccounts(cmd.StringSlice("account"))
			if err != nil {
				return err
			}
			// Theme and logo before anything else: a bad one is exit 2.
			if _, _, err := local.LoadTheme(cmd.String("theme"), cmd.String("logo")); err != nil {
				return cliutil.Usage(err)
			}
			b, err := platform.Backend(f.Getenv)
			if err != nil {
				return err
			}
			if len(accounts) > 0 && b != rayito.BackendAWS {
				return cliutil.Usagef("--account reads other AWS accounts: it needs RAYITO_BACKEND=aws")
			}
			if cmd.Bool("cost-explorer") && b != rayito.BackendAWS {
				return cliutil.Usagef("--cost-explorer reads your AWS bill: it needs RAYITO_BACKEND=aws")
			}
			t, err := platform.Existing(ctx, f.Getenv)
			if err != nil {
				return err
			}
			opts := local.Options{
				Port: port, SDK: t.Options, Backend: string(b),
				AllowActions: cmd.Bool("allow-actions"), CostExplorer: cmd.Bool("cost-explorer"),
				ThemeFile: cmd.String("theme"), LogoFile: cmd.String("logo"), Accounts: accounts,
			}
			if b == rayito.BackendLocal {
				dir := localvm.DefaultStateDir()
				opts.LogFile = func(id string) string { return localvm.LogPath(dir, id) }
			}
			srv, err := local.New(opts)
			switch {
			case errors.Is(err, local.ErrInvalidOption), errors.Is(err, local.ErrInvalidTheme):
				return cliutil.Usage(err)
			case err != nil:
				return err
			}
			mode := "read-only"
			if opts.AllowActions {
				mode = "actions allowed"
			}
			if cmd.Bool("json") {
				if err := cliutil.PrintJSON(f.IO.Out, map[string]any{"url": srv.URL(), "port": srv.Port(), "cookie": srv.CookieName(), "actions": opts.AllowActions, "backend": opts.Backend}); err != nil {
					return err
				}
			} else {
				fmt.Fprintln(f.IO.Out, srv.URL())
			}
			fmt.Fprintf(f.IO.Err, "rayito: dashboard on http://127.0.0.1:%d (%s); the URL works once, for 5 minutes; Ctrl-C stops it\n", srv.Port(), mode)
			ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
			defer stop()
			if !cmd.Bool("no-open") && !cmd.Bool("json") {
				openBrowser(ctx, f, srv.URL())
			}
			return srv.Serve(ctx)
		},
	}
}

// parseAccounts reads --account LABEL=ROLE_ARN[,EXTERNAL_ID].
func parseAccounts(values []string) ([]local.Account, error) {
	var out []local.Account
	for _, v := range values {
		label, rest, ok := strings.Cut(v, "=")
		arn, ext, _ := strings.Cut(rest, ",")
		if !ok || label == "" || arn == "" {
			return nil, cliutil.Usagef("--account is LABEL=ROLE_ARN[,EXTERNAL_ID] (a role arn:aws:iam::ACCOUNT:role/NAME)")
		}
		out = append(out, local.Account{Label: label, RoleARN: arn, ExternalID: ext})
	}
	return out, nil
}

// openBrowser starts xdg-open on a desktop session; elsewhere it does
// nothing (the URL is printed). The URL does not go on xdg-open's command
// line, which other users can read in /proc: xdg-open gets a file of this
// user's (0600) that redirects to it, removed once the browser had time
// to read it, or when the dashboard stops.
func openBrowser(ctx context.Context, f *cliutil.Factory, url string) {
	if f.Getenv("DISPLAY") == "" && f.Getenv("WAYLAND_DISPLAY") == "" {
		return
	}
	path, err := exec.LookPath("xdg-open")
	if err != nil {
		return
	}
	fh, err := os.CreateTemp("", "rayito-dashboard-*.html")
	if err != nil {
		return
	}
	_, werr := fmt.Fprintf(fh, "<!doctype html><meta http-equiv=\"refresh\" content=\"0;url=%s\"><title>rayito dashboard</title>\n", html.EscapeString(url))
	if cerr := fh.Close(); werr != nil || cerr != nil {
		os.Remove(fh.Name())
		return
	}
	c := exec.Command(path, fh.Name())
	if c.Start() != nil {
		os.Remove(fh.Name())
		return
	}
	go func() { _ = c.Wait() }()
	go func() {
		select {
		case <-ctx.Done():
		case <-time.After(time.Minute):
		}
		os.Remove(fh.Name())
	}()
}

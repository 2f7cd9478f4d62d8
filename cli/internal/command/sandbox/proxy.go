package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/urfave/cli/v3"

	"github.com/rayito-dev/rayito/cli/internal/cliutil"
	"github.com/rayito-dev/rayito/dashboard/proxy"
	rayito "github.com/rayito-dev/rayito/sdk"
)

// proxyEndCheck is how often `proxy` asks whether its sandbox ended.
var proxyEndCheck = 5 * time.Second

type proxyOut struct {
	URL      string `json:"url"`
	LocalURL string `json:"local_url"`
	Port     int    `json:"port"`
	Sandbox  int    `json:"sandbox_port"`
}

func proxyCommand(f *cliutil.Factory) *cli.Command {
	return &cli.Command{
		Name:  "proxy",
		Usage: "serve one port of a sandbox on localhost, for your browser or tools",
		Description: "Forwards http://<id>.localhost:P/ (its own cookie jar: open that one) and\n" +
			"http://127.0.0.1:P/ to port N of the sandbox, with a token for that port only\n" +
			"(never 9000). One request per connection; a foreign Host is 421, a foreign Origin 403,\n" +
			"more than --max-connections 503; WebSocket upgrades pass when the sandbox accepts them.\n" +
			"Anything that reaches the local port uses the sandbox as you: see docs/proxy.md.\n" +
			"Runs until Ctrl-C (exit 0) or until the sandbox ends (exit 1).",
		ArgsUsage:     "ID",
		ShellComplete: completeIDs(f, firstArg),
		Flags: []cli.Flag{
			&cli.IntFlag{Name: "port", Aliases: []string{"p"}, Usage: "the sandbox's `PORT` (1-65535, not 9000)"},
			&cli.IntFlag{Name: "listen-port", Usage: "the local `PORT` (default: a free one)", HideDefault: true},
			&cli.StringFlag{Name: "bind", Value: "127.0.0.1", Usage: "the local `ADDR`ess; outside loopback needs --allow-remote"},
			&cli.BoolFlag{Name: "allow-remote", Usage: "allow a --bind outside loopback (other machines reach the sandbox as you)"},
			&cli.StringSliceFlag{Name: "allowed-host", Usage: "also accept this Host `NAME` (with the local port)"},
			&cli.StringSliceFlag{Name: "allow-origin", Usage: "also accept this `ORIGIN` (scheme://host[:port])"},
			&cli.IntFlag{Name: "max-connections", Value: 8, Usage: "connections at a time, then 503 (`N`)"},
			tokenFlag(),
			cliutil.JSONFlag(),
		},
		Action: func(ctx context.Context, cmd *cli.Command) error {
			if err := cliutil.CheckArgs(cmd, 1, "the sandbox id"); err != nil {
				return err
			}
			if n := cmd.Args().Len(); n > 1 {
				return cliutil.Usagef("want one sandbox ID, got %d arguments", n)
			}
			if !cmd.IsSet("port") {
				return cliutil.Usagef("--port is required: the sandbox's port to serve")
			}
			if err := proxy.CheckPort(int(cmd.Int("port"))); err != nil {
				return cliutil.Usagef("--port: %s", portWords(err))
			}
			if p := cmd.Int("listen-port"); p < 0 || p > 65535 {
				return cliutil.Usagef("--listen-port must be between 1 and 65535 (0: a free one)")
			}
			if n := cmd.Int("max-connections"); n < 1 || n > 1024 {
				return cliutil.Usagef("--max-connections must be between 1 and 1024")
			}
			bind := cmd.String("bind")
			if !proxy.IsLoopback(bind) {
				if !cmd.Bool("allow-remote") {
					return cliutil.Usagef("--bind %s is not a loopback address: add --allow-remote to serve the sandbox beyond this machine", bind)
				}
			}
			sbx, err := connect(ctx, cmd, f)
			if err != nil {
				return err
			}
			port, err := sbx.Port(int(cmd.Int("port")))
			if err != nil {
				return cliutil.OnSandbox(sbx.ID(), err)
			}
			srv, err := proxy.New(port, proxy.Options{
				SandboxID: sbx.ID(), ListenPort: int(cmd.Int("listen-port")), Bind: bind,
				AllowRemote: cmd.Bool("allow-remote"), AllowedHosts: cmd.StringSlice("allowed-host"),
				AllowOrigins: cmd.StringSlice("allow-origin"), MaxConnections: int(cmd.Int("max-connections")),
			})
			switch {
			case errors.Is(err, proxy.ErrInvalid) || errors.Is(err, proxy.ErrRemote) || errors.Is(err, proxy.ErrPort):
				return cliutil.Usage(err)
			case err != nil:
				return fmt.Errorf("listen: %w", err)
			}
			defer srv.Close()
			if !proxy.IsLoopback(bind) {
				fmt.Fprintf(f.IO.Err, "rayito: warning: serving on %s: whoever reaches it uses sandbox %s as you\n", bind, sbx.ID())
			}
			urls := srv.URLs()
			out := proxyOut{URL: urls[0], LocalURL: urls[len(urls)-1], Port: srv.Port(), Sandbox: port.Number()}
			if cmd.Bool("json") {
				if err := cliutil.PrintJSON(f.IO.Out, out); err != nil {
					return err
				}
			} else {
				fmt.Fprintln(f.IO.Out, out.URL)
				fmt.Fprintln(f.IO.Out, out.LocalURL)
				fmt.Fprintf(f.IO.Err, "rayito: serving port %d of sandbox %s; open the first URL (its own cookies); Ctrl-C stops\n", port.Number(), sbx.ID())
			}
			ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
			defer stop()
			ctx, cancel := context.WithCancelCause(ctx)
			defer cancel(nil)
			go watchEnd(ctx, sbx, cancel)
			if err := srv.Serve(ctx); err != nil {
				return err
			}
			st := srv.Stats()
			fmt.Fprintf(f.IO.Err, "rayito: proxy stopped: %d connections, %d requests forwarded, %d refused for --max-connections\n",
				st.Connections, st.Forwarded, st.Busy)
			var ended *rayito.SandboxEndedError
			if cause := context.Cause(ctx); errors.As(cause, &ended) {
				// Exit 1 whatever the reason (a timeout too): the proxy
				// itself did not time out.
				return cli.Exit(cliutil.DescribeEnd(ended), cliutil.ExitError)
			}
			return nil
		},
	}
}

// portWords is CheckPort's refusal without the package prefix.
func portWords(err error) string {
	return strings.TrimPrefix(err.Error(), "proxy: port refused: ")
}

// watchEnd cancels ctx with a *rayito.SandboxEndedError once the
// sandbox has ended or its local platform no longer answers.
func watchEnd(ctx context.Context, sbx *rayito.Sandbox, cancel context.CancelCauseFunc) {
	t := time.NewTicker(proxyEndCheck)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		info, err := sbx.Info(ctx)
		var ended *rayito.SandboxEndedError
		switch {
		case errors.As(err, &ended):
			cancel(ended)
			return
		case errors.Is(err, rayito.ErrPlatformUnavailable):
			// The local platform is gone (`rayito local down` ends its
			// sandboxes): nothing can reach this one any more.
			cancel(&rayito.SandboxEndedError{ID: sbx.ID(), Reason: rayito.EndUnknown, Detail: "its platform stopped answering"})
			return
		case err == nil && info.State == "TERMINATED":
			cancel(&rayito.SandboxEndedError{ID: sbx.ID(), Reason: info.EndReason, Detail: info.EndDetail})
			return
		}
	}
}

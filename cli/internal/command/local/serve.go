package local

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/urfave/cli/v3"

	"github.com/rayito-dev/rayito/cli/internal/cliutil"
	"github.com/rayito-dev/rayito/localvm"
)

// awsQuotasFlag throttles the platform's API at the AWS service's quotas
// instead of ten times them.
var awsQuotasFlag = &cli.BoolFlag{Name: "aws-quotas", Usage: "throttle the API at the AWS quotas (RunMicrovm 5/s, ...) instead of 10x them, to try a client against the service's limits"}

func serveCommand(io cliutil.IO) *cli.Command {
	return &cli.Command{
		Name:  "serve",
		Usage: "run the local platform in the foreground (Ctrl-C stops it and its sandboxes)",
		Flags: []cli.Flag{
			stateDirFlag,
			awsQuotasFlag,
			&cli.BoolFlag{Name: "keep-sandboxes", Usage: "leave sandboxes running on exit (a restarted platform re-adopts them)"},
			&cli.BoolFlag{Name: "debug", Usage: "log at debug level"},
			cliutil.JSONFlag,
		},
		Action: func(ctx context.Context, cmd *cli.Command) error {
			addr, err := listenAddr()
			if err != nil {
				return cliutil.Usage(err)
			}
			level := slog.LevelInfo
			if cmd.Bool("debug") {
				level = slog.LevelDebug
			}
			var h slog.Handler = slog.NewTextHandler(io.Err, &slog.HandlerOptions{Level: level})
			if cmd.Bool("json") {
				h = slog.NewJSONHandler(io.Err, &slog.HandlerOptions{Level: level})
			}
			log := slog.New(h)
			ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
			defer stop()
			// RAYITO_LOCAL_SCOPE runs a second platform beside the main one
			// (tests do): each sweeps only its own scope's leftovers.
			srv, err := localvm.New(ctx, localvm.Options{Addr: addr, StateDir: stateDir(cmd), Logger: log, Scope: os.Getenv("RAYITO_LOCAL_SCOPE"), AWSQuotas: cmd.Bool(awsQuotasFlag.Name)})
			if err != nil {
				return err
			}
			if !srv.Privileged() {
				log.Warn("not root: sandboxes run as plain processes of this user, without isolation")
			}
			log.Info("local platform serving", "endpoint", "http://"+addr, "state_dir", stateDir(cmd))
			serveErr := srv.ListenAndServe(ctx)
			down, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			if !cmd.Bool("keep-sandboxes") {
				if err := srv.TerminateAll(down); err != nil {
					log.Error("terminating sandboxes", "err", err)
				}
			}
			if err := srv.Close(down); err != nil {
				return err
			}
			if serveErr != nil && ctx.Err() == nil {
				return fmt.Errorf("serve: %w", serveErr)
			}
			return nil
		},
	}
}

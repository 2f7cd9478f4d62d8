package sandbox

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/urfave/cli/v3"

	"github.com/rayito-dev/rayito/cli/internal/cliutil"
	rayito "github.com/rayito-dev/rayito/sdk"
)

func createCommand(io cliutil.IO) *cli.Command {
	return &cli.Command{
		Name:  "create",
		Usage: "create a sandbox and print its id (its access token is stored for later commands)",
		Flags: []cli.Flag{
			&cli.DurationFlag{Name: "timeout", Value: time.Hour, Usage: "the sandbox's lifetime"},
			&cli.StringFlag{Name: "template", Usage: "image (an image ARN on AWS)"},
			&cli.StringSliceFlag{Name: "env", Usage: "NAME=VALUE for every command (not for secrets: it travels in the creation payload)"},
			&cli.StringSliceFlag{Name: "metadata", Usage: "KEY=VALUE label (repeatable)"},
			&cli.BoolFlag{Name: "no-internet", Usage: "no outbound internet access"},
			&cli.BoolFlag{Name: "show-token", Usage: "also print the access token"},
			cliutil.JSONFlag,
		},
		Action: func(ctx context.Context, cmd *cli.Command) error {
			envs, err := cliutil.ParseEnvs(cmd.StringSlice("env"))
			if err != nil {
				return err
			}
			md, err := cliutil.ParseEnvs(cmd.StringSlice("metadata"))
			if err != nil {
				return err
			}
			opts, err := options(ctx, os.Getenv)
			if err != nil {
				return err
			}
			opts = append(opts, rayito.WithTimeout(cmd.Duration("timeout")), rayito.WithEnvs(envs), rayito.WithMetadata(md))
			if t := cmd.String("template"); t != "" {
				opts = append(opts, rayito.WithTemplate(t))
			}
			if cmd.Bool("no-internet") {
				opts = append(opts, rayito.WithInternetAccess(false))
			}
			sbx, err := rayito.Create(ctx, opts...)
			if err != nil {
				return err
			}
			if err := cliutil.DefaultTokenStore(os.Getenv).Save(sbx.ID(), sbx.AccessToken()); err != nil {
				return fmt.Errorf("sandbox %s created, but its access token could not be stored: %w", sbx.ID(), err)
			}
			out := map[string]string{"id": sbx.ID()}
			if cmd.Bool("show-token") {
				out["access_token"] = sbx.AccessToken()
			}
			if cmd.Bool("json") {
				return cliutil.PrintJSON(io.Out, out)
			}
			fmt.Fprintln(io.Out, sbx.ID())
			if cmd.Bool("show-token") {
				fmt.Fprintln(io.Out, sbx.AccessToken())
			}
			return nil
		},
	}
}

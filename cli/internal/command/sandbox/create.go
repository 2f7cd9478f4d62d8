package sandbox

import (
	"context"
	"fmt"
	"time"

	"github.com/urfave/cli/v3"

	"github.com/rayito-dev/rayito/cli/internal/cliutil"
	"github.com/rayito-dev/rayito/cli/internal/platform"
	"github.com/rayito-dev/rayito/proto/microvmsapi"
	rayito "github.com/rayito-dev/rayito/sdk"
)

func createCommand(f *cliutil.Factory) *cli.Command {
	return &cli.Command{
		Name:  "create",
		Usage: "create a sandbox and print its id (its access token is stored for later commands)",
		Flags: []cli.Flag{
			&cli.DurationFlag{Name: "timeout", Value: rayito.DefaultTimeout, Usage: "the sandbox's lifetime, 1s to 8h (the SDK's default)"},
			&cli.StringFlag{Name: "template", Usage: "`IMAGE` (an image ARN on AWS; default: RAYITO_TEMPLATE)"},
			&cli.StringSliceFlag{Name: "env", Aliases: []string{"e"}, Usage: "`NAME=VALUE` for every command (not for secrets: it travels in the creation payload)"},
			&cli.StringSliceFlag{Name: "metadata", Usage: "`KEY=VALUE` label (repeatable)"},
			&cli.BoolFlag{Name: "no-internet", Usage: "no outbound internet access"},
			&cli.BoolFlag{Name: "show-token", Usage: "also print the access token"},
			cliutil.JSONFlag(),
		},
		Action: func(ctx context.Context, cmd *cli.Command) error {
			envs, err := cliutil.ParseEnvs(cmd.StringSlice("env"))
			if err != nil {
				return err
			}
			md, err := cliutil.ParseKVs("--metadata", cmd.StringSlice("metadata"))
			if err != nil {
				return err
			}
			life := cmd.Duration("timeout")
			if life < time.Duration(microvmsapi.MinDurationSeconds)*time.Second || life > time.Duration(microvmsapi.MaxDurationSeconds)*time.Second {
				return cliutil.Usagef("--timeout must be between 1s and 8h, got %s", life)
			}
			if b, err := platform.Backend(f.Getenv); err == nil && b == rayito.BackendAWS && cmd.String("template") == "" && f.Getenv("RAYITO_TEMPLATE") == "" {
				return cliutil.Usagef("the aws backend needs an image: pass --template or set RAYITO_TEMPLATE")
			}
			opts, err := options(ctx, f)
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
			platform.WarnIfUnisolated(ctx, f.IO.Err, sbx)
			// Create stored the access token in the SDK's token store.
			out := map[string]string{"id": sbx.ID()}
			if cmd.Bool("show-token") {
				out["access_token"] = sbx.AccessToken()
			}
			if cmd.Bool("json") {
				return cliutil.PrintJSON(f.IO.Out, out)
			}
			fmt.Fprintln(f.IO.Out, sbx.ID())
			if cmd.Bool("show-token") {
				fmt.Fprintln(f.IO.Out, sbx.AccessToken())
			}
			return nil
		},
	}
}

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
		Description: "With --timeout (or --on-timeout, --max-lifetime) the sandbox gets a deadline --timeout after its\n" +
			"start, which `rayito sandbox timeout` moves up to --max-lifetime: then it is killed (kill, the\n" +
			"default: its end reason is timeout) or kept for a pause (pause). Without any of them the\n" +
			"platform ends it " + rayito.DefaultTimeout.String() + " after its start (max_duration), and nothing moves that.\n" +
			"--idle lets the platform pause it after that long without traffic.",
		Flags: append(createFlags(),
			&cli.BoolFlag{Name: "show-token", Usage: "also print the access token"},
			cliutil.JSONFlag()),
		Action: func(ctx context.Context, cmd *cli.Command) error {
			opts, err := createOptions(ctx, cmd, f)
			if err != nil {
				return err
			}
			sbx, err := rayito.Create(ctx, opts...)
			if err != nil {
				return err
			}
			platform.WarnIfUnisolated(ctx, f.IO.Err, sbx)
			// Create stored the access token in the SDK's token store.
			out := map[string]any{"id": sbx.ID()}
			if cmd.Bool("show-token") {
				out["access_token"] = sbx.AccessToken()
			}
			gateways := map[string]string{}
			for _, g := range sbx.Gateways() {
				gateways[g.Name()] = g.URL()
			}
			if len(gateways) > 0 {
				out["gateways"] = gateways
			}
			if cmd.Bool("json") {
				return cliutil.PrintJSON(f.IO.Out, out)
			}
			fmt.Fprintln(f.IO.Out, sbx.ID())
			if cmd.Bool("show-token") {
				fmt.Fprintln(f.IO.Out, sbx.AccessToken())
			}
			for _, g := range sbx.Gateways() {
				// Beside the id on stdout, which scripts read: the URLs
				// are for people (sandbox code finds them in its env).
				fmt.Fprintf(f.IO.Err, "gateway %s: %s\n", g.Name(), g.URL())
			}
			return nil
		},
	}
}

// createFlags are the flags of the sandbox a command creates (create,
// reincarnate).
func createFlags() []cli.Flag {
	return append([]cli.Flag{
		&cli.DurationFlag{Name: "timeout", Value: rayito.DefaultTimeout, Usage: "the sandbox's deadline, a `DURATION` after its start (1s to 8h): killed then unless --on-timeout says otherwise (not set: no deadline, the platform ends it after the default)"},
		&cli.StringFlag{Name: "on-timeout", Usage: "give the sandbox a deadline, and the `ACTION` then: kill or pause"},
		&cli.DurationFlag{Name: "max-lifetime", Usage: "the sandbox's maximum `LIFETIME` (running plus paused), 3m to 8h; the deadline stays 1m short of it (default: --timeout+1m with kill, 8h with pause)", HideDefault: true},
		&cli.BoolFlag{Name: "auto-resume", Usage: "resume a paused sandbox on a request (with --idle) and give it a new deadline then (with --on-timeout pause)"},
		&cli.DurationFlag{Name: "idle", Usage: "let the platform pause the sandbox after this `DURATION` without traffic (at least 1m)", HideDefault: true},
		&cli.DurationFlag{Name: "idle-suspend-for", Usage: "with --idle, end the sandbox after this `DURATION` paused (default: the rest of its lifetime)", HideDefault: true},
		&cli.StringFlag{Name: "template", Usage: "the sandbox's `IMAGE`: on AWS an image ARN or name (default: RAYITO_TEMPLATE); locally local (the default), local-root (root allowed: commands as root, sudo) or a template built with rayito template build"},
		&cli.IntFlag{Name: "memory", Usage: "the sandbox's memory in `MIB`: 512, 1024, 2048, 4096 or 8192 (others round up); the image of that size, <template>-<size> (locally: the root platform's memory limit)", HideDefault: true},
		&cli.StringSliceFlag{Name: "env", Aliases: []string{"e"}, Usage: "`NAME=VALUE` for every command (not for secrets: it travels in the creation payload)"},
		&cli.StringSliceFlag{Name: "metadata", Usage: "`KEY=VALUE` label (repeatable)"},
		&cli.StringFlag{Name: "persist", Usage: "persist HOME at `s3://BUCKET/PREFIX` (s3:///PREFIX: the local platform's bucket): the sandbox is bound to it, and its checkpoint, when there is one, is restored before it is handed out (on AWS it needs --execution-role)"},
		&cli.StringFlag{Name: "persist-name", Usage: "the checkpoint's `NAME` under --persist's prefix (default: default)"},
		&cli.StringFlag{Name: "persist-region", Usage: "the --persist bucket's `REGION` (default: the sandbox's)"},
		&cli.StringSliceFlag{Name: "mount", Usage: "mount an S3 prefix: `SPEC` is PATH=BUCKET[/PREFIX][:rw[,overwrite][,delete]] (read-only by default; PATH under /mnt/ or /home/user/; the bucket must be in the image's RAYITO_ALLOWED_MOUNT_BUCKETS; repeatable, at most 4)"},
		&cli.BoolFlag{Name: "events", Usage: "sign the sandbox's lifecycle events (created, paused, resumed, killed) for 'rayito events' and the webhooks (needs a root platform locally)"},
		&cli.StringFlag{Name: "events-stack-key", Usage: "with --events, the events stack's key secret `ARN` " + cliutil.AWSOnly},
	}, append(append(cliutil.NetworkFlags(), cliutil.SecretFlags()...), cliutil.PlacementFlags()...)...)
}

// createOptions turns createFlags into the SDK's options, checked first.
func createOptions(ctx context.Context, cmd *cli.Command, f *cliutil.Factory) ([]rayito.Option, error) {
	envs, err := cliutil.ParseEnvs(cmd.StringSlice("env"))
	if err != nil {
		return nil, err
	}
	md, err := cliutil.ParseKVs("--metadata", cmd.StringSlice("metadata"))
	if err != nil {
		return nil, err
	}
	mounts, err := parseMounts(cmd.StringSlice("mount"))
	if err != nil {
		return nil, cliutil.Usage(err)
	}
	life := cmd.Duration("timeout")
	if life < time.Duration(microvmsapi.MinDurationSeconds)*time.Second || life > time.Duration(microvmsapi.MaxDurationSeconds)*time.Second {
		return nil, cliutil.Usagef("--timeout must be between 1s and 8h, got %s", life)
	}
	lifeOpts, err := lifetimeOptions(cmd, life)
	if err != nil {
		return nil, err
	}
	b, err := platform.Backend(f.Getenv)
	if err != nil {
		return nil, err
	}
	if b == rayito.BackendAWS && cmd.String("template") == "" && f.Getenv(rayito.EnvTemplate) == "" {
		return nil, cliutil.Usagef("the aws backend needs an image: pass --template or set RAYITO_TEMPLATE")
	}
	// What the backend cannot honour is refused before anything
	// is created, never dropped or merely recorded.
	if err := cliutil.CheckCreateOptions(cmd, b, f.Getenv); err != nil {
		return nil, err
	}
	opts, err := options(ctx, f)
	if err != nil {
		return nil, err
	}
	opts = append(opts, rayito.WithEnvs(envs), rayito.WithMetadata(md))
	if cmd.IsSet("timeout") || cmd.IsSet("on-timeout") || cmd.IsSet("max-lifetime") {
		// A timeout the user set is a deadline; without one, the
		// SDK's default lifetime.
		opts = append(opts, rayito.WithTimeout(life))
	}
	opts = append(opts, lifeOpts...)
	if t := cmd.String("template"); t != "" {
		opts = append(opts, rayito.WithTemplate(t))
	}
	if cmd.IsSet("memory") {
		mib := cmd.Int("memory")
		if _, err := rayito.RoundSize(int(mib)); err != nil {
			return nil, cliutil.Usage(err)
		}
		opts = append(opts, rayito.WithMemory(int(mib)))
	}
	opts = append(opts, cliutil.NetworkOptions(cmd)...)
	opts = append(opts, cliutil.PlacementOptions(cmd)...)
	secretOpts, err := cliutil.SecretOptions(cmd)
	if err != nil {
		return nil, err
	}
	opts = append(opts, secretOpts...)
	switch {
	case cmd.Bool("events"):
		if b == rayito.BackendAWS && cmd.String("events-stack-key") == "" {
			return nil, cliutil.Usagef("--events on AWS needs --events-stack-key (the events stack's key secret ARN)")
		}
		opts = append(opts, rayito.WithEvents(rayito.LifecycleEvents{StackKeySecretARN: cmd.String("events-stack-key")}))
	case cmd.IsSet("events-stack-key"):
		return nil, cliutil.Usagef("--events-stack-key goes with --events")
	}
	if mounts != nil {
		opts = append(opts, rayito.WithMounts(mounts))
	}
	if s := cmd.String("persist"); s != "" {
		p, err := rayito.ParseS3Prefix(s)
		if err != nil {
			return nil, cliutil.Usagef("--persist: %s", cliutil.Describe(err))
		}
		p.Name, p.Region = cmd.String("persist-name"), cmd.String("persist-region")
		opts = append(opts, rayito.WithPersist(p))
	} else if cmd.IsSet("persist-name") || cmd.IsSet("persist-region") {
		return nil, cliutil.Usagef("--persist-name and --persist-region go with --persist")
	}
	return opts, nil
}

// Lifetime limits of create's flags (the SDK checks them too).
const (
	maxLifetime = time.Duration(microvmsapi.MaxDurationSeconds) * time.Second
	minLifetime = 3 * time.Minute
	// capMargin: the deadline stays this much short of the lifetime.
	capMargin = time.Minute
	minIdle   = time.Duration(microvmsapi.MinIdleSeconds) * time.Second
)

// lifetimeOptions checks --on-timeout, --max-lifetime, --auto-resume,
// --idle and --idle-suspend-for (timeout is --timeout) and returns their
// SDK options.
func lifetimeOptions(cmd *cli.Command, timeout time.Duration) ([]rayito.Option, error) {
	var opts []rayito.Option
	action := rayito.TimeoutAction(cmd.String("on-timeout"))
	switch action {
	case "", rayito.TimeoutKill, rayito.TimeoutPause:
	default:
		return nil, cliutil.Usagef("--on-timeout must be kill or pause, got %q", cmd.String("on-timeout"))
	}
	// As the SDK does: a timeout the user set is a deadline (killed then),
	// unless no deadline fits under the platform's maximum duration.
	managed := action != "" || cmd.IsSet("max-lifetime") || cmd.IsSet("timeout") && timeout <= maxLifetime-capMargin
	life := timeout
	if cmd.IsSet("max-lifetime") {
		life = cmd.Duration("max-lifetime")
		if life < minLifetime || life > maxLifetime {
			return nil, cliutil.Usagef("--max-lifetime must be between 3m and 8h, got %s", life)
		}
		if timeout > life-capMargin {
			return nil, cliutil.Usagef("--timeout (%s) must be at least 1m shorter than --max-lifetime (%s)", timeout, life)
		}
		opts = append(opts, rayito.WithMaxLifetime(life))
	} else if managed {
		life = min(max(timeout+capMargin, minLifetime), maxLifetime)
		if action == rayito.TimeoutPause {
			life = maxLifetime
		}
		if timeout > life-capMargin {
			return nil, cliutil.Usagef("--timeout must be at most 7h59m with --on-timeout, got %s", timeout)
		}
	}
	if action != "" {
		opts = append(opts, rayito.WithOnTimeout(action))
	}
	idle := cmd.IsSet("idle")
	autoResume := cmd.Bool("auto-resume")
	if autoResume && action != rayito.TimeoutPause && !idle {
		return nil, cliutil.Usagef("--auto-resume needs --on-timeout pause or --idle")
	}
	if autoResume && action == rayito.TimeoutPause {
		opts = append(opts, rayito.WithAutoResume())
	}
	if cmd.IsSet("idle-suspend-for") && !idle {
		return nil, cliutil.Usagef("--idle-suspend-for needs --idle")
	}
	if idle {
		d := cmd.Duration("idle")
		if d < minIdle || d > maxLifetime {
			return nil, cliutil.Usagef("--idle must be between 1m and 8h, got %s", d)
		}
		suspendFor := max(life-d, 0)
		if cmd.IsSet("idle-suspend-for") {
			suspendFor = cmd.Duration("idle-suspend-for")
			if suspendFor < 0 || suspendFor > maxLifetime {
				return nil, cliutil.Usagef("--idle-suspend-for must be between 0s and 8h, got %s", suspendFor)
			}
		}
		opts = append(opts, rayito.WithIdlePolicy(d, suspendFor, autoResume))
	}
	return opts, nil
}

package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"strings"

	"github.com/urfave/cli/v3"

	"github.com/rayito-dev/rayito/cli/internal/cliutil"
	"github.com/rayito-dev/rayito/cli/internal/version"
)

// envVar is one environment variable the CLI, the SDK or the local
// platform reads.
type envVar struct{ name, what string }

// environment lists every variable read by cli/, sdk/ and localvm/ (and
// rayd's one switch): keep it in step with their Getenv and LookupEnv
// calls.
var environment = []envVar{
	{"RAYITO_BACKEND", "the platform: local (default) or aws (CLI and SDK)"},
	{"RAYITO_ENDPOINT", "the local platform's URL (CLI and SDK; --endpoint wins; `local serve` listens there); default: the endpoint the user's own platform recorded in its state dir (rayito/localvm/endpoint), else http://127.0.0.1:7450"},
	{"RAYITO_TEMPLATE", "the image of new sandboxes: on aws an image name or ARN, required there (CLI and SDK; create --template wins); `doctor --aws` checks it. Locally local (the default), local-root or a template built with `rayito template build`"},
	{"RAYITO_ARTIFACT_BUCKET", "the S3 bucket of the image artifacts: `image publish` without --bucket, `doctor --aws`"},
	{"RAYITO_EVENTS_TABLE", "the events stack's DynamoDB table (its EventsTableName output) on aws: `events` without --table, and the SDK's webhook and event calls (WithEventsTable wins)"},
	{"RAYITO_GIT_USERNAME", "`sandbox git` clone/push/pull: the user name of the git credentials (never a flag: it is often the token)"},
	{"RAYITO_GIT_PASSWORD", "`sandbox git` clone/push/pull: the password or token of the git credentials (or --password-stdin); both or neither"},
	{"RAYITO_ACCESS_TOKEN", "a sandbox's access token for exec, shell, cp and info (--token wins; default: the token stored by create)"},
	{"RAYITO_DEBUG", "1: the platform that `run` starts in its own process logs at debug level to stderr"},
	{"RAYITO_ALLOW_ROOT", "1 in rayd's own environment (inside the sandbox): lets clients run commands as root"},
	{"RAYITO_ALLOWED_MOUNT_BUCKETS", "comma-separated buckets S3 mounts may name (--mount, WithMounts): in an image's environment or a template's, and in the local platform's, which passes it to its sandboxes; empty or unset refuses every mount"},
	{"RAYITO_SECRETS_DIR", "the local secret store (`rayito secret`, the SDK's default store on the local platform), default $XDG_CONFIG_HOME/rayito/secrets or ~/.config/rayito/secrets"},
	{"RAYITO_E2B_API_KEY", "one API key `e2b serve` and `local serve|up --e2b-addr` accept, beside the hashes in the E2B keys file"},
	{"XDG_CONFIG_HOME", "base of the local secret store's default directory (see RAYITO_SECRETS_DIR) and of the E2B keys file ($XDG_CONFIG_HOME/rayito/e2b-keys)"},
	{"XDG_STATE_HOME", "base of the state directories: $XDG_STATE_HOME/rayito/tokens (access tokens) and rayito/localvm (the platform), default ~/.local/state"},
	{"AWS_REGION, AWS_PROFILE, ...", "aws backend: the AWS SDK's usual configuration and credential chain"},
	{"AWS_ENDPOINT_URL_LAMBDA, AWS_ENDPOINT_URL, AWS_ENDPOINT_URL_S3", "aws backend: another endpoint for the MicroVMs API (the first two, in that order) and for S3 (`image publish`, `stack deploy`); S3 is then addressed path-style"},
	{"AWS_ENDPOINT_URL_CLOUDFORMATION", "aws backend: another endpoint for CloudFormation (`stack`; else AWS_ENDPOINT_URL)"},
	{"RAYITO_UNISOLATED", "1: like --unisolated (`run`, `local serve|up`): where sandboxes cannot be isolated (no root, no unprivileged user namespaces), start them anyway, NOT isolated; every such sandbox says so on stderr"},
	{"RAYITO_SANDBOX_BINARY", "like --sandbox-binary (`run`, `local serve|up`): the rayito-sandbox every local sandbox starts from (default: the one beside rayito, else rayito itself)"},
	{"RAYITO_LOCALVM_NO_USERNS", "1, for tests only: a local platform without root behaves as if user namespaces were unusable (it can never weaken root's isolation)"},
	{"PATH, TMPDIR", "unisolated local platform: the sandboxes' PATH and TMPDIR (they run as this user's processes)"},
	{"GODEBUG, GOTRACEBACK, GORACE, GOCOVERDIR", "passed on to the sandboxes' init and rayd (Go runtime knobs)"},
}

// envNameWidth is the widest name that shares its line with its
// meaning in `help environment`; a longer one has a line of its own.
const envNameWidth = 24

func printEnvironment(f *cliutil.Factory) error {
	var b strings.Builder
	b.WriteString("Environment variables read by rayito, the SDK and the local platform:\n\n")
	col := 0
	for _, v := range environment {
		if n := len(v.name); n <= envNameWidth && n > col {
			col = n
		}
	}
	for _, v := range environment {
		if len(v.name) > col {
			fmt.Fprintf(&b, "  %s\n%*s%s\n", v.name, col+4, "", v.what)
			continue
		}
		fmt.Fprintf(&b, "  %-*s  %s\n", col, v.name, v.what)
	}
	_, err := io.WriteString(f.IO.Out, fitWidth(b.String(), HelpWidth))
	return err
}

// helpTopics are help pages that are not commands.
var helpTopics = map[string]func(*cliutil.Factory) error{"environment": printEnvironment}

func helpCommand(f *cliutil.Factory) *cli.Command {
	return &cli.Command{
		Name:      "help",
		Usage:     "show help for a command, or a topic: environment",
		ArgsUsage: "[COMMAND...] | environment",
		Action: func(ctx context.Context, cmd *cli.Command) error {
			args := cmd.Args().Slice()
			if len(args) == 1 {
				if topic, ok := helpTopics[args[0]]; ok {
					return topic(f)
				}
			}
			return helpFor(ctx, cmd.Root(), args)
		},
	}
}

// helpFor prints the help of the command at path (names below the root)
// by running a fresh command tree with --help; an unknown name is a usage
// error.
func helpFor(ctx context.Context, root *cli.Command, path []string) error {
	root = root.Root()
	c := root
	for _, name := range path {
		next := c.Command(name)
		if next == nil || next.Hidden && name != "completion" {
			if c == root {
				topics := cliutil.CommandNames(root)
				for t := range helpTopics {
					topics = append(topics, t)
				}
				return &cliutil.UsageError{Err: fmt.Errorf("unknown help topic %q%s", name, cliutil.DidYouMean(name, topics, cliutil.Quoted)), Command: "rayito help"}
			}
			err := cliutil.UnknownCommand(c, name)
			return &cliutil.UsageError{Err: errors.Unwrap(err), Command: c.FullName()}
		}
		c = next
	}
	fresh := NewRoot(&cliutil.Factory{IO: cliutil.IO{In: root.Reader, Out: root.Writer, Err: root.ErrWriter}})
	// A fresh context: the running command in ctx would become the fresh
	// root's parent.
	_ = ctx
	return fresh.Run(context.Background(), append(append([]string{"rayito"}, path...), "--help"))
}

func versionCommand(f *cliutil.Factory) *cli.Command {
	return &cli.Command{
		Name:  "version",
		Usage: "print the version (as --version does)",
		Flags: []cli.Flag{cliutil.JSONFlag()},
		Action: func(_ context.Context, cmd *cli.Command) error {
			if cmd.Bool("json") {
				return cliutil.PrintJSON(f.IO.Out, map[string]string{"version": version.Version, "description": version.String(),
					"go": runtime.Version(), "platform": runtime.GOOS + "/" + runtime.GOARCH})
			}
			_, err := fmt.Fprintln(f.IO.Out, version.String())
			return err
		},
	}
}

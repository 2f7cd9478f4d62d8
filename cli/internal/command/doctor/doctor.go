// Package doctor is `rayito doctor`: check that this machine (or, with
// --aws, the AWS configuration) can run Rayito sandboxes, one line per
// check, with a fix for each warning and failure.
//
// Every check has a short timeout of its own and prints no secret: no
// environment value, credential or raw AWS error reaches the output.
package doctor

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/urfave/cli/v3"

	"github.com/rayito-dev/rayito/cli/internal/cliutil"
	"github.com/rayito-dev/rayito/cli/internal/platform"
	rayito "github.com/rayito-dev/rayito/sdk"
)

// Status is a check's outcome.
type Status string

// The outcomes: only FAIL makes doctor exit 1.
const (
	Pass Status = "PASS"
	Warn Status = "WARN"
	Fail Status = "FAIL"
)

// Check is one check's result; Fix is set for WARN and FAIL.
type Check struct {
	Name   string `json:"name"`
	Status Status `json:"status"`
	Detail string `json:"detail"`
	Fix    string `json:"fix"`
}

// Report is what --json prints.
type Report struct {
	Checks []Check `json:"checks"`
	OK     bool    `json:"ok"`
}

// Per-check timeouts.
const (
	probeTimeout   = 5 * time.Second
	awsTimeout     = 6 * time.Second
	sandboxTimeout = 60 * time.Second
)

// Command returns `rayito doctor`.
func Command(f *cliutil.Factory) *cli.Command {
	return &cli.Command{
		Name:  "doctor",
		Usage: "check that this machine can run sandboxes (or, with --aws, the AWS configuration)",
		Description: "Prints one line per check, PASS, WARN or FAIL, and a fix for each WARN and FAIL.\n" +
			"The local checks create, use and kill one test sandbox, as `rayito run` would.\n" +
			"--aws (or RAYITO_BACKEND=aws) checks the AWS configuration instead.\n" +
			"Exit codes: 0 no check failed, 1 a check failed.",
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "aws", Usage: "check the AWS backend (credentials, region, the template and its launch gate, quotas, the artifact bucket, rayd version) instead of the local platform"},
			cliutil.JSONFlag(),
		},
		Action: func(ctx context.Context, cmd *cli.Command) error {
			if cmd.Args().Len() > 0 {
				return cliutil.Usagef("doctor takes no arguments")
			}
			e := realEnv(f.Getenv)
			checks := Run(ctx, e, cmd.Bool("aws"))
			return write(f.IO.Out, checks, cmd.Bool("json"))
		},
	}
}

// Run runs the checks: the AWS ones when aws or RAYITO_BACKEND=aws, else
// the local ones.
func Run(ctx context.Context, e *Env, aws bool) []Check {
	b, err := platform.Backend(e.Getenv)
	if err != nil {
		return []Check{{Name: "backend", Status: Fail, Detail: cliutil.Describe(err), Fix: "unset RAYITO_BACKEND, or set it to local or aws"}}
	}
	var checks []func(context.Context, *Env) Check
	if aws || b == rayito.BackendAWS {
		checks = awsChecks()
	} else {
		checks = localChecks()
	}
	out := make([]Check, 0, len(checks))
	for _, c := range checks {
		if ctx.Err() != nil {
			break
		}
		out = append(out, c(ctx, e))
	}
	return out
}

// write prints the checks and returns exit 1 (printing nothing more) when
// one failed.
func write(w io.Writer, checks []Check, asJSON bool) error {
	ok := true
	for _, c := range checks {
		if c.Status == Fail {
			ok = false
		}
	}
	if asJSON {
		if checks == nil {
			checks = []Check{}
		}
		if err := cliutil.PrintJSON(w, Report{Checks: checks, OK: ok}); err != nil {
			return err
		}
	} else {
		fmt.Fprint(w, Text(checks))
	}
	if !ok {
		return &cliutil.ExitCodeError{Code: cliutil.ExitError}
	}
	return nil
}

// Text is the checks as doctor prints them: "STATUS  name  detail", names
// aligned, and "fix: ..." under each WARN and FAIL.
func Text(checks []Check) string {
	width := 0
	for _, c := range checks {
		width = max(width, len(c.Name))
	}
	var b strings.Builder
	for _, c := range checks {
		fmt.Fprintf(&b, "%s  %-*s  %s\n", c.Status, width, c.Name, oneLine(c.Detail))
		if c.Status != Pass && c.Fix != "" {
			fmt.Fprintf(&b, "      fix: %s\n", oneLine(c.Fix))
		}
	}
	return b.String()
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

func pass(name, detail string) Check { return Check{Name: name, Status: Pass, Detail: detail} }
func warn(name, detail, fix string) Check {
	return Check{Name: name, Status: Warn, Detail: detail, Fix: fix}
}
func fail(name, detail, fix string) Check {
	return Check{Name: name, Status: Fail, Detail: detail, Fix: fix}
}

// timed runs fn with a timeout of its own.
func timed(ctx context.Context, d time.Duration, fn func(context.Context) Check) Check {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	return fn(ctx)
}

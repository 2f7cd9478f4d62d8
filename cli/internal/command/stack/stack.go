// Package stack is `rayito stack`: the optional CloudFormation stacks of a
// Rayito deployment on AWS. One exists so far, events (the lifecycle
// events pipeline, the template of the events module's package stack):
// deploy uploads its Lambdas and creates or updates it, status shows it,
// destroy deletes it.
package stack

import (
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/cloudformation"
	cfntypes "github.com/aws/aws-sdk-go-v2/service/cloudformation/types"
	"github.com/urfave/cli/v3"

	"github.com/rayito-dev/rayito/cli/internal/awsenv"
	"github.com/rayito-dev/rayito/cli/internal/cfnstack"
	"github.com/rayito-dev/rayito/cli/internal/cliutil"
	evstack "github.com/rayito-dev/rayito/events/stack"
)

// DefaultStackName is the events stack's default name.
const DefaultStackName = "rayito-events"

// stackNameRE is CloudFormation's rule for a stack name, at most 53
// characters: the functions are named <stack>-reconciler, and a Lambda
// name has at most 64.
var stackNameRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9-]{0,52}$`)

// Command returns `rayito stack`.
func Command(f *cliutil.Factory) *cli.Command {
	return &cli.Command{
		Name:  "stack",
		Usage: "deploy, show and destroy the optional CloudFormation stacks (events) of your AWS account " + cliutil.AWSOnly,
		Description: "The events stack (the lifecycle events pipeline: docs/events-stack.md) is the only one so far.\n" +
			"AWS credentials and region come from the AWS SDK's usual chain. These commands are AWS only.",
		Commands: []*cli.Command{deployCommand(f), statusCommand(f), destroyCommand(f)},
	}
}

// Reason, Error and APIError are cfnstack's (the one CloudFormation
// mechanism of the CLI), named here for this package's callers.
type (
	// Reason is what an *Error says went wrong.
	Reason = cfnstack.Reason
	// Error is a stack that refused or failed an operation.
	Error = cfnstack.Error
	// APIError is a failed CloudFormation call without AWS's message.
	APIError = cfnstack.APIError
)

// The reasons of an *Error.
const (
	ReasonBlocked  = cfnstack.ReasonBlocked
	ReasonNotFound = cfnstack.ReasonNotFound
	ReasonFailed   = cfnstack.ReasonFailed
)

// clients are the AWS clients of one command.
type clients struct {
	region string
	cfn    *cloudformation.Client
	env    *awsenv.Env
}

// loadAWS loads the AWS configuration (awsenv.Load, bounded by a timeout
// of its own so a stuck credential provider cannot hang the command) and
// builds the CloudFormation client. Its endpoint is the SDK's own choice:
// AWS_ENDPOINT_URL_CLOUDFORMATION, AWS_ENDPOINT_URL, the profile, else
// the regional one.
func loadAWS(ctx context.Context) (*clients, error) {
	lctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	env, err := awsenv.Load(lctx)
	if err != nil {
		if ctx.Err() == nil && lctx.Err() != nil {
			return nil, errors.New("loading the AWS configuration and credentials took more than 30s")
		}
		return nil, err
	}
	return &clients{region: env.Region, cfn: cloudformation.NewFromConfig(env.Config), env: env}, nil
}

// notFound is the *Error of a missing stack.
func notFound(name, region string) error {
	return &Error{Stack: name, Reason: ReasonNotFound,
		Detail: "no such stack in " + region + " (deploy it with 'rayito stack deploy events')"}
}

// printOutputs writes the outputs one a line, "Key  Value", in the
// template's order, then any other.
func printOutputs(w io.Writer, m map[string]string) {
	width := 0
	for k := range m {
		width = max(width, len(k))
	}
	seen := map[string]bool{}
	for _, k := range evstack.Outputs {
		if v, ok := m[k]; ok {
			fmt.Fprintf(w, "%-*s  %s\n", width, k, v)
			seen[k] = true
		}
	}
	for k, v := range m {
		if !seen[k] {
			fmt.Fprintf(w, "%-*s  %s\n", width, k, v)
		}
	}
}

// nameFlag is --stack-name.
func nameFlag() cli.Flag {
	return &cli.StringFlag{Name: "stack-name", Value: DefaultStackName, Usage: "the stack's `NAME`"}
}

// stackName checks --stack-name.
func stackName(cmd *cli.Command) (string, error) {
	n := cmd.String("stack-name")
	if !stackNameRE.MatchString(n) {
		return "", cliutil.Usagef("--stack-name %q: a letter, then letters, digits or '-', at most 53 characters", n)
	}
	return n, nil
}

// noArgs refuses positional arguments.
func noArgs(cmd *cli.Command) error {
	if cmd.Args().Len() > 0 {
		return cliutil.Usagef("%s takes no arguments (got %q)", cmd.FullName(), cmd.Args().First())
	}
	return nil
}

// timeoutExit is the exit 124 of a wait that passed --wait-timeout.
func timeoutExit(name string, d time.Duration, status cfntypes.StackStatus, what string) error {
	msg := fmt.Sprintf("stack %s: still %s after %s (--wait-timeout); %s goes on: see 'rayito stack status events --stack-name %s'",
		name, orUnknown(string(status)), d, what, name)
	return cli.Exit(msg, cliutil.ExitTimeout)
}

func orUnknown(s string) string {
	if s == "" {
		return "in progress"
	}
	return s
}

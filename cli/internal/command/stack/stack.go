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
	"net"
	"regexp"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation"
	cfntypes "github.com/aws/aws-sdk-go-v2/service/cloudformation/types"
	"github.com/aws/smithy-go"
	"github.com/urfave/cli/v3"

	"github.com/rayito-dev/rayito/cli/internal/awsenv"
	"github.com/rayito-dev/rayito/cli/internal/cliutil"
	evstack "github.com/rayito-dev/rayito/events/stack"
)

// DefaultStackName is the events stack's default name.
const DefaultStackName = "rayito-events"

// The back-off of every wait on CloudFormation: the first poll after
// pollFirst, doubling, at most pollMax apart. Tests shorten them.
var (
	pollFirst = 2 * time.Second
	pollMax   = 10 * time.Second
)

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

// Reason is what an *Error says went wrong, in the words of the SDK's
// StackException (blocked, not_found, failed).
type Reason string

const (
	// ReasonBlocked: the stack is in a state that refuses the operation
	// (an operation in progress, a failed creation to delete first).
	ReasonBlocked Reason = "blocked"
	// ReasonNotFound: no stack of that name in the region.
	ReasonNotFound Reason = "not_found"
	// ReasonFailed: the operation ended in a failed or rolled-back status.
	ReasonFailed Reason = "failed"
)

// Error is a stack that refused or failed an operation. Its text names
// the stack, the status and the first failed resource with its status
// reason; never a parameter's value.
type Error struct {
	Stack  string
	Reason Reason
	Status string // the stack's status, when known
	// Resource and ResourceReason: the first resource that failed in the
	// operation, and CloudFormation's reason (one line, shortened).
	Resource, ResourceReason string
	Detail                   string // what to do
}

func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "stack %s: %s", e.Stack, e.Reason)
	if e.Status != "" {
		b.WriteString(": " + e.Status)
	}
	if e.Resource != "" {
		b.WriteString("; first failed resource " + e.Resource)
		if e.ResourceReason != "" {
			b.WriteString(": " + e.ResourceReason)
		}
	}
	if e.Detail != "" {
		b.WriteString("; " + e.Detail)
	}
	return b.String()
}

// APIError is a failed CloudFormation call, reduced to what is safe to
// print: the operation, the error code and the HTTP status. The service's
// message (which can quote the request) is never kept.
type APIError struct {
	Operation string
	Code      string
	Status    int
	Network   string // set when no response came back
}

func (e *APIError) Error() string {
	switch {
	case e.Network != "":
		return "CloudFormation " + e.Operation + ": cannot reach CloudFormation (" + e.Network + ")"
	case e.Code != "" && e.Status != 0:
		return fmt.Sprintf("CloudFormation %s: %s (HTTP %d)", e.Operation, e.Code, e.Status)
	case e.Code != "":
		return "CloudFormation " + e.Operation + ": " + e.Code
	case e.Status != 0:
		return fmt.Sprintf("CloudFormation %s: HTTP %d", e.Operation, e.Status)
	}
	return "CloudFormation " + e.Operation + ": failed"
}

// The ValidationError messages that mean something to these commands,
// matched (never printed) by sanitize.
var (
	errStackMissing = errors.New("stack does not exist")
	errNoUpdates    = errors.New("no updates are to be performed")
)

// cfnError is sanitize's result: the printable *APIError, and which of
// the errors above the service's message meant.
type cfnError struct {
	*APIError
	kind error
}

func (e *cfnError) Unwrap() []error {
	if e.kind == nil {
		return []error{e.APIError}
	}
	return []error{e.APIError, e.kind}
}

// sanitize turns a CloudFormation client error into a *cfnError; nil
// stays nil and ctx's own errors pass through.
func sanitize(op string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	e := &APIError{Operation: op}
	var re *awshttp.ResponseError
	if errors.As(err, &re) && re.Response != nil {
		e.Status = re.HTTPStatusCode()
	}
	var kind error
	var ae smithy.APIError
	if errors.As(err, &ae) {
		if identifier(ae.ErrorCode()) {
			e.Code = ae.ErrorCode()
		}
		if ae.ErrorCode() == "ValidationError" {
			msg := strings.ToLower(ae.ErrorMessage())
			switch {
			case strings.Contains(msg, "does not exist"):
				kind = errStackMissing
			case strings.Contains(msg, "no updates are to be performed"):
				kind = errNoUpdates
			}
		}
	}
	if e.Status == 0 && e.Code == "" {
		var oe *net.OpError
		if errors.As(err, &oe) && oe.Err != nil {
			e.Network = oe.Op + ": " + oe.Err.Error()
		} else {
			e.Network = "no response"
		}
	}
	return &cfnError{APIError: e, kind: kind}
}

func identifier(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

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

// describe returns the stack named (or with the id) name, or an error
// that is errStackMissing when there is none.
func describe(ctx context.Context, c *cloudformation.Client, name string) (*cfntypes.Stack, error) {
	out, err := c.DescribeStacks(ctx, &cloudformation.DescribeStacksInput{StackName: aws.String(name)})
	if err != nil {
		return nil, sanitize("DescribeStacks", err)
	}
	if len(out.Stacks) == 0 {
		return nil, errStackMissing
	}
	return &out.Stacks[0], nil
}

// notFound is the *Error of a missing stack.
func notFound(name, region string) error {
	return &Error{Stack: name, Reason: ReasonNotFound,
		Detail: "no such stack in " + region + " (deploy it with 'rayito stack deploy events')"}
}

// inProgress reports a status during which CloudFormation refuses a new
// operation (REVIEW_IN_PROGRESS: a change set's stack, not created yet).
func inProgress(s cfntypes.StackStatus) bool {
	return strings.HasSuffix(string(s), "_IN_PROGRESS")
}

// succeeded reports the statuses that end an operation well.
func succeeded(s cfntypes.StackStatus) bool {
	switch s {
	case cfntypes.StackStatusCreateComplete, cfntypes.StackStatusUpdateComplete,
		cfntypes.StackStatusDeleteComplete, cfntypes.StackStatusImportComplete:
		return true
	}
	return false
}

// outputs returns the stack's outputs as a map.
func outputs(st *cfntypes.Stack) map[string]string {
	m := map[string]string{}
	for _, o := range st.Outputs {
		if o.OutputKey != nil {
			m[*o.OutputKey] = aws.ToString(o.OutputValue)
		}
	}
	return m
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

// backoff returns the successive waits: pollFirst, doubling, capped at
// pollMax.
type backoff struct{ next time.Duration }

func (b *backoff) wait(ctx context.Context) error {
	if b.next == 0 {
		b.next = pollFirst
	}
	t := time.NewTimer(b.next)
	defer t.Stop()
	b.next = min(b.next*2, pollMax)
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// waitStack polls the stack id with back-off until its status is not in
// progress, writing each new status on progress (stderr), and returns the
// stack as it ended; ctx bounds the wait. On an error it returns the
// stack as last seen (nil if never).
func waitStack(ctx context.Context, c *cloudformation.Client, id string, progress io.Writer) (*cfntypes.Stack, error) {
	var (
		b     backoff
		last  cfntypes.StackStatus
		seen  *cfntypes.Stack
		start = time.Now()
	)
	for {
		st, err := describe(ctx, c, id)
		if err != nil {
			return seen, err
		}
		seen = st
		if !inProgress(st.StackStatus) {
			return st, nil
		}
		if st.StackStatus != last {
			last = st.StackStatus
			fmt.Fprintf(progress, "stack %s: %s (%s)\n", aws.ToString(st.StackName), last, time.Since(start).Round(time.Second))
		}
		if err := b.wait(ctx); err != nil {
			return seen, err
		}
	}
}

// failure builds the *Error of an operation (token) that ended in status:
// the first resource whose status failed in it, read from the stack's
// events (newest first, at most maxEventPages pages).
func failure(ctx context.Context, c *cloudformation.Client, name, id, token string, status cfntypes.StackStatus, detail string) error {
	e := &Error{Stack: name, Reason: ReasonFailed, Status: string(status), Detail: detail}
	var first *cfntypes.StackEvent
	p := cloudformation.NewDescribeStackEventsPaginator(c, &cloudformation.DescribeStackEventsInput{StackName: aws.String(id)})
	for page := 0; p.HasMorePages() && page < maxEventPages; page++ {
		out, err := p.NextPage(ctx)
		if err != nil {
			break // the status alone still says it failed
		}
		done := false
		for i := range out.StackEvents {
			ev := &out.StackEvents[i]
			if token != "" && aws.ToString(ev.ClientRequestToken) != token {
				done = true // an older operation's
				break
			}
			if strings.HasSuffix(string(ev.ResourceStatus), "_FAILED") && aws.ToString(ev.LogicalResourceId) != name {
				first = ev // newest first: the last seen is the first failed
			}
		}
		if done {
			break
		}
	}
	if first != nil {
		e.Resource = aws.ToString(first.LogicalResourceId)
		e.ResourceReason = oneLine(aws.ToString(first.ResourceStatusReason), 300)
	}
	return e
}

const maxEventPages = 10

// oneLine keeps s printable: control characters become spaces, and it is
// cut at n bytes (on a rune boundary) with "...".
func oneLine(s string, n int) string {
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f || r >= 0x80 && r < 0xa0 {
			return ' '
		}
		return r
	}, s)
	s = strings.TrimSpace(s)
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && s[cut]&0xc0 == 0x80 {
		cut--
	}
	return s[:cut] + "..."
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

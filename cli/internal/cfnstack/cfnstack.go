// Package cfnstack is the CLI's one CloudFormation mechanism, shared by
// `rayito stack` and `rayito agent deploy --target agentcore`: describe a
// stack, refuse one that cannot be updated, create or update it ("No
// updates are to be performed" is no change), wait for it with progress,
// name the first failed resource of a failed operation, and delete it.
//
// Its errors never carry CloudFormation's message text (which can quote
// the request): a failed call is an *APIError (the operation, the error
// code, the HTTP status), a stack that refused or failed an operation an
// *Error (its status, the first failed resource and its one-line reason).
package cfnstack

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation"
	cfntypes "github.com/aws/aws-sdk-go-v2/service/cloudformation/types"
	"github.com/aws/smithy-go"

	"github.com/rayito-dev/rayito/cli/internal/awsenv"
)

// The back-off of every wait on CloudFormation: the first poll after
// PollFirst, doubling, at most PollMax apart. Tests shorten them.
var (
	PollFirst = 2 * time.Second
	PollMax   = 10 * time.Second
)

// API is the CloudFormation calls this package makes
// (*cloudformation.Client has them).
type API interface {
	DescribeStacks(ctx context.Context, in *cloudformation.DescribeStacksInput, opts ...func(*cloudformation.Options)) (*cloudformation.DescribeStacksOutput, error)
	DescribeStackEvents(ctx context.Context, in *cloudformation.DescribeStackEventsInput, opts ...func(*cloudformation.Options)) (*cloudformation.DescribeStackEventsOutput, error)
	CreateStack(ctx context.Context, in *cloudformation.CreateStackInput, opts ...func(*cloudformation.Options)) (*cloudformation.CreateStackOutput, error)
	UpdateStack(ctx context.Context, in *cloudformation.UpdateStackInput, opts ...func(*cloudformation.Options)) (*cloudformation.UpdateStackOutput, error)
	DeleteStack(ctx context.Context, in *cloudformation.DeleteStackInput, opts ...func(*cloudformation.Options)) (*cloudformation.DeleteStackOutput, error)
}

// Reason is what an *Error says went wrong (blocked, not_found, failed).
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

// TimeoutError is a wait that passed its bound: the operation goes on.
type TimeoutError struct {
	Stack  string
	Wait   time.Duration
	Status cfntypes.StackStatus // as last seen; "" if never
	Action string               // create, update or delete
}

func (e *TimeoutError) Error() string {
	s := string(e.Status)
	if s == "" {
		s = "in progress"
	}
	return fmt.Sprintf("stack %s: still %s after %s; the %s goes on", e.Stack, s, e.Wait, e.Action)
}

// The ValidationError messages that mean something to callers, matched
// (never printed) by Sanitize.
var (
	// ErrStackMissing: no such stack.
	ErrStackMissing = errors.New("stack does not exist")
	// ErrNoUpdates: an update that changes nothing.
	ErrNoUpdates = errors.New("no updates are to be performed")
)

// cfnError is Sanitize's result: the printable *APIError, and which of
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

// Sanitize turns a CloudFormation client error into one that matches an
// *APIError (and ErrStackMissing or ErrNoUpdates when the service's
// message says so); nil stays nil and ctx's own errors pass through.
func Sanitize(op string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	f := awsenv.Inspect(err)
	e := &APIError{Operation: op, Status: f.Status, Code: f.Code, Network: f.Network}
	var kind error
	var ae smithy.APIError
	if errors.As(err, &ae) && ae.ErrorCode() == "ValidationError" {
		msg := strings.ToLower(ae.ErrorMessage())
		switch {
		case strings.Contains(msg, "does not exist"):
			kind = ErrStackMissing
		case strings.Contains(msg, "no updates are to be performed"):
			kind = ErrNoUpdates
		}
	}
	return &cfnError{APIError: e, kind: kind}
}

// Describe returns the stack named (or with the id) name, or an error
// that is ErrStackMissing when there is none.
func Describe(ctx context.Context, c API, name string) (*cfntypes.Stack, error) {
	out, err := c.DescribeStacks(ctx, &cloudformation.DescribeStacksInput{StackName: aws.String(name)})
	if err != nil {
		return nil, Sanitize("DescribeStacks", err)
	}
	if len(out.Stacks) == 0 {
		return nil, ErrStackMissing
	}
	return &out.Stacks[0], nil
}

// InProgress reports a status during which CloudFormation refuses a new
// operation (REVIEW_IN_PROGRESS: a change set's stack, not created yet).
func InProgress(s cfntypes.StackStatus) bool {
	return strings.HasSuffix(string(s), "_IN_PROGRESS")
}

// Succeeded reports the statuses that end an operation well.
func Succeeded(s cfntypes.StackStatus) bool {
	switch s {
	case cfntypes.StackStatusCreateComplete, cfntypes.StackStatusUpdateComplete,
		cfntypes.StackStatusDeleteComplete, cfntypes.StackStatusImportComplete:
		return true
	}
	return false
}

// Outputs returns the stack's outputs as a map.
func Outputs(st *cfntypes.Stack) map[string]string {
	m := map[string]string{}
	for _, o := range st.Outputs {
		if o.OutputKey != nil {
			m[*o.OutputKey] = aws.ToString(o.OutputValue)
		}
	}
	return m
}

// Commands are the commands an *Error's Detail tells the user to run.
type Commands struct {
	// Status shows the stack (e.g. "rayito stack status events").
	Status string
	// Destroy deletes it (e.g. "rayito stack destroy events --stack-name N").
	Destroy string
}

// CanUpdate refuses a stack that has an operation in progress or that
// cannot be updated (a failed creation, a failed rollback), before
// anything is uploaded.
func CanUpdate(name string, st *cfntypes.Stack, cmds Commands) error {
	status := st.StackStatus
	switch {
	case InProgress(status):
		return &Error{Stack: name, Reason: ReasonBlocked, Status: string(status),
			Detail: "an operation is in progress: wait for it to end ('" + cmds.Status + "'), then deploy again; nothing was uploaded"}
	case status == cfntypes.StackStatusRollbackComplete || status == cfntypes.StackStatusRollbackFailed ||
		status == cfntypes.StackStatusCreateFailed || status == cfntypes.StackStatusDeleteFailed:
		return &Error{Stack: name, Reason: ReasonBlocked, Status: string(status),
			Detail: "its creation failed and it cannot be updated: run '" + cmds.Destroy + "', then deploy again"}
	case status == cfntypes.StackStatusUpdateRollbackFailed:
		return &Error{Stack: name, Reason: ReasonBlocked, Status: string(status),
			Detail: "continue its rollback first (aws cloudformation continue-update-rollback --stack-name " + name + ")"}
	}
	return nil
}

// NewToken returns a fresh ClientRequestToken: the stack's events of
// this operation carry it.
func NewToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return "rayito-" + hex.EncodeToString(b[:])
}

// backoff returns the successive waits: PollFirst, doubling, capped at
// PollMax.
type backoff struct{ next time.Duration }

func (b *backoff) wait(ctx context.Context) error {
	if b.next == 0 {
		b.next = PollFirst
	}
	t := time.NewTimer(b.next)
	defer t.Stop()
	b.next = min(b.next*2, PollMax)
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Wait polls the stack id with back-off until its status is not in
// progress, writing each new status on progress (stderr), and returns the
// stack as it ended; ctx bounds the wait. On an error it returns the
// stack as last seen (nil if never).
func Wait(ctx context.Context, c API, id string, progress io.Writer) (*cfntypes.Stack, error) {
	var (
		b     backoff
		last  cfntypes.StackStatus
		seen  *cfntypes.Stack
		start = time.Now()
	)
	for {
		st, err := Describe(ctx, c, id)
		if err != nil {
			return seen, err
		}
		seen = st
		if !InProgress(st.StackStatus) {
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

// Failure builds the *Error of an operation (token) that ended in status:
// the first resource whose status failed in it, read from the stack's
// events (newest first, at most maxEventPages pages).
func Failure(ctx context.Context, c API, name, id, token string, status cfntypes.StackStatus, detail string) error {
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
		e.ResourceReason = OneLine(aws.ToString(first.ResourceStatusReason), 300)
	}
	return e
}

const maxEventPages = 10

// OneLine keeps s printable: control characters become spaces, and it is
// cut at n bytes (on a rune boundary) with "...".
func OneLine(s string, n int) string {
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

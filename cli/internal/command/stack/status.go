package stack

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	cfntypes "github.com/aws/aws-sdk-go-v2/service/cloudformation/types"
	"github.com/urfave/cli/v3"

	"github.com/rayito-dev/rayito/cli/internal/cfnstack"
	"github.com/rayito-dev/rayito/cli/internal/cliutil"
	evstack "github.com/rayito-dev/rayito/events/stack"
)

// statusOut is `stack status events --json`.
type statusOut struct {
	StackName   string            `json:"stack_name"`
	StackID     string            `json:"stack_id"`
	Region      string            `json:"region"`
	Status      string            `json:"status"`
	CreatedAt   *time.Time        `json:"created_at,omitempty"`
	UpdatedAt   *time.Time        `json:"updated_at,omitempty"`
	Outputs     map[string]string `json:"outputs"`
	EventsStack bool              `json:"events_stack"` // its template is the events stack's
}

func statusCommand(f *cliutil.Factory) *cli.Command {
	return &cli.Command{
		Name:  "status",
		Usage: "show a stack of your AWS account",
		Commands: []*cli.Command{{
			Name:        "events",
			Usage:       "show the events stack: its status and outputs",
			Description: "Exit codes: 0 the stack exists (whatever its status), 1 a failure or no such stack (not_found), 2 usage.",
			Flags:       []cli.Flag{nameFlag(), cliutil.JSONFlag()},
			Action: func(ctx context.Context, cmd *cli.Command) error {
				if err := noArgs(cmd); err != nil {
					return err
				}
				name, err := stackName(cmd)
				if err != nil {
					return err
				}
				return cliutil.Interrupted(ctx, status(ctx, f, name, cmd.Bool("json")))
			},
		}},
	}
}

func status(ctx context.Context, f *cliutil.Factory, name string, asJSON bool) error {
	aw, err := loadAWS(ctx)
	if err != nil {
		return err
	}
	st, err := cfnstack.Describe(ctx, aw.cfn, name)
	switch {
	case errors.Is(err, cfnstack.ErrStackMissing):
		return notFound(name, aw.region)
	case err != nil:
		return err
	}
	out := statusOut{StackName: name, StackID: aws.ToString(st.StackId), Region: aw.region, Status: string(st.StackStatus),
		CreatedAt: st.CreationTime, UpdatedAt: st.LastUpdatedTime, Outputs: cfnstack.Outputs(st),
		EventsStack: strings.HasPrefix(aws.ToString(st.Description), evstack.DescriptionPrefix)}
	if asJSON {
		return cliutil.PrintJSON(f.IO.Out, out)
	}
	w := f.IO.Out
	fmt.Fprintf(w, "stack:   %s\nregion:  %s\nstatus:  %s\n", name, aw.region, out.Status)
	if !out.EventsStack {
		fmt.Fprintln(w, "note:    not an events stack (another template)")
	}
	if len(out.Outputs) > 0 {
		fmt.Fprintln(w, "outputs:")
		var b strings.Builder
		printOutputs(&b, out.Outputs)
		for line := range strings.Lines(b.String()) {
			fmt.Fprint(w, "  "+line)
		}
	}
	return nil
}

// destroyOut is `stack destroy events --json`.
type destroyOut struct {
	StackName string        `json:"stack_name"`
	StackID   string        `json:"stack_id"`
	Region    string        `json:"region"`
	Status    string        `json:"status"`
	Retained  []retainedOut `json:"retained"`
}

// retainedOut is a resource the template keeps when the stack is deleted.
type retainedOut struct {
	Type   string `json:"type"`
	Name   string `json:"name"`
	Remove string `json:"remove"` // the command that deletes it
}

// stdinIsTerminal is whether destroy may ask; tests replace it.
var stdinIsTerminal = func(r io.Reader) bool { return cliutil.IsTerminal(r) }

func destroyCommand(f *cliutil.Factory) *cli.Command {
	return &cli.Command{
		Name:  "destroy",
		Usage: "delete a stack of your AWS account",
		Commands: []*cli.Command{{
			Name:  "events",
			Usage: "delete the events stack and wait for it; the stack key secret and the events table are kept",
			Description: "Deletes the stack's functions, queues, schedule, subscription and policies. The stack key\n" +
				"secret and the events table are retained (DeletionPolicy: Retain): it prints the commands that\n" +
				"delete them. It asks first when stdin is a terminal; otherwise --yes is required.\n" +
				"\n" +
				"Exit codes: 0 deleted, 1 a failure (not_found, blocked, or DELETE_FAILED naming the first\n" +
				"resource that failed), 2 usage (no --yes), 124 --wait-timeout passed (the deletion goes on).",
			Flags: []cli.Flag{
				nameFlag(),
				&cli.BoolFlag{Name: "yes", Aliases: []string{"y"}, Usage: "delete without asking"},
				&cli.DurationFlag{Name: "wait-timeout", Value: 30 * time.Minute, Usage: "wait at most this `DURATION` for the deletion"},
				cliutil.JSONFlag(),
			},
			Action: func(ctx context.Context, cmd *cli.Command) error {
				if err := noArgs(cmd); err != nil {
					return err
				}
				name, err := stackName(cmd)
				if err != nil {
					return err
				}
				wait := cmd.Duration("wait-timeout")
				if wait <= 0 {
					return cliutil.Usagef("--wait-timeout must be positive")
				}
				yes := cmd.Bool("yes")
				if !yes && !stdinIsTerminal(f.IO.In) {
					return cliutil.Usagef("refusing to delete stack %s without --yes (stdin is not a terminal to ask on)", name)
				}
				return cliutil.Interrupted(ctx, destroy(ctx, f, name, yes, wait, cmd.Bool("json")))
			},
		}},
	}
}

func destroy(ctx context.Context, f *cliutil.Factory, name string, yes bool, wait time.Duration, asJSON bool) error {
	aw, err := loadAWS(ctx)
	if err != nil {
		return err
	}
	st, err := cfnstack.Describe(ctx, aw.cfn, name)
	switch {
	case errors.Is(err, cfnstack.ErrStackMissing):
		return notFound(name, aw.region)
	case err != nil:
		return err
	case cfnstack.InProgress(st.StackStatus) && st.StackStatus != cfntypes.StackStatusDeleteInProgress:
		return &Error{Stack: name, Reason: ReasonBlocked, Status: string(st.StackStatus),
			Detail: "an operation is in progress: wait for it to end ('rayito stack status events'), then destroy again"}
	case !strings.HasPrefix(aws.ToString(st.Description), evstack.DescriptionPrefix):
		return &Error{Stack: name, Reason: ReasonBlocked, Status: string(st.StackStatus),
			Detail: "it is not an events stack (another template): nothing was deleted"}
	}
	if !yes {
		fmt.Fprintf(f.IO.Err, "Delete stack %s (%s) in %s? The stack key secret and the events table are kept. [y/N] ",
			name, st.StackStatus, aw.region)
		line, _ := bufio.NewReader(f.IO.In).ReadString('\n')
		if a := strings.ToLower(strings.TrimSpace(line)); a != "y" && a != "yes" {
			return errors.New("not deleted: the answer was not yes")
		}
	}
	id := aws.ToString(st.StackId)
	retained := retainedOf(name, aw.region, st)
	final, err := cfnstack.Delete(ctx, aw.cfn, name, st, wait, f.IO.Err)
	var te *cfnstack.TimeoutError
	if errors.As(err, &te) {
		return timeoutExit(name, wait, te.Status, "the deletion")
	}
	if err != nil {
		return err
	}
	out := destroyOut{StackName: name, StackID: id, Region: aw.region, Status: string(final.StackStatus), Retained: retained}
	if asJSON {
		return cliutil.PrintJSON(f.IO.Out, out)
	}
	fmt.Fprintf(f.IO.Out, "stack %s: deleted\n", name)
	fmt.Fprintln(f.IO.Out, "Retained (DeletionPolicy: Retain); to remove them too:")
	for _, r := range retained {
		fmt.Fprintf(f.IO.Out, "  %s %s:\n    %s\n", r.Type, r.Name, r.Remove)
	}
	return nil
}

// retainedOf lists the resources of st that outlive it: the stack key
// secret and the events table (its name from the outputs).
func retainedOf(name, region string, st *cfntypes.Stack) []retainedOut {
	secret := evstack.StackKeySecretName(name)
	rs := []retainedOut{{
		Type: "AWS::SecretsManager::Secret", Name: secret,
		Remove: "aws secretsmanager delete-secret --region " + region + " --secret-id " + secret + " --recovery-window-in-days 7",
	}}
	if table := cfnstack.Outputs(st)[evstack.OutputEventsTableName]; table != "" {
		rs = append(rs, retainedOut{
			Type: "AWS::DynamoDB::Table", Name: table,
			Remove: "aws dynamodb delete-table --region " + region + " --table-name " + table,
		})
	} else {
		rs = append(rs, retainedOut{
			Type: "AWS::DynamoDB::Table", Name: "(the stack had no EventsTableName output)",
			Remove: "find it with: aws dynamodb list-tables --region " + region + " (its name begins with " + name + "-EventsTable)",
		})
	}
	return rs
}

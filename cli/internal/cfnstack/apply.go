package cfnstack

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation"
	cfntypes "github.com/aws/aws-sdk-go-v2/service/cloudformation/types"
)

// The actions of a Result.
const (
	ActionCreate = "create"
	ActionUpdate = "update"
	ActionNone   = "none"
)

// ApplyInput is a stack to create or update.
type ApplyInput struct {
	Name         string
	Template     string
	Parameters   []cfntypes.Parameter
	Capabilities []cfntypes.Capability
	// Existing is the stack as Describe found it (already through
	// CanUpdate), nil to create it.
	Existing *cfntypes.Stack
	// WaitTimeout bounds the wait (a *TimeoutError after it).
	WaitTimeout time.Duration
	// Progress receives one line per status (stderr).
	Progress io.Writer
	// Commands name what to run in a failure's Detail.
	Commands Commands
}

// Result is what Apply did.
type Result struct {
	StackID string
	// Action is ActionCreate, ActionUpdate or ActionNone (nothing to
	// update).
	Action string
	// Stack is the stack as it ended.
	Stack *cfntypes.Stack
}

// Apply creates the stack (in.Existing nil) or updates it, and waits for
// the operation to end. An update with nothing to change is ActionNone.
// Its errors: *Error (blocked: created meanwhile by someone else; failed:
// with the first failed resource), *APIError, *TimeoutError, ctx's.
func Apply(ctx context.Context, c API, in ApplyInput) (*Result, error) {
	token := NewToken()
	res := &Result{}
	if in.Existing == nil {
		out, err := c.CreateStack(ctx, &cloudformation.CreateStackInput{
			StackName:          aws.String(in.Name),
			TemplateBody:       aws.String(in.Template),
			Parameters:         in.Parameters,
			Capabilities:       in.Capabilities,
			ClientRequestToken: aws.String(token),
		})
		if err != nil {
			err = Sanitize("CreateStack", err)
			var ae *APIError
			if errors.As(err, &ae) && ae.Code == "AlreadyExistsException" {
				return nil, &Error{Stack: in.Name, Reason: ReasonBlocked, Detail: "it was created by someone else meanwhile: deploy again to update it"}
			}
			return nil, err
		}
		res.StackID, res.Action = aws.ToString(out.StackId), ActionCreate
		fmt.Fprintf(in.Progress, "stack %s: creating\n", in.Name)
	} else {
		out, err := c.UpdateStack(ctx, &cloudformation.UpdateStackInput{
			StackName:          aws.String(in.Name),
			TemplateBody:       aws.String(in.Template),
			Parameters:         in.Parameters,
			Capabilities:       in.Capabilities,
			ClientRequestToken: aws.String(token),
		})
		switch err = Sanitize("UpdateStack", err); {
		case errors.Is(err, ErrNoUpdates):
			fmt.Fprintf(in.Progress, "stack %s: no changes, %s\n", in.Name, in.Existing.StackStatus)
			return &Result{StackID: aws.ToString(in.Existing.StackId), Action: ActionNone, Stack: in.Existing}, nil
		case err != nil:
			return nil, err
		}
		res.StackID, res.Action = aws.ToString(out.StackId), ActionUpdate
		fmt.Fprintf(in.Progress, "stack %s: updating\n", in.Name)
	}
	wctx, cancel := context.WithTimeout(ctx, in.WaitTimeout)
	defer cancel()
	final, err := Wait(wctx, c, res.StackID, in.Progress)
	if err != nil {
		if ctx.Err() == nil && wctx.Err() != nil {
			te := &TimeoutError{Stack: in.Name, Wait: in.WaitTimeout, Action: res.Action}
			if final != nil {
				te.Status = final.StackStatus
			}
			return nil, te
		}
		return nil, err
	}
	if !Succeeded(final.StackStatus) || final.StackStatus == cfntypes.StackStatusDeleteComplete {
		detail := ""
		if final.StackStatus == cfntypes.StackStatusRollbackComplete || final.StackStatus == cfntypes.StackStatusRollbackFailed {
			detail = "the stack cannot be updated: fix the cause, run '" + in.Commands.Destroy + "', then deploy again"
		}
		return nil, Failure(ctx, c, in.Name, res.StackID, token, final.StackStatus, detail)
	}
	res.Stack = final
	return res, nil
}

// Delete deletes the stack st (as Describe found it; one already being
// deleted is only waited for) and waits until it is gone. Its errors:
// *Error (failed: DELETE_FAILED with the first failed resource),
// *APIError, *TimeoutError (Action "deletion"), ctx's.
func Delete(ctx context.Context, c API, name string, st *cfntypes.Stack, wait time.Duration, progress io.Writer) (*cfntypes.Stack, error) {
	id := aws.ToString(st.StackId)
	token := NewToken()
	if st.StackStatus != cfntypes.StackStatusDeleteInProgress {
		if _, err := c.DeleteStack(ctx, &cloudformation.DeleteStackInput{
			StackName: aws.String(id), ClientRequestToken: aws.String(token),
		}); err != nil {
			return nil, Sanitize("DeleteStack", err)
		}
		fmt.Fprintf(progress, "stack %s: deleting\n", name)
	} else {
		token = ""
	}
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	final, err := Wait(wctx, c, id, progress)
	if err != nil {
		if ctx.Err() == nil && wctx.Err() != nil {
			te := &TimeoutError{Stack: name, Wait: wait, Action: "deletion"}
			if final != nil {
				te.Status = final.StackStatus
			}
			return nil, te
		}
		return nil, err
	}
	if final.StackStatus != cfntypes.StackStatusDeleteComplete {
		return nil, Failure(ctx, c, name, id, token, final.StackStatus, "")
	}
	return final, nil
}

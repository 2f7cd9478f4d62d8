package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/bedrockagentcore"
	"github.com/urfave/cli/v3"

	"github.com/rayito-dev/rayito/agenthost/agentcore"
	"github.com/rayito-dev/rayito/cli/internal/cfnstack"
	"github.com/rayito-dev/rayito/cli/internal/cliutil"
)

// sessionRE is an AgentCore runtime session id: at least 33 characters
// (AgentCore's minimum), at most 256, of letters, digits, - and _.
// Compiled on first use (sync.OnceValue): a counted repetition such as
// {1,512} compiles to a program of hundreds of KB, which every start of
// the CLI would otherwise build.
var sessionRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9_-]{33,256}$`) })

// newSessionID is a new runtime session id: "rayito-" and 32 random hex
// digits (39 characters).
func newSessionID() (string, error) {
	t, err := newToken()
	if err != nil {
		return "", err
	}
	return "rayito-" + t[:32], nil
}

// invokeAgentCore sends payload to the record's runtime
// (bedrock-agentcore InvokeAgentRuntime, SigV4: no token) and streams the
// answer to stdout; --json wraps it once it has ended.
func invokeAgentCore(ctx context.Context, f *cliutil.Factory, cmd *cli.Command, r *record, payload []byte) error {
	session := cmd.String("session")
	if session == "" {
		var err error
		if session, err = newSessionID(); err != nil {
			return err
		}
	} else if !sessionRE().MatchString(session) {
		return cliutil.Usagef("--session: 33 to 256 letters, digits, - or _ (AgentCore's runtime session id)")
	}
	aw, err := loadAgentCoreAWS(ctx, r.Region)
	if err != nil {
		return err
	}
	out, err := bedrockagentcore.NewFromConfig(aw.cfg).InvokeAgentRuntime(ctx, &bedrockagentcore.InvokeAgentRuntimeInput{
		AgentRuntimeArn: aws.String(r.RuntimeARN), Payload: payload, ContentType: aws.String("application/json"),
		Accept: aws.String("application/json, text/event-stream"), RuntimeSessionId: aws.String(session),
	})
	if err != nil {
		return cliutil.Interrupted(ctx, fmt.Errorf("agent %s: %w", r.Name, awsFailure("bedrock-agentcore:InvokeAgentRuntime", err)))
	}
	defer out.Response.Close()
	if cmd.Bool("json") {
		b, err := io.ReadAll(io.LimitReader(out.Response, maxPayloadBytes))
		if err != nil {
			return cliutil.Interrupted(ctx, err)
		}
		status := 200
		if out.StatusCode != nil {
			status = int(*out.StatusCode)
		}
		res := map[string]any{"agent": r.Name, "status": status, "content_type": aws.ToString(out.ContentType), "session_id": session}
		if json.Valid(b) {
			res["answer"] = json.RawMessage(b)
		} else {
			res["answer_text"] = string(b)
		}
		return cliutil.PrintJSON(f.IO.Out, res)
	}
	fmt.Fprintf(f.IO.Err, "agent %s: session %s (--session to continue it)\n", r.Name, session)
	_, err = io.Copy(f.IO.Out, out.Response)
	return cliutil.Interrupted(ctx, err)
}

// deleteAgentCore deletes what deploy created for name on AgentCore: the
// preflight again (a runtime without Rayito's marker, name_conflict, or
// one a CDK stack declares, cdk_managed, is refused before anything is
// written), the runtime (waited until gone), the stack (its repository
// has EmptyOnDelete) and the record.
func deleteAgentCore(ctx context.Context, f *cliutil.Factory, cmd *cli.Command, name, region string) error {
	wait := cmd.Duration("wait-timeout")
	if wait <= 0 {
		return cliutil.Usagef("--wait-timeout must be positive")
	}
	aw, err := loadAgentCoreAWS(ctx, region)
	if err != nil {
		return err
	}
	pl := agentcore.Names(name)
	ex, err := preflight(ctx, aw, pl)
	if err != nil {
		return err
	}
	st, err := cfnstack.Describe(ctx, aw.cfn, pl.Stack)
	switch {
	case errors.Is(err, cfnstack.ErrStackMissing):
		st = nil
	case err != nil:
		return cliutil.Interrupted(ctx, err)
	case !strings.HasPrefix(aws.ToString(st.Description), stackDescriptionPrefix):
		return &cfnstack.Error{Stack: pl.Stack, Reason: cfnstack.ReasonBlocked, Status: string(st.StackStatus),
			Detail: "it is not an agent stack (another template): nothing was deleted"}
	}
	out := map[string]any{"name": name, "target": targetAgentCore, "region": region, "runtime_deleted": false, "stack_deleted": false}
	if ex.RuntimeID != "" {
		wctx, cancel := context.WithTimeout(ctx, wait)
		err := agentcore.DeleteRuntime(wctx, aw.control, ex.RuntimeID, f.IO.Err)
		cancel()
		if err != nil {
			if ctx.Err() == nil && wctx.Err() != nil {
				return cli.Exit(fmt.Sprintf("runtime %s: not deleted after %s (--wait-timeout); the deletion goes on", ex.RuntimeID, wait), cliutil.ExitTimeout)
			}
			var re *agentcore.RuntimeError
			if !errors.As(err, &re) {
				err = awsFailure("bedrock-agentcore-control:DeleteAgentRuntime", err)
			}
			return cliutil.Interrupted(ctx, err)
		}
		out["runtime_deleted"] = true
	}
	if st != nil {
		_, err := cfnstack.Delete(ctx, aw.cfn, pl.Stack, st, wait, f.IO.Err)
		var te *cfnstack.TimeoutError
		if errors.As(err, &te) {
			return cli.Exit(te.Error()+" (--wait-timeout)", cliutil.ExitTimeout)
		}
		if err != nil {
			return cliutil.Interrupted(ctx, err)
		}
		out["stack_deleted"] = true
	}
	if err := removeRecord(f, name); err != nil {
		return err
	}
	if cmd.Bool("json") {
		return cliutil.PrintJSON(f.IO.Out, out)
	}
	fmt.Fprintf(f.IO.Out, "agent %s: deleted from AgentCore in %s (runtime and stack %s)\n", name, region, pl.Stack)
	return nil
}

// deleteFlags are delete's AgentCore flags.
func deleteFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "target", Usage: "`TARGET` agentcore: an AgentCore agent this machine has no record of (with --region)"},
		&cli.StringFlag{Name: "region", Usage: "AgentCore's `REGION` (agentcore; default AWS_REGION)"},
		&cli.DurationFlag{Name: "wait-timeout", Value: 30 * time.Minute, Usage: "wait at most `DURATION` for the runtime and the stack each (agentcore)"},
	}
}

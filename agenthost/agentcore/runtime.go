package agentcore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/bedrockagentcorecontrol"
	"github.com/aws/aws-sdk-go-v2/service/bedrockagentcorecontrol/types"
)

// RuntimeAPI is the AgentCore control plane calls a deploy and a delete
// make (*bedrockagentcorecontrol.Client has them).
type RuntimeAPI interface {
	ControlAPI
	CreateAgentRuntime(ctx context.Context, in *bedrockagentcorecontrol.CreateAgentRuntimeInput, opts ...func(*bedrockagentcorecontrol.Options)) (*bedrockagentcorecontrol.CreateAgentRuntimeOutput, error)
	UpdateAgentRuntime(ctx context.Context, in *bedrockagentcorecontrol.UpdateAgentRuntimeInput, opts ...func(*bedrockagentcorecontrol.Options)) (*bedrockagentcorecontrol.UpdateAgentRuntimeOutput, error)
	GetAgentRuntime(ctx context.Context, in *bedrockagentcorecontrol.GetAgentRuntimeInput, opts ...func(*bedrockagentcorecontrol.Options)) (*bedrockagentcorecontrol.GetAgentRuntimeOutput, error)
	DeleteAgentRuntime(ctx context.Context, in *bedrockagentcorecontrol.DeleteAgentRuntimeInput, opts ...func(*bedrockagentcorecontrol.Options)) (*bedrockagentcorecontrol.DeleteAgentRuntimeOutput, error)
}

// The runtime's closed failure code.
const CodeRuntimeFailed = "runtime_failed"

// RuntimeSpec is what a runtime runs: the image by digest, the role and
// the environment of the plan (names and ARNs, never a value).
type RuntimeSpec struct {
	ContainerURI string
	RoleARN      string
	Environment  map[string]string
}

// RuntimeRef names a runtime.
type RuntimeRef struct {
	ID, ARN string
}

// Poll is the interval of the runtime waits (tests shorten it).
var Poll = 2 * time.Second

func artifact(s RuntimeSpec) types.AgentRuntimeArtifact {
	return &types.AgentRuntimeArtifactMemberContainerConfiguration{Value: types.ContainerConfiguration{ContainerUri: aws.String(s.ContainerURI)}}
}

func network() *types.NetworkConfiguration {
	return &types.NetworkConfiguration{NetworkMode: types.NetworkModePublic}
}

func protocol() *types.ProtocolConfiguration {
	return &types.ProtocolConfiguration{ServerProtocol: types.ServerProtocolHttp}
}

func env(s RuntimeSpec) map[string]string {
	if len(s.Environment) == 0 {
		return nil
	}
	return s.Environment
}

// CreateRuntime creates the plan's runtime (description Marker, PUBLIC
// network, HTTP protocol, the plan's environment); clientToken makes a
// retry idempotent.
func CreateRuntime(ctx context.Context, c RuntimeAPI, pl *Plan, s RuntimeSpec, clientToken string) (RuntimeRef, error) {
	out, err := c.CreateAgentRuntime(ctx, &bedrockagentcorecontrol.CreateAgentRuntimeInput{
		AgentRuntimeName:      aws.String(pl.Runtime),
		Description:           aws.String(Marker),
		RoleArn:               aws.String(s.RoleARN),
		AgentRuntimeArtifact:  artifact(s),
		NetworkConfiguration:  network(),
		ProtocolConfiguration: protocol(),
		EnvironmentVariables:  env(s),
		ClientToken:           aws.String(clientToken),
	})
	if err != nil {
		return RuntimeRef{}, err
	}
	return RuntimeRef{ID: aws.ToString(out.AgentRuntimeId), ARN: aws.ToString(out.AgentRuntimeArn)}, nil
}

// UpdateRuntime points the runtime id at s (a new version), with
// MMDSv2 required.
func UpdateRuntime(ctx context.Context, c RuntimeAPI, id string, s RuntimeSpec, clientToken string) (RuntimeRef, error) {
	out, err := c.UpdateAgentRuntime(ctx, &bedrockagentcorecontrol.UpdateAgentRuntimeInput{
		AgentRuntimeId:        aws.String(id),
		Description:           aws.String(Marker),
		RoleArn:               aws.String(s.RoleARN),
		AgentRuntimeArtifact:  artifact(s),
		NetworkConfiguration:  network(),
		ProtocolConfiguration: protocol(),
		EnvironmentVariables:  env(s),
		MetadataConfiguration: &types.RuntimeMetadataConfiguration{RequireMMDSV2: aws.Bool(true)},
		ClientToken:           aws.String(clientToken),
	})
	if err != nil {
		return RuntimeRef{}, err
	}
	return RuntimeRef{ID: aws.ToString(out.AgentRuntimeId), ARN: aws.ToString(out.AgentRuntimeArn)}, nil
}

// RuntimeError is a runtime that ended in a failed status.
type RuntimeError struct {
	ID     string
	Status string
	// Reason is AgentCore's failure reason when it is a plain code
	// (letters, digits, . _ -); free text is not printed.
	Reason string
}

func (e *RuntimeError) Error() string {
	s := fmt.Sprintf("%s: runtime %s is %s", CodeRuntimeFailed, e.ID, e.Status)
	if e.Reason != "" {
		s += " (" + e.Reason + ")"
	}
	return s + "; its failure reason: aws bedrock-agentcore-control get-agent-runtime --agent-runtime-id " + e.ID
}

// Is matches ErrPlan (a closed code).
func (e *RuntimeError) Is(target error) bool { return target == ErrPlan }

func plainCode(s string) string {
	if s == "" || len(s) > 64 {
		return ""
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
			return ""
		}
	}
	return s
}

// WaitReady polls the runtime until it is READY (a *RuntimeError when it
// fails), writing each new status on progress; ctx bounds it.
func WaitReady(ctx context.Context, c RuntimeAPI, id string, progress io.Writer) (*bedrockagentcorecontrol.GetAgentRuntimeOutput, error) {
	var last types.AgentRuntimeStatus
	for {
		out, err := c.GetAgentRuntime(ctx, &bedrockagentcorecontrol.GetAgentRuntimeInput{AgentRuntimeId: aws.String(id)})
		if err != nil {
			return nil, err
		}
		switch out.Status {
		case types.AgentRuntimeStatusReady:
			return out, nil
		case types.AgentRuntimeStatusCreateFailed, types.AgentRuntimeStatusUpdateFailed, types.AgentRuntimeStatusDeleteFailed:
			return nil, &RuntimeError{ID: id, Status: string(out.Status), Reason: plainCode(aws.ToString(out.FailureReason))}
		}
		if out.Status != last {
			last = out.Status
			fmt.Fprintf(progress, "runtime %s: %s\n", id, last)
		}
		if err := Sleep(ctx, Poll); err != nil {
			return nil, err
		}
	}
}

// MMDSv2 reports whether the runtime as got requires MMDSv2.
func MMDSv2(got *bedrockagentcorecontrol.GetAgentRuntimeOutput) bool {
	return got.MetadataConfiguration != nil && aws.ToBool(got.MetadataConfiguration.RequireMMDSV2)
}

// DeleteRuntime deletes the runtime id and waits until GetAgentRuntime
// says it is gone (ResourceNotFoundException); ctx bounds it.
func DeleteRuntime(ctx context.Context, c RuntimeAPI, id string, progress io.Writer) error {
	_, err := c.DeleteAgentRuntime(ctx, &bedrockagentcorecontrol.DeleteAgentRuntimeInput{AgentRuntimeId: aws.String(id)})
	var nf *types.ResourceNotFoundException
	switch {
	case errors.As(err, &nf):
		return nil
	case err != nil:
		return err
	}
	fmt.Fprintf(progress, "runtime %s: deleting\n", id)
	for {
		out, err := c.GetAgentRuntime(ctx, &bedrockagentcorecontrol.GetAgentRuntimeInput{AgentRuntimeId: aws.String(id)})
		switch {
		case errors.As(err, &nf):
			return nil
		case err != nil:
			return err
		case out.Status == types.AgentRuntimeStatusDeleteFailed:
			return &RuntimeError{ID: id, Status: string(out.Status), Reason: plainCode(aws.ToString(out.FailureReason))}
		}
		if err := Sleep(ctx, Poll); err != nil {
			return err
		}
	}
}

// Sleep waits d, or until ctx ends (then its error): the pause between
// two polls of a deploy (the runtime's status here, the image build's in
// the CLI).
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

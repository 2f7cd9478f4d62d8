package agentcore

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/bedrockagentcorecontrol"
	"github.com/aws/aws-sdk-go-v2/service/bedrockagentcorecontrol/types"
)

// fakeControl answers GetAgentRuntime from gets (then not found) and
// records the updates and deletes.
type fakeControl struct {
	gets    []*bedrockagentcorecontrol.GetAgentRuntimeOutput
	updates []*bedrockagentcorecontrol.UpdateAgentRuntimeInput
	deletes int
	delErr  error
}

func (f *fakeControl) ListAgentRuntimes(context.Context, *bedrockagentcorecontrol.ListAgentRuntimesInput, ...func(*bedrockagentcorecontrol.Options)) (*bedrockagentcorecontrol.ListAgentRuntimesOutput, error) {
	return &bedrockagentcorecontrol.ListAgentRuntimesOutput{}, nil
}

func (f *fakeControl) CreateAgentRuntime(_ context.Context, in *bedrockagentcorecontrol.CreateAgentRuntimeInput, _ ...func(*bedrockagentcorecontrol.Options)) (*bedrockagentcorecontrol.CreateAgentRuntimeOutput, error) {
	return &bedrockagentcorecontrol.CreateAgentRuntimeOutput{AgentRuntimeId: aws.String("rt-1"), AgentRuntimeArn: aws.String("arn:rt-1")}, nil
}

func (f *fakeControl) UpdateAgentRuntime(_ context.Context, in *bedrockagentcorecontrol.UpdateAgentRuntimeInput, _ ...func(*bedrockagentcorecontrol.Options)) (*bedrockagentcorecontrol.UpdateAgentRuntimeOutput, error) {
	f.updates = append(f.updates, in)
	return &bedrockagentcorecontrol.UpdateAgentRuntimeOutput{AgentRuntimeId: in.AgentRuntimeId, AgentRuntimeArn: aws.String("arn:rt-1")}, nil
}

func (f *fakeControl) GetAgentRuntime(context.Context, *bedrockagentcorecontrol.GetAgentRuntimeInput, ...func(*bedrockagentcorecontrol.Options)) (*bedrockagentcorecontrol.GetAgentRuntimeOutput, error) {
	if len(f.gets) == 0 {
		return nil, &types.ResourceNotFoundException{Message: aws.String("gone")}
	}
	g := f.gets[0]
	f.gets = f.gets[1:]
	return g, nil
}

func (f *fakeControl) DeleteAgentRuntime(context.Context, *bedrockagentcorecontrol.DeleteAgentRuntimeInput, ...func(*bedrockagentcorecontrol.Options)) (*bedrockagentcorecontrol.DeleteAgentRuntimeOutput, error) {
	f.deletes++
	return &bedrockagentcorecontrol.DeleteAgentRuntimeOutput{}, f.delErr
}

func status(s types.AgentRuntimeStatus, reason string) *bedrockagentcorecontrol.GetAgentRuntimeOutput {
	out := &bedrockagentcorecontrol.GetAgentRuntimeOutput{Status: s, AgentRuntimeId: aws.String("rt-1")}
	if reason != "" {
		out.FailureReason = aws.String(reason)
	}
	return out
}

func fastPoll(t *testing.T) {
	old := Poll
	Poll = time.Millisecond
	t.Cleanup(func() { Poll = old })
}

// TestWaitReady: READY after the transitional statuses; a failed status
// is a *RuntimeError (runtime_failed) with AgentCore's reason only when
// it is a plain code, never free text.
func TestWaitReady(t *testing.T) {
	fastPoll(t)
	c := &fakeControl{gets: []*bedrockagentcorecontrol.GetAgentRuntimeOutput{status("CREATING", ""), status("READY", "")}}
	var progress strings.Builder
	if got, err := WaitReady(context.Background(), c, "rt-1", &progress); err != nil || got.Status != "READY" || progress.String() != "runtime rt-1: CREATING\n" {
		t.Fatalf("%v %q", err, progress.String())
	}
	for reason, want := range map[string]string{"ImagePullFailed": "(ImagePullFailed)", "pulling 1234.dkr.ecr/x failed: token abc": ""} {
		c = &fakeControl{gets: []*bedrockagentcorecontrol.GetAgentRuntimeOutput{status("CREATE_FAILED", reason)}}
		_, err := WaitReady(context.Background(), c, "rt-1", io.Discard)
		var re *RuntimeError
		if !errors.As(err, &re) || !errors.Is(err, ErrPlan) || !strings.Contains(err.Error(), CodeRuntimeFailed) || want != "" && !strings.Contains(err.Error(), want) ||
			strings.Contains(err.Error(), "token") {
			t.Errorf("%q: %v", reason, err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	c = &fakeControl{}
	for range 1000 {
		c.gets = append(c.gets, status("UPDATING", ""))
	}
	if _, err := WaitReady(ctx, c, "rt-1", io.Discard); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("bounded: %v", err)
	}
}

// TestUpdateRuntimeMMDSv2: every update requires MMDSv2 and keeps the
// marker, the PUBLIC network and the image by digest.
func TestUpdateRuntimeMMDSv2(t *testing.T) {
	c := &fakeControl{}
	s := RuntimeSpec{ContainerURI: "r@sha256:00", RoleARN: "arn:role", Environment: map[string]string{"RAYITO_SECRET_ENV": "[]"}}
	if _, err := UpdateRuntime(context.Background(), c, "rt-1", s, "tok"); err != nil {
		t.Fatal(err)
	}
	in := c.updates[0]
	art, _ := in.AgentRuntimeArtifact.(*types.AgentRuntimeArtifactMemberContainerConfiguration)
	if !aws.ToBool(in.MetadataConfiguration.RequireMMDSV2) || aws.ToString(in.Description) != Marker || in.NetworkConfiguration.NetworkMode != types.NetworkModePublic ||
		art == nil || aws.ToString(art.Value.ContainerUri) != "r@sha256:00" {
		t.Errorf("%+v", in)
	}
	if MMDSv2(status("READY", "")) || !MMDSv2(&bedrockagentcorecontrol.GetAgentRuntimeOutput{MetadataConfiguration: &types.RuntimeMetadataConfiguration{RequireMMDSV2: aws.Bool(true)}}) {
		t.Error("MMDSv2")
	}
}

// TestDeleteRuntime: deleted, then waited until not found; a runtime
// already gone is not an error.
func TestDeleteRuntime(t *testing.T) {
	fastPoll(t)
	c := &fakeControl{gets: []*bedrockagentcorecontrol.GetAgentRuntimeOutput{status("DELETING", "")}}
	if err := DeleteRuntime(context.Background(), c, "rt-1", io.Discard); err != nil || c.deletes != 1 || len(c.gets) != 0 {
		t.Errorf("%v, %d deletes", err, c.deletes)
	}
	c = &fakeControl{delErr: &types.ResourceNotFoundException{}}
	if err := DeleteRuntime(context.Background(), c, "rt-1", io.Discard); err != nil {
		t.Errorf("gone: %v", err)
	}
	c = &fakeControl{gets: []*bedrockagentcorecontrol.GetAgentRuntimeOutput{status("DELETE_FAILED", "Busy")}}
	if err := DeleteRuntime(context.Background(), c, "rt-1", io.Discard); !errors.Is(err, ErrPlan) {
		t.Errorf("failed: %v", err)
	}
}

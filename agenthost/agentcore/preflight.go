package agentcore

import (
	"context"
	"errors"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/bedrockagentcorecontrol"
	"github.com/aws/aws-sdk-go-v2/service/ecr"
	ecrtypes "github.com/aws/aws-sdk-go-v2/service/ecr/types"
)

// More closed codes: what a deploy finds before it writes anything.
const (
	// CodeNameConflict is a runtime of the agent's name that Rayito did
	// not create (no Marker in its description): never touched.
	CodeNameConflict = "name_conflict"
	// CodeCDKManaged is a runtime (MarkerCDK) or repository (tag
	// rayito:managed-by=rayito-cdk) a CDK stack declares: the CLI does not
	// change what the stack owns.
	CodeCDKManaged = "cdk_managed"
)

// ManagedByTag marks what the CDK constructs create.
const (
	ManagedByTag = "rayito:managed-by"
	ManagedByCDK = "rayito-cdk"
)

// ControlAPI is the AgentCore control plane calls a preflight makes
// (read only).
type ControlAPI interface {
	ListAgentRuntimes(ctx context.Context, in *bedrockagentcorecontrol.ListAgentRuntimesInput, opts ...func(*bedrockagentcorecontrol.Options)) (*bedrockagentcorecontrol.ListAgentRuntimesOutput, error)
}

// ECRAPI is the ECR calls a preflight makes (read only).
type ECRAPI interface {
	DescribeRepositories(ctx context.Context, in *ecr.DescribeRepositoriesInput, opts ...func(*ecr.Options)) (*ecr.DescribeRepositoriesOutput, error)
	ListTagsForResource(ctx context.Context, in *ecr.ListTagsForResourceInput, opts ...func(*ecr.Options)) (*ecr.ListTagsForResourceOutput, error)
}

// Existing is what a preflight found of the agent.
type Existing struct {
	// RuntimeID is the agent's runtime, when Rayito created one before.
	RuntimeID string
	// Repository is whether its repository exists.
	Repository bool
}

// Preflight reads, and writes nothing: the runtime of the plan's name
// (Rayito's marker in its description, else name_conflict; the CDK
// marker, cdk_managed) and the repository (the CDK tag, cdk_managed).
func Preflight(ctx context.Context, pl *Plan, ctl ControlAPI, reg ECRAPI) (*Existing, error) {
	out := &Existing{}
	var next *string
	for page := 0; page < 100; page++ {
		res, err := ctl.ListAgentRuntimes(ctx, &bedrockagentcorecontrol.ListAgentRuntimesInput{MaxResults: aws.Int32(100), NextToken: next})
		if err != nil {
			return nil, err
		}
		for _, r := range res.AgentRuntimes {
			if aws.ToString(r.AgentRuntimeName) != pl.Runtime {
				continue
			}
			desc := aws.ToString(r.Description)
			switch {
			case strings.Contains(desc, MarkerCDK):
				return nil, &Error{Code: CodeCDKManaged, Detail: "the runtime " + pl.Runtime + " is declared by a CDK stack (" + MarkerCDK + "): change it with cdk deploy"}
			case !strings.Contains(desc, Marker):
				return nil, &Error{Code: CodeNameConflict, Detail: "a runtime named " + pl.Runtime + " exists without Rayito's marker: it is never touched"}
			}
			out.RuntimeID = aws.ToString(r.AgentRuntimeId)
		}
		if next = res.NextToken; next == nil {
			break
		}
	}
	repos, err := reg.DescribeRepositories(ctx, &ecr.DescribeRepositoriesInput{RepositoryNames: []string{pl.Repository}})
	var nf *ecrtypes.RepositoryNotFoundException
	switch {
	case errors.As(err, &nf):
		return out, nil
	case err != nil:
		return nil, err
	}
	for _, r := range repos.Repositories {
		out.Repository = true
		tags, err := reg.ListTagsForResource(ctx, &ecr.ListTagsForResourceInput{ResourceArn: r.RepositoryArn})
		if err != nil {
			return nil, err
		}
		for _, t := range tags.Tags {
			if aws.ToString(t.Key) == ManagedByTag && aws.ToString(t.Value) == ManagedByCDK {
				return nil, &Error{Code: CodeCDKManaged, Detail: "the repository " + pl.Repository + " is declared by a CDK stack (" + ManagedByTag + "=" + ManagedByCDK + ")"}
			}
		}
	}
	return out, nil
}

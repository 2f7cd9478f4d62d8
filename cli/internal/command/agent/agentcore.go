package agent

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/bedrockagentcorecontrol"
	"github.com/aws/aws-sdk-go-v2/service/ecr"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/logging"
	"github.com/urfave/cli/v3"

	"github.com/rayito-dev/rayito/agenthost/agentcore"
	"github.com/rayito-dev/rayito/agenthost/project"
	"github.com/rayito-dev/rayito/cli/internal/cliutil"
	rayito "github.com/rayito-dev/rayito/sdk"
)

// deployAgentCore runs what of an AgentCore deploy is built: the plan
// (with the account STS names when --account is not given) and the
// preflight, which reads the runtime and the repository and refuses a
// runtime Rayito did not create (name_conflict) and what a CDK stack
// declares (cdk_managed) before anything is written. The deploy itself
// answers Unimplemented.
func deployAgentCore(ctx context.Context, f *cliutil.Factory, cmd *cli.Command, p *project.Project) error {
	region := cmd.String("region")
	if region == "" {
		region = f.Getenv("AWS_REGION")
	}
	if region == "" {
		return cliutil.Usagef("--target agentcore needs a region: --region or AWS_REGION")
	}
	cfg, err := awsconfig.LoadDefaultConfig(ctx, awsconfig.WithRegion(region), awsconfig.WithLogger(logging.Nop{}))
	if err != nil {
		return errors.New("cannot load the AWS configuration (credentials, profile)")
	}
	if cmd.String("account") == "" {
		id, err := sts.NewFromConfig(cfg).GetCallerIdentity(ctx, &sts.GetCallerIdentityInput{})
		if err != nil {
			return awsFailure("sts:GetCallerIdentity", err)
		}
		if err := cmd.Set("account", aws.ToString(id.Account)); err != nil {
			return err
		}
	}
	pl, err := agentCorePlan(f, cmd, p)
	if err != nil {
		return err
	}
	if _, err := agentcore.Preflight(ctx, pl, bedrockagentcorecontrol.NewFromConfig(cfg), ecr.NewFromConfig(cfg)); err != nil {
		var pe *agentcore.Error
		if errors.As(err, &pe) {
			return err
		}
		return awsFailure("the AgentCore preflight", err)
	}
	return &rayito.UnimplementedError{Feature: "rayito agent deploy --target agentcore", Reason: "the plan and the preflight are built, the deploy itself (the stack, the image build, the runtime) is not: rayito agent plan --target agentcore shows what it will create", Doc: "docs/agent-host.md"}
}

// awsFailure names the call and AWS's error code, never AWS's message
// (a signature error carries the canonical request).
func awsFailure(call string, err error) error {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return fmt.Errorf("%s failed: %s", call, ae.ErrorCode())
	}
	return fmt.Errorf("%s failed: %s", call, cliutil.Describe(err))
}

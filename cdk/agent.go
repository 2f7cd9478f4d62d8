package cdk

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsbedrockagentcore"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awss3assets"
	"github.com/aws/aws-cdk-go/awscdk/v2/cloudformationinclude"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"

	"github.com/rayito-dev/rayito/agenthost/agentcore"
	"github.com/rayito-dev/rayito/agenthost/project"
	"github.com/rayito-dev/rayito/cdk/handler"
)

// The custom resources' types.
const (
	ImageBuildType  = "Custom::RayitoImageBuild"
	RuntimeMmdsType = "Custom::RayitoRuntimeMmds"
)

// RayitoAgentProps are a RayitoAgent's props.
type RayitoAgentProps struct {
	// ProjectDir is the agent project's directory: its rayito-agent.toml
	// and its code (required). Its regular files go into the code asset;
	// .git and cdk.out are left out, a symbolic link is refused.
	ProjectDir string
	// BaseImage is the image's base, pinned by digest
	// (REGISTRY/REPOSITORY[:TAG]@sha256:<64 hex>); default: the CLI's,
	// agentcore.DefaultBaseImage. The asset's Dockerfile is the CLI's
	// (agentcore.Dockerfile): the project under agentcore.AppDir, the host
	// at agentcore.HostPath as the entrypoint.
	BaseImage string
	// HostBinary is a linux/arm64 rayito-agent-host (checked: an arm64
	// ELF executable). Empty: it is built at
	// synth with the go command (GOOS=linux GOARCH=arm64 CGO_ENABLED=0)
	// from the agenthost module this module requires.
	HostBinary string
	// ArtifactBucket is Rayito's artifact bucket (infra/artifacts.yaml),
	// the template's ArtifactBucket: the build role reads the CLI's build
	// contexts there (its usual prefix) besides the code asset (required).
	ArtifactBucket string
	// BedrockModels are the model ARNs the runtime role may invoke
	// (default: the project's bedrock model), as --bedrock-model.
	BedrockModels []string
	// ReadableSecrets are the secret ARNs (with their six-character
	// suffix) the agent's code may read, as --readable-secret.
	ReadableSecrets []string
	// ExternalModel allows a provider other than bedrock, as
	// --external-model.
	ExternalModel bool
	// LogRetentionDays is the build's and the custom-resource function's
	// log retention (default 30; one of CloudWatch's values).
	LogRetentionDays int
}

// RayitoAgent is an agent on Amazon Bedrock AgentCore declared by a CDK
// stack: agentcore.RuntimeTemplate (the CLI's template, with the plan's
// parameters), the code asset, Custom::RayitoImageBuild, the runtime
// (description agentcore.MarkerCDK) and Custom::RayitoRuntimeMmds.
type RayitoAgent struct {
	constructs.Construct
	// Plan is the CLI's plan for the same project and options: the names
	// and the runtime role's statements the template gets.
	Plan *agentcore.Plan
	// Template is the included agentcore.RuntimeTemplate.
	Template cloudformationinclude.CfnInclude
	// Code is the code asset (the project, the host, the Dockerfile).
	Code awss3assets.Asset
	// Runtime is the AgentCore runtime.
	Runtime awsbedrockagentcore.CfnRuntime
	// HandlerRole is the custom-resource function's role.
	HandlerRole awsiam.CfnRole
	// Handler is the custom-resource function.
	Handler awslambda.CfnFunction
	// ImageBuild and RuntimeMmds are the custom resources.
	ImageBuild  awscdk.CustomResource
	RuntimeMmds awscdk.CustomResource
}

var (
	bucketName  = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{1,61}[a-z0-9]$`)
	constructID = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$`)
	regionLike  = regexp.MustCompile(`^[a-z]{2}(-gov)?-[a-z]+-\d$`)
	account12   = regexp.MustCompile(`^\d{12}$`)
)

// retentions are CloudWatch Logs' retention values.
var retentions = []int{1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922, 3288, 3653}

// stackEnv is the stack's account, region and partition, which must be
// explicit (the plan's ARNs are checked against them).
func stackEnv(scope constructs.Construct) (account, region, partition string, err error) {
	stack := awscdk.Stack_Of(scope)
	account, region = *stack.Account(), *stack.Region()
	if *awscdk.Token_IsUnresolved(account) || *awscdk.Token_IsUnresolved(region) || !account12.MatchString(account) || !regionLike.MatchString(region) {
		return "", "", "", invalid(CodeStackEnvRequired, "the stack needs an explicit env (Account and Region): the plan's ARNs name them")
	}
	partition = "aws"
	switch {
	case strings.HasPrefix(region, "cn-"):
		partition = "aws-cn"
	case strings.HasPrefix(region, "us-gov-"):
		partition = "aws-us-gov"
	}
	return account, region, partition, nil
}

func checkScope(scope constructs.Construct, id *string) error {
	if scope == nil || id == nil || !constructID.MatchString(*id) {
		return invalid(CodePropsInvalid, "a scope and an id of [A-Za-z0-9_-] (1 to 64) are required")
	}
	if scope.Node().TryFindChild(id) != nil {
		return invalid(CodePropsInvalid, "the scope already has a child with this id")
	}
	return nil
}

func retention(days int) (int, error) {
	if days == 0 {
		return 30, nil
	}
	for _, r := range retentions {
		if r == days {
			return days, nil
		}
	}
	return 0, invalid(CodePropsInvalid, "LogRetentionDays must be one of CloudWatch Logs' values (1, 3, 5, 7, 14, 30, ...)")
}

// NewRayitoAgent declares the agent of props.ProjectDir in scope. Props
// that cannot be deployed are a *PropsError (errors.Is ErrInvalidProps)
// with a closed code: agentcore's (network_policy_unsupported for a
// project with [egress], provider_unsupported for a model outside
// Bedrock without ExternalModel, iam_resource_invalid) or this package's;
// nothing is added to scope then.
func NewRayitoAgent(scope constructs.Construct, id *string, props *RayitoAgentProps) (*RayitoAgent, error) {
	if err := checkScope(scope, id); err != nil {
		return nil, err
	}
	in, err := checkAgent(scope, props)
	if err != nil {
		return nil, err
	}
	plan, p, partition := in.plan, in.project, in.partition
	base := props.BaseImage
	if base == "" {
		base = agentcore.DefaultBaseImage
	}
	staged, err := stageAgent(context.Background(), props.ProjectDir, props.HostBinary, base, p.Command)
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(staged)
	work, err := os.MkdirTemp("", "rayito-cdk-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(work)
	tmpl, code, err := writeAgentFiles(work)
	if err != nil {
		return nil, err
	}

	// Everything is checked: from here on the tree grows.
	node := constructs.NewConstruct(scope, id)
	a := &RayitoAgent{Construct: node, Plan: plan}
	a.Template = cloudformationinclude.NewCfnInclude(node, jsii.String("Template"), &cloudformationinclude.CfnIncludeProps{
		TemplateFile:       jsii.String(tmpl),
		PreserveLogicalIds: jsii.Bool(false),
		Parameters:         &map[string]interface{}{"AgentName": plan.Agent, "RuntimeName": plan.Runtime, "EcrRepositoryName": plan.Repository, "ArtifactBucket": props.ArtifactBucket, "ArtifactPrefix": agentcore.ArtifactPrefix, "BedrockModelArns": planResources(plan, "InvokeBedrockModels"), "ReadableSecretArns": planResources(plan, "ReadSecrets"), "LogRetentionDays": in.days},
	})
	repo := a.Template.GetResource(jsii.String("Repository"))
	repo.AddPropertyOverride(jsii.String("Tags"), []map[string]string{{"Key": agentcore.ManagedByTag, "Value": agentcore.ManagedByCDK}})
	buildRole := a.Template.GetResource(jsii.String("BuildRole"))
	runtimeRole := a.Template.GetResource(jsii.String("RuntimeRole"))
	buildProject := a.Template.GetResource(jsii.String("BuildProject"))
	runtimeRoleArn := awscdk.Token_AsString(runtimeRole.GetAtt(jsii.String("Arn"), awscdk.ResolutionTypeHint_STRING), nil)
	repoUri := awscdk.Token_AsString(repo.GetAtt(jsii.String("RepositoryUri"), awscdk.ResolutionTypeHint_STRING), nil)

	a.Code = awss3assets.NewAsset(node, jsii.String("Code"), &awss3assets.AssetProps{Path: jsii.String(staged)})
	assetObject := awscdk.Fn_Join(jsii.String(""), &[]*string{jsii.String("arn:" + partition + ":s3:::"), a.Code.S3BucketName(), jsii.String("/"), a.Code.S3ObjectKey()})
	assetRead := awsiam.NewCfnPolicy(node, jsii.String("BuildReadsCodeAsset"), &awsiam.CfnPolicyProps{
		PolicyName: jsii.String("agentcore-build-code-asset"),
		Roles:      &[]*string{buildRole.Ref()},
		PolicyDocument: document(
			statement("ReadCodeAsset", []string{"s3:GetObject"}, assetObject),
		),
	})

	a.addHandler(node, in, code)

	a.ImageBuild = awscdk.NewCustomResource(node, jsii.String("ImageBuild"), &awscdk.CustomResourceProps{
		ServiceToken: a.Handler.AttrArn(),
		ResourceType: jsii.String(ImageBuildType),
		Properties: &map[string]interface{}{
			"ProjectName":    buildProject.Ref(),
			"SourceLocation": awscdk.Fn_Join(jsii.String("/"), &[]*string{a.Code.S3BucketName(), a.Code.S3ObjectKey()}),
			"RepositoryName": repo.Ref(),
			"ImageTag":       a.Code.AssetHash(),
		},
	})
	a.ImageBuild.Node().AddDependency(assetRead)

	a.addRuntime(node, plan, runtimeRoleArn, repoUri)
	return a, nil
}

// agentInputs are NewRayitoAgent's checked inputs: the plan, its project,
// the log retention and the stack's environment.
type agentInputs struct {
	plan                       *agentcore.Plan
	project                    *project.Project
	days                       int
	account, region, partition string
}

// checkAgent checks props and the stack's environment and plans the
// agent, before anything is added to scope.
func checkAgent(scope constructs.Construct, props *RayitoAgentProps) (*agentInputs, error) {
	if props == nil || props.ProjectDir == "" {
		return nil, invalid(CodePropsInvalid, "ProjectDir is required")
	}
	if !bucketName.MatchString(props.ArtifactBucket) {
		return nil, invalid(CodePropsInvalid, "ArtifactBucket must be an S3 bucket name (the template's ArtifactBucket)")
	}
	days, err := retention(props.LogRetentionDays)
	if err != nil {
		return nil, err
	}
	account, region, partition, err := stackEnv(scope)
	if err != nil {
		return nil, err
	}
	p, err := project.Load(props.ProjectDir)
	if err != nil {
		return nil, &PropsError{Code: CodeProjectInvalid, Detail: "the project in ProjectDir cannot be read or is not valid", Err: err}
	}
	plan, err := agentcore.NewPlan(p, agentcore.Options{
		Region: region, Account: account, Partition: partition,
		BedrockModels: props.BedrockModels, ReadableSecrets: props.ReadableSecrets,
		ExternalModel: props.ExternalModel, ArtifactBucket: props.ArtifactBucket,
	})
	if err != nil {
		return nil, planError(err)
	}
	return &agentInputs{plan: plan, project: p, days: days, account: account, region: region, partition: partition}, nil
}

// writeAgentFiles writes the runtime template and the custom resources'
// handler code into work: the template's path and the code's directory.
func writeAgentFiles(work string) (tmpl, code string, err error) {
	tmpl = filepath.Join(work, "agentcore-runtime.yaml")
	code = filepath.Join(work, "handler")
	if err := os.WriteFile(tmpl, []byte(agentcore.RuntimeTemplate), 0o600); err != nil {
		return "", "", err
	}
	if err := os.Mkdir(code, 0o755); err != nil {
		return "", "", err
	}
	if err := os.WriteFile(filepath.Join(code, "index.py"), []byte(handler.Source), 0o644); err != nil {
		return "", "", err
	}
	return tmpl, code, nil
}

// addHandler adds the custom resources' Lambda function (code from the
// directory code), its log group and its role to node.
func (a *RayitoAgent) addHandler(node constructs.Construct, in *agentInputs, code string) {
	plan, days := in.plan, in.days
	arn := func(service, res string) string {
		return "arn:" + in.partition + ":" + service + ":" + in.region + ":" + in.account + ":" + res
	}
	fnName := "rayito-cdk-" + plan.Agent
	logs := awslogs.NewCfnLogGroup(node, jsii.String("HandlerLogs"), &awslogs.CfnLogGroupProps{
		LogGroupName:    jsii.String("/aws/lambda/" + fnName),
		RetentionInDays: jsii.Number(float64(days)),
	})
	a.HandlerRole = awsiam.NewCfnRole(node, jsii.String("HandlerRole"), &awsiam.CfnRoleProps{
		Description: jsii.String("Rayito CDK custom resources of agent " + plan.Agent + " (T37): its image build and its runtime's MMDSv2."),
		AssumeRolePolicyDocument: map[string]interface{}{"Version": "2012-10-17", "Statement": []interface{}{map[string]interface{}{
			"Sid": "LambdaInThisAccount", "Effect": "Allow", "Principal": map[string]interface{}{"Service": "lambda.amazonaws.com"}, "Action": "sts:AssumeRole",
		}}},
		Policies: []interface{}{&awsiam.CfnRole_PolicyProperty{
			PolicyName: jsii.String("rayito-cdk-image-build"),
			PolicyDocument: document(
				statement("StartOwnBuild", []string{"codebuild:StartBuild", "codebuild:BatchGetBuilds"}, jsii.String(arn("codebuild", "project/"+plan.BuildProject))),
				statement("DescribeOwnImages", []string{"ecr:DescribeImages"}, jsii.String(arn("ecr", "repository/"+plan.Repository))),
				statement("WriteOwnLogs", []string{"logs:CreateLogStream", "logs:PutLogEvents"}, logs.AttrArn()),
			),
		}},
	})
	handlerCode := awss3assets.NewAsset(node, jsii.String("HandlerCode"), &awss3assets.AssetProps{Path: jsii.String(code)})
	a.Handler = awslambda.NewCfnFunction(node, jsii.String("Handler"), &awslambda.CfnFunctionProps{
		FunctionName:  jsii.String(fnName),
		Description:   jsii.String("Rayito CDK custom resources (" + ImageBuildType + ", " + RuntimeMmdsType + ")"),
		Runtime:       jsii.String("python3.12"),
		Handler:       jsii.String("index.handler"),
		Architectures: jsii.Strings("arm64"),
		MemorySize:    jsii.Number(256),
		Timeout:       jsii.Number(900),
		Role:          a.HandlerRole.AttrArn(),
		Code:          &awslambda.CfnFunction_CodeProperty{S3Bucket: handlerCode.S3BucketName(), S3Key: handlerCode.S3ObjectKey()},
		LoggingConfig: &awslambda.CfnFunction_LoggingConfigProperty{LogGroup: logs.Ref(), LogFormat: jsii.String("JSON")},
	})
}

// addRuntime adds the AgentRuntime of plan (its image the build's digest
// in repoURI, its role runtimeRoleArn) to node, and the custom resource
// that turns on its MMDSv2 with the policy that lets the handler do it.
func (a *RayitoAgent) addRuntime(node constructs.Construct, plan *agentcore.Plan, runtimeRoleArn, repoUri *string) {
	env := map[string]*string{}
	for k, v := range plan.Environment {
		env[k] = jsii.String(v)
	}
	runtimeProps := &awsbedrockagentcore.CfnRuntimeProps{
		AgentRuntimeName: jsii.String(plan.Runtime),
		Description:      jsii.String(agentcore.MarkerCDK),
		RoleArn:          runtimeRoleArn,
		AgentRuntimeArtifact: &awsbedrockagentcore.CfnRuntime_AgentRuntimeArtifactProperty{
			ContainerConfiguration: &awsbedrockagentcore.CfnRuntime_ContainerConfigurationProperty{
				ContainerUri: awscdk.Fn_Join(jsii.String(""), &[]*string{repoUri, jsii.String("@"), a.ImageBuild.GetAttString(jsii.String("ImageDigest"))}),
			},
		},
		NetworkConfiguration:  &awsbedrockagentcore.CfnRuntime_NetworkConfigurationProperty{NetworkMode: jsii.String("PUBLIC")},
		ProtocolConfiguration: jsii.String("HTTP"),
		Tags:                  &map[string]*string{agentcore.ManagedByTag: jsii.String(agentcore.ManagedByCDK)},
	}
	if len(env) > 0 {
		runtimeProps.EnvironmentVariables = &env
	}
	a.Runtime = awsbedrockagentcore.NewCfnRuntime(node, jsii.String("Runtime"), runtimeProps)

	// The runtime's permissions are a policy of their own: the role
	// exists before the runtime (the image build needs it), the runtime's
	// ARN only after.
	runtimePolicy := awsiam.NewCfnPolicy(node, jsii.String("HandlerRuntimePolicy"), &awsiam.CfnPolicyProps{
		PolicyName: jsii.String("rayito-cdk-runtime-mmds"),
		Roles:      &[]*string{a.HandlerRole.Ref()},
		PolicyDocument: document(
			statement("ReadAndFixOwnRuntime", []string{"bedrock-agentcore:GetAgentRuntime", "bedrock-agentcore:UpdateAgentRuntime"}, a.Runtime.AttrAgentRuntimeArn()),
			withCondition(statement("PassRuntimeRole", []string{"iam:PassRole"}, runtimeRoleArn),
				map[string]interface{}{"StringEquals": map[string]interface{}{"iam:PassedToService": "bedrock-agentcore.amazonaws.com"}}),
		),
	})
	a.RuntimeMmds = awscdk.NewCustomResource(node, jsii.String("RuntimeMmds"), &awscdk.CustomResourceProps{
		ServiceToken: a.Handler.AttrArn(),
		ResourceType: jsii.String(RuntimeMmdsType),
		Properties: &map[string]interface{}{
			"RuntimeId":      a.Runtime.AttrAgentRuntimeId(),
			"RuntimeVersion": a.Runtime.AttrAgentRuntimeVersion(),
		},
	})
	a.RuntimeMmds.Node().AddDependency(runtimePolicy)
}

// planResources are the resources of the plan's runtime-role statement
// sid (empty without it): the template's list parameters.
func planResources(pl *agentcore.Plan, sid string) []string {
	for _, r := range pl.Roles {
		for _, s := range r.Statements {
			if s.Sid == sid {
				return s.Resource
			}
		}
	}
	return []string{}
}

func document(statements ...map[string]interface{}) map[string]interface{} {
	list := make([]interface{}, len(statements))
	for i, s := range statements {
		list[i] = s
	}
	return map[string]interface{}{"Version": "2012-10-17", "Statement": list}
}

func statement(sid string, actions []string, resource *string) map[string]interface{} {
	var action interface{} = actions
	if len(actions) == 1 {
		action = actions[0]
	}
	return map[string]interface{}{"Sid": sid, "Effect": "Allow", "Action": action, "Resource": resource}
}

func withCondition(s map[string]interface{}, cond map[string]interface{}) map[string]interface{} {
	s["Condition"] = cond
	return s
}

// Package agentcore plans an agent's deployment to Amazon Bedrock
// AgentCore (security model T36): the runtime role of
// infra/agentcore-runtime.yaml with exactly its least privilege (its
// image, its log group, X-Ray, its metrics namespace, workload identity
// tokens without GetWorkloadAccessTokenForUserId, InvokeModel only on the
// --bedrock-model ARNs, GetSecretValue only on the --readable-secret
// ARNs and the secret_env ones), the image build (CodeBuild, an ECR
// repository with immutable tags and scan on push) and the runtime, whose
// environment holds RAYITO_SECRET_ENV (names and ARNs) and never a value.
package agentcore

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/rayito-dev/rayito/agenthost/project"
	"github.com/rayito-dev/rayito/agenthost/secretenv"
)

// Marker is in the description of every runtime Rayito creates: a
// runtime without it is never touched (name_conflict). MarkerCDK is the
// constructs' (the CLI refuses to change those).
const (
	Marker    = "rayito.agentcore/1"
	MarkerCDK = Marker + "+cdk"
)

// The closed codes of a plan that cannot be made.
const (
	CodeNetworkPolicyUnsupported = "network_policy_unsupported"
	CodeProviderUnsupported      = "provider_unsupported"
	CodeResourceInvalid          = "iam_resource_invalid"
)

// ArtifactPrefix is where build contexts go in the artifact bucket
// (infra/artifacts.yaml expires it after 7 days).
const ArtifactPrefix = "rayito/images/agentcore/"

// BuildProject is the agent's CodeBuild project (and its log group's
// last element).
func BuildProject(agent string) string { return "rayito-agentcore-" + agent }

// ErrPlan matches every *Error.
var ErrPlan = errors.New("agentcore plan")

// Error is a plan refused with a closed code.
type Error struct {
	Code   string
	Detail string
}

func (e *Error) Error() string { return e.Code + ": " + e.Detail }

// Is matches ErrPlan.
func (e *Error) Is(target error) bool { return target == ErrPlan }

// Options are the deployer's choices.
type Options struct {
	// Region and Account are where the agent goes.
	Region  string
	Account string
	// Partition is "aws" unless set.
	Partition string
	// BedrockModels are the model ARNs the role may invoke (default: the
	// project's bedrock model in Region, as a foundation-model ARN).
	BedrockModels []string
	// ReadableSecrets are secret ARNs the agent's code may read (with
	// the six-character suffix).
	ReadableSecrets []string
	// ExternalModel allows a provider other than bedrock (the agent calls
	// it over the public network with a key its code reads).
	ExternalModel bool
	// ArtifactBucket receives the build context.
	ArtifactBucket string
}

// Statement is one IAM policy statement: the statements of a role are
// exactly those of infra/agentcore-runtime.yaml for the same parameters
// (infra's tests check it).
type Statement struct {
	Sid       string            `json:"Sid"`
	Effect    string            `json:"Effect"`
	Action    []string          `json:"Action"`
	Resource  []string          `json:"Resource"`
	Condition map[string]string `json:"Condition,omitempty"`
}

// Role is a role the plan creates.
type Role struct {
	Name       string      `json:"name"`
	TrustedBy  string      `json:"trusted_by"`
	Conditions []string    `json:"trust_conditions"`
	Statements []Statement `json:"statements"`
}

// Plan is what a deploy creates, before anything is written.
type Plan struct {
	Agent         string            `json:"agent"`
	Runtime       string            `json:"runtime"`
	Description   string            `json:"description"`
	Stack         string            `json:"stack"`
	Repository    string            `json:"repository"`
	BuildProject  string            `json:"build_project"`
	BuildContext  string            `json:"build_context"`
	Roles         []Role            `json:"roles"`
	Environment   map[string]string `json:"environment"`
	ExternalModel string            `json:"external_model,omitempty"`
	MMDSv2        bool              `json:"mmdsv2"`
	// Note says what the plan could not know (the account before deploy).
	Note string `json:"note,omitempty"`
}

var (
	arnSecret  = regexp.MustCompile(`^arn:(aws|aws-cn|aws-us-gov):secretsmanager:([a-z0-9-]+):(\d{12}):secret:[A-Za-z0-9/_+=.@-]+-[A-Za-z0-9]{6}$`)
	arnModel   = regexp.MustCompile(`^arn:(aws|aws-cn|aws-us-gov):bedrock:([a-z0-9-]+):(\d{12})?:(foundation-model|inference-profile|application-inference-profile|provisioned-model)/[A-Za-z0-9._:/-]+$`)
	regionLike = regexp.MustCompile(`^[a-z]{2}(-gov)?-[a-z]+-\d$`)
	account12  = regexp.MustCompile(`^\d{12}$`)
	// ecrName is ECR's repository name rule (and
	// infra/agentcore-runtime.yaml's EcrRepositoryName pattern): no
	// doubled or trailing separator.
	ecrName = regexp.MustCompile(`^[a-z0-9]+([._-][a-z0-9]+)*(/[a-z0-9]+([._-][a-z0-9]+)*)*$`)
)

// NewPlan plans p's deployment. A project that declares egress is
// network_policy_unsupported (AgentCore's egress is unfiltered); a model
// other than bedrock is provider_unsupported unless ExternalModel; an
// ARN of another account or region, or without the secret suffix, is
// iam_resource_invalid, as is a name that ends in or doubles a hyphen
// (ECR refuses its repository name).
func NewPlan(p *project.Project, o Options) (*Plan, error) {
	if o.Partition == "" {
		o.Partition = "aws"
	}
	if !regionLike.MatchString(o.Region) || !account12.MatchString(o.Account) {
		return nil, &Error{Code: CodeResourceInvalid, Detail: "the region and the 12-digit account must be known"}
	}
	if p.Egress != nil && len(p.Egress.Allow) > 0 {
		return nil, &Error{Code: CodeNetworkPolicyUnsupported, Detail: "AgentCore's egress is unfiltered: a project that declares [egress] is not deployed there"}
	}
	external, models, err := planModels(p, o)
	if err != nil {
		return nil, err
	}
	entries, err := p.Entries()
	if err != nil {
		return nil, err
	}
	secrets, err := planSecrets(entries, o)
	if err != nil {
		return nil, err
	}
	runtime := "rayito_" + strings.ReplaceAll(p.Name, "-", "_")
	repo := "rayito-agent-" + p.Name
	if !ecrName.MatchString(repo) {
		return nil, &Error{Code: CodeResourceInvalid, Detail: "the agent's name ends in or doubles a hyphen: ECR refuses its repository name " + repo}
	}
	prefix := ArtifactPrefix + p.Name + "/"
	role := runtimeRole(p.Name, runtime, repo, models, secrets, o)
	build := buildRole(p.Name, repo, prefix, o)
	for _, r := range []*Role{&role, &build} {
		for i := range r.Statements {
			r.Statements[i].Effect = "Allow"
		}
	}
	env := map[string]string{}
	if len(entries) > 0 {
		raw, err := secretenv.Encode(entries)
		if err != nil {
			return nil, err
		}
		env[secretenv.Variable] = raw
	}
	if external != "" && p.Model.BaseURL != "" {
		env["RAYITO_MODEL_BASE_URL"] = p.Model.BaseURL
	}
	return &Plan{
		Agent: p.Name, Runtime: runtime, Description: Marker, Stack: "rayito-agent-" + p.Name, Repository: repo, BuildProject: BuildProject(p.Name),
		BuildContext: fmt.Sprintf("s3://%s/%s (deleted after the build; the bucket expires what is left after 7 days)", o.ArtifactBucket, prefix),
		Roles:        []Role{role, build}, Environment: env, ExternalModel: external, MMDSv2: true,
	}, nil
}

// planModels checks p's model against o: the external-model note ("" for
// Bedrock or no model) and the Bedrock model ARNs the runtime may invoke.
func planModels(p *project.Project, o Options) (string, []string, error) {
	external := ""
	if p.Model != nil && p.Model.Provider != "bedrock" {
		if !o.ExternalModel {
			return "", nil, &Error{Code: CodeProviderUnsupported, Detail: "the model's provider is " + p.Model.Provider + ": AgentCore has no secret gateway; pass --external-model to call it over the public network with a key the agent reads"}
		}
		if p.Model.KeySecret != "" && !slices.Contains(o.ReadableSecrets, p.Model.KeySecret) {
			return "", nil, &Error{Code: CodeProviderUnsupported, Detail: "with --external-model the key is read by the agent: name its secret ARN with --readable-secret or [secret_env]"}
		}
		external = p.Model.Provider + " over the PUBLIC network, key read by the agent's code (never in the runtime's environment); Rayito neither sees nor filters that traffic"
	}
	models := o.BedrockModels
	if len(models) == 0 && p.Model != nil && p.Model.Provider == "bedrock" {
		models = []string{fmt.Sprintf("arn:%s:bedrock:%s::foundation-model/%s", o.Partition, p.Model.Region, p.Model.ID)}
	}
	for _, m := range models {
		if !arnModel.MatchString(m) {
			return "", nil, &Error{Code: CodeResourceInvalid, Detail: "a --bedrock-model is not a Bedrock model or inference profile ARN"}
		}
	}
	return external, models, nil
}

// planSecrets is the sorted union of o's readable secrets and the
// entries' secrets, each checked to be a Secrets Manager ARN of o's
// account and region.
func planSecrets(entries []secretenv.Entry, o Options) ([]string, error) {
	secrets := slices.Clone(o.ReadableSecrets)
	for _, e := range entries {
		if !slices.Contains(secrets, e.Secret) {
			secrets = append(secrets, e.Secret)
		}
	}
	for _, s := range secrets {
		m := arnSecret.FindStringSubmatch(s)
		if m == nil || m[1] != o.Partition || m[2] != o.Region || m[3] != o.Account {
			return nil, &Error{Code: CodeResourceInvalid, Detail: "a secret must be a Secrets Manager ARN of this account and region with its six-character suffix"}
		}
	}
	slices.Sort(secrets)
	return secrets, nil
}

// arnOf is the ARN of res in service for o's partition, region and account.
func arnOf(o Options, service, res string) string {
	return fmt.Sprintf("arn:%s:%s:%s:%s:%s", o.Partition, service, o.Region, o.Account, res)
}

// runtimeRole is the AgentCore runtime's role (statements without their
// Effect): pull its image, logs, traces, metrics, workload tokens, and
// the models and secrets it may use.
func runtimeRole(name, runtime, repo string, models, secrets []string, o Options) Role {
	arn := func(service, res string) string { return arnOf(o, service, res) }
	repoARN := arn("ecr", "repository/"+repo)
	role := Role{
		Name:       fmt.Sprintf("rayito-agentcore-%s-%s", name, o.Region),
		TrustedBy:  "bedrock-agentcore.amazonaws.com",
		Conditions: []string{"aws:SourceAccount = " + o.Account, "aws:SourceArn like " + arn("bedrock-agentcore", "*")},
		Statements: []Statement{
			{Sid: "PullOwnImage", Action: []string{"ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer"}, Resource: []string{repoARN}},
			{Sid: "EcrLoginUnscoped", Action: []string{"ecr:GetAuthorizationToken"}, Resource: []string{"*"}},
			{Sid: "RuntimeLogs", Action: []string{"logs:CreateLogGroup", "logs:DescribeLogStreams", "logs:CreateLogStream", "logs:PutLogEvents"},
				Resource: []string{arn("logs", "log-group:/aws/bedrock-agentcore/runtimes/"+runtime+"-*")}},
			{Sid: "XRayUnscoped", Action: []string{"xray:PutTraceSegments", "xray:PutTelemetryRecords", "xray:GetSamplingRules", "xray:GetSamplingTargets"}, Resource: []string{"*"}},
			{Sid: "AgentCoreMetricsUnscoped", Action: []string{"cloudwatch:PutMetricData"}, Resource: []string{"*"}, Condition: map[string]string{"StringEquals cloudwatch:namespace": "bedrock-agentcore"}},
			{Sid: "WorkloadAccessTokens", Action: []string{"bedrock-agentcore:GetWorkloadAccessToken", "bedrock-agentcore:GetWorkloadAccessTokenForJWT"},
				Resource: []string{arn("bedrock-agentcore", "workload-identity-directory/default"), arn("bedrock-agentcore", "workload-identity-directory/default/workload-identity/*")}},
		},
	}
	if len(models) > 0 {
		role.Statements = append(role.Statements, Statement{Sid: "InvokeBedrockModels", Action: []string{"bedrock:InvokeModel", "bedrock:InvokeModelWithResponseStream"}, Resource: slices.Sorted(slices.Values(models))})
	}
	if len(secrets) > 0 {
		role.Statements = append(role.Statements, Statement{Sid: "ReadSecrets", Action: []string{"secretsmanager:GetSecretValue"}, Resource: secrets})
	}
	return role
}

// buildRole is the CodeBuild project's role (statements without their
// Effect): read the build context under prefix, write its logs, push the
// agent's image.
func buildRole(name, repo, prefix string, o Options) Role {
	return Role{
		Name:       fmt.Sprintf("rayito-codebuild-%s-%s", name, o.Region),
		TrustedBy:  "codebuild.amazonaws.com",
		Conditions: []string{"aws:SourceAccount = " + o.Account},
		Statements: []Statement{
			{Sid: "ReadBuildContext", Action: []string{"s3:GetObject"}, Resource: []string{fmt.Sprintf("arn:%s:s3:::%s/%s*", o.Partition, o.ArtifactBucket, prefix)}},
			{Sid: "WriteBuildLogs", Action: []string{"logs:CreateLogStream", "logs:PutLogEvents"}, Resource: []string{arnOf(o, "logs", "log-group:/aws/codebuild/"+BuildProject(name)+":*")}},
			{Sid: "PushOwnImage", Action: []string{"ecr:BatchCheckLayerAvailability", "ecr:InitiateLayerUpload", "ecr:UploadLayerPart", "ecr:CompleteLayerUpload", "ecr:PutImage", "ecr:BatchGetImage"}, Resource: []string{arnOf(o, "ecr", "repository/"+repo)}},
			{Sid: "EcrLoginUnscoped", Action: []string{"ecr:GetAuthorizationToken"}, Resource: []string{"*"}},
		},
	}
}

// Names is the plan's names of the agent (its runtime, stack, repository
// and build project) without the rest: what delete finds an agent by.
func Names(agent string) *Plan {
	return &Plan{
		Agent: agent, Runtime: "rayito_" + strings.ReplaceAll(agent, "-", "_"), Description: Marker,
		Stack: "rayito-agent-" + agent, Repository: "rayito-agent-" + agent, BuildProject: BuildProject(agent),
	}
}

// StatementResources are the resources of the runtime role's statement
// sid (nil when the plan has none): the template's BedrockModelArns
// (InvokeBedrockModels) and ReadableSecretArns (ReadSecrets).
func (pl *Plan) StatementResources(sid string) []string {
	if len(pl.Roles) == 0 {
		return nil
	}
	for _, s := range pl.Roles[0].Statements {
		if s.Sid == sid {
			return slices.Clone(s.Resource)
		}
	}
	return nil
}

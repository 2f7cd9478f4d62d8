package infra_test

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// ---------------------------------------------------------------------------
// agentcore-runtime.yaml (security model T36 and T38, issue 33): the runtime
// role of one agent on Bedrock AgentCore, its ECR repository and its image
// build. Both roles are held to exact tables; the invariants below restate
// T36 on their own (no kms:Decrypt, no ListSecrets or secretsmanager:*, no
// GetWorkloadAccessTokenForUserId, Bedrock and Secrets Manager only on the
// parameters' ARNs and only when they are set), so widening a statement
// fails twice: against the table and against the rule it breaks.
// ---------------------------------------------------------------------------

const (
	acTemplate    = "agentcore-runtime.yaml"
	acRuntime     = "RuntimeRole/Policies/agentcore-runtime"
	acRuntimeTrst = "RuntimeRole/AssumeRolePolicyDocument"
	acBuild       = "BuildRole/Policies/agentcore-build"
	acBuildTrust  = "BuildRole/AssumeRolePolicyDocument"
	acRepo        = "GetAtt:Repository.Arn"
	acBuildLogs   = "GetAtt:BuildLogGroup.Arn"
	acModels      = "Ref:BedrockModelArns"
	acSecrets     = "Ref:ReadableSecretArns"
	acRuntimeLogs = "arn:${AWS::Partition}:logs:${AWS::Region}:${AWS::AccountId}:log-group:/aws/bedrock-agentcore/runtimes/${RuntimeName}-*"
	acContext     = "arn:${AWS::Partition}:s3:::${ArtifactBucket}/${ArtifactPrefix}${AgentName}/*"
	acDirectory   = "arn:${AWS::Partition}:bedrock-agentcore:${AWS::Region}:${AWS::AccountId}:workload-identity-directory/default"
	acSourceArn   = "ArnLike aws:SourceArn=arn:${AWS::Partition}:bedrock-agentcore:${AWS::Region}:${AWS::AccountId}:*"
	acMetrics     = "StringEquals cloudwatch:namespace=bedrock-agentcore"
	acBuildImage  = "aws/codebuild/amazonlinux-aarch64-standard:3.0"
	acMaxImages   = 100
)

// acUnscoped are the only actions allowed on Resource "*", with the reason.
var acUnscoped = map[string]string{
	"ecr:GetAuthorizationToken": "returns a registry login; names no repository",
	"xray:PutTraceSegments":     "X-Ray has no resource-level permissions for writes",
	"xray:PutTelemetryRecords":  "X-Ray has no resource-level permissions for writes",
	"xray:GetSamplingRules":     "X-Ray sampling calls name no resource",
	"xray:GetSamplingTargets":   "X-Ray sampling calls name no resource",
	"cloudwatch:PutMetricData":  "names no resource; the cloudwatch:namespace condition holds it",
}

var acPull = []string{"ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer"}

var acPush = []string{
	"ecr:BatchCheckLayerAvailability", "ecr:InitiateLayerUpload", "ecr:UploadLayerPart",
	"ecr:CompleteLayerUpload", "ecr:PutImage", "ecr:BatchGetImage",
}

var acExpected = map[string][]stmt{
	acRuntimeTrst: {{Sid: "AgentCoreInThisAccount", Principal: "Service=bedrock-agentcore.amazonaws.com",
		Actions: []string{"sts:AssumeRole"}, Condition: []string{sourceAccount, acSourceArn}}},
	acRuntime: {
		{Sid: "PullOwnImage", Actions: acPull, Resources: []string{acRepo}},
		{Sid: "EcrLoginUnscoped", Actions: []string{"ecr:GetAuthorizationToken"}, Resources: []string{"*"}},
		{Sid: "RuntimeLogs", Actions: []string{"logs:CreateLogGroup", "logs:DescribeLogStreams", "logs:CreateLogStream", "logs:PutLogEvents"},
			Resources: []string{acRuntimeLogs}},
		{Sid: "XRayUnscoped", Actions: []string{"xray:PutTraceSegments", "xray:PutTelemetryRecords", "xray:GetSamplingRules", "xray:GetSamplingTargets"},
			Resources: []string{"*"}},
		{Sid: "AgentCoreMetricsUnscoped", Actions: []string{"cloudwatch:PutMetricData"}, Resources: []string{"*"}, Condition: []string{acMetrics}},
		{Sid: "WorkloadAccessTokens", Actions: []string{"bedrock-agentcore:GetWorkloadAccessToken", "bedrock-agentcore:GetWorkloadAccessTokenForJWT"},
			Resources: []string{acDirectory, acDirectory + "/workload-identity/*"}},
		{Sid: "InvokeBedrockModels", If: "HasBedrockModels", Actions: []string{"bedrock:InvokeModel", "bedrock:InvokeModelWithResponseStream"},
			Resources: []string{acModels}},
		{Sid: "ReadSecrets", If: "HasReadableSecrets", Actions: []string{"secretsmanager:GetSecretValue"}, Resources: []string{acSecrets}},
	},
	acBuildTrust: evTrust("codebuild.amazonaws.com", "CodeBuildInThisAccount"),
	acBuild: {
		{Sid: "ReadBuildContext", Actions: []string{"s3:GetObject"}, Resources: []string{acContext}},
		{Sid: "WriteBuildLogs", Actions: []string{"logs:CreateLogStream", "logs:PutLogEvents"}, Resources: []string{acBuildLogs}},
		{Sid: "PushOwnImage", Actions: acPush, Resources: []string{acRepo}},
		{Sid: "EcrLoginUnscoped", Actions: []string{"ecr:GetAuthorizationToken"}, Resources: []string{"*"}},
	},
}

var acResources = map[string]string{
	"RuntimeRole":   "AWS::IAM::Role",
	"Repository":    "AWS::ECR::Repository",
	"BuildLogGroup": "AWS::Logs::LogGroup",
	"BuildRole":     "AWS::IAM::Role",
	"BuildProject":  "AWS::CodeBuild::Project",
}

func acDocuments(tpl map[string]any) (map[string][]stmt, problems) {
	return roleDocuments(tpl, acResources, func(name, typ string, props map[string]any, _ func(string, any), p *problems) {
		if typ == "AWS::ECR::Repository" {
			if _, ok := props["RepositoryPolicyText"]; ok {
				p.addf("resource %s: a repository policy grants outside the expectation table", name)
			}
		}
	})
}

// acCheckInvariants states T36 independently of the tables.
func acCheckInvariants(docs map[string][]stmt) problems {
	var p problems
	for _, loc := range sortedLocations(docs) {
		owner, _, _ := strings.Cut(loc, "/")
		trust := strings.HasSuffix(loc, "/AssumeRolePolicyDocument")
		for _, s := range docs[loc] {
			if trust {
				switch owner {
				case "RuntimeRole":
					if s.Principal != "Service=bedrock-agentcore.amazonaws.com" || !slices.Contains(s.Condition, sourceAccount) || !slices.Contains(s.Condition, acSourceArn) {
						p.addf("%s statement %q: trust must be bedrock-agentcore.amazonaws.com with aws:SourceAccount and aws:SourceArn in this account and region", loc, s.Sid)
					}
				case "BuildRole":
					if s.Principal != "Service=codebuild.amazonaws.com" || !slices.Contains(s.Condition, sourceAccount) {
						p.addf("%s statement %q: trust must be codebuild.amazonaws.com with aws:SourceAccount", loc, s.Sid)
					}
				}
				if !slices.Equal(s.Actions, []string{"sts:AssumeRole"}) {
					p.addf("%s statement %q: trust grants %v", loc, s.Sid, s.Actions)
				}
				continue
			}
			if s.Principal != "" {
				p.addf("%s statement %q: Principal in an identity policy", loc, s.Sid)
			}
			if slices.Contains(s.Resources, "*") && len(s.Resources) != 1 {
				p.addf("%s statement %q: Resource \"*\" mixed with scoped resources", loc, s.Sid)
			}
			for _, a := range s.Actions {
				p = append(p, acCheckAction(loc, owner, s, a)...)
			}
		}
	}
	return p
}

func acCheckAction(loc, owner string, s stmt, a string) problems {
	var p problems
	bad := func(format string, args ...any) {
		p.addf("%s statement %q: %s", loc, s.Sid, fmt.Sprintf(format, args...))
	}
	p = append(p, checkActionScope(loc, s, a, acUnscoped)...)
	service, _, _ := strings.Cut(a, ":")
	switch {
	case service == "kms":
		bad("%s (the runtime never decrypts with KMS itself)", a)
	case a == "bedrock-agentcore:GetWorkloadAccessTokenForUserId":
		bad("%s (a token for any user id, no IdP token checked)", a)
	case service == "secretsmanager" && a != "secretsmanager:GetSecretValue":
		bad("%s (only GetSecretValue: no ListSecrets, no secretsmanager:*)", a)
	case a == "secretsmanager:GetSecretValue":
		if owner != "RuntimeRole" || !slices.Equal(s.Resources, []string{acSecrets}) || s.If != "HasReadableSecrets" {
			bad("GetSecretValue on %v under %q (only ReadableSecretArns, only when set)", s.Resources, s.If)
		}
	case service == "bedrock":
		if owner != "RuntimeRole" || (a != "bedrock:InvokeModel" && a != "bedrock:InvokeModelWithResponseStream") ||
			!slices.Equal(s.Resources, []string{acModels}) || s.If != "HasBedrockModels" {
			bad("%s on %v under %q (only InvokeModel[WithResponseStream] on BedrockModelArns, only when set)", a, s.Resources, s.If)
		}
	case service == "iam" || service == "sts":
		bad("%s (no role passing or assuming)", a)
	case a == "cloudwatch:PutMetricData":
		if !slices.Equal(s.Condition, []string{acMetrics}) {
			bad("PutMetricData outside the bedrock-agentcore namespace")
		}
	case service == "ecr" && a != "ecr:GetAuthorizationToken":
		allowed := acPull
		if owner == "BuildRole" {
			allowed = acPush
		}
		if !slices.Contains(allowed, a) {
			bad("%s (the %s only %v)", a, owner, allowed)
		}
		if !slices.Equal(s.Resources, []string{acRepo}) {
			bad("%s on %v (only the agent's repository)", a, s.Resources)
		}
	case service == "s3":
		if owner != "BuildRole" || a != "s3:GetObject" || !slices.Equal(s.Resources, []string{acContext}) {
			bad("%s on %v (only the build's s3:GetObject on the agent's context prefix)", a, s.Resources)
		}
	case service == "logs":
		want := acRuntimeLogs
		if owner == "BuildRole" {
			want = acBuildLogs
		}
		if !slices.Equal(s.Resources, []string{want}) {
			bad("%s on %v (only %s)", a, s.Resources, want)
		}
	}
	return p
}

// acEval evaluates the intrinsic functions the two conditions and the
// optional statements use: Ref (list parameters are lists), Fn::Join,
// Fn::Equals, Fn::Not, Condition.
func acEval(v any, conds map[string]any, params map[string][]string) (any, error) {
	switch x := v.(type) {
	case string:
		return x, nil
	case map[string]any:
		if len(x) != 1 {
			return nil, fmt.Errorf("not an intrinsic function: %v", x)
		}
		for fn, arg := range x {
			switch fn {
			case "Ref":
				name, _ := arg.(string)
				val, ok := params[name]
				if !ok {
					return nil, fmt.Errorf("Ref %q: no value", name)
				}
				return val, nil
			case "Condition":
				name, _ := arg.(string)
				c, ok := conds[name]
				if !ok {
					return nil, fmt.Errorf("condition %q not defined", name)
				}
				return acEval(c, conds, params)
			case "Fn::Not":
				l, ok := arg.([]any)
				if !ok || len(l) != 1 {
					return nil, fmt.Errorf("Fn::Not %v", arg)
				}
				r, err := acEval(l[0], conds, params)
				b, ok := r.(bool)
				if err != nil || !ok {
					return nil, fmt.Errorf("Fn::Not of %v: %v", r, err)
				}
				return !b, nil
			case "Fn::Equals":
				l, ok := arg.([]any)
				if !ok || len(l) != 2 {
					return nil, fmt.Errorf("Fn::Equals %v", arg)
				}
				a, err := acEval(l[0], conds, params)
				if err != nil {
					return nil, err
				}
				b, err := acEval(l[1], conds, params)
				if err != nil {
					return nil, err
				}
				return fmt.Sprint(a) == fmt.Sprint(b), nil
			case "Fn::Join":
				l, ok := arg.([]any)
				if !ok || len(l) != 2 {
					return nil, fmt.Errorf("Fn::Join %v", arg)
				}
				delim, _ := l[0].(string)
				r, err := acEval(l[1], conds, params)
				if err != nil {
					return nil, err
				}
				parts, ok := r.([]string)
				if !ok {
					return nil, fmt.Errorf("Fn::Join of %v", r)
				}
				return strings.Join(parts, delim), nil
			}
			return nil, fmt.Errorf("unsupported function %s", fn)
		}
	}
	return nil, fmt.Errorf("cannot evaluate %v", v)
}

// acDeployed resolves the runtime policy as CloudFormation would deploy it
// for the given list parameters: the Fn::If statements whose condition is
// false vanish, list Refs become the lists.
func acDeployed(tpl map[string]any, models, secrets []string) (map[string][]string, error) {
	params := map[string][]string{"BedrockModelArns": models, "ReadableSecretArns": secrets}
	conds := section(tpl, "Conditions")
	var list []any
	pols, _ := props(tpl, "RuntimeRole")["Policies"].([]any)
	for _, pol := range pols {
		pm, _ := pol.(map[string]any)
		if pm["PolicyName"] == "agentcore-runtime" {
			list, _ = section(pm, "PolicyDocument")["Statement"].([]any)
		}
	}
	out := map[string][]string{} // action -> resources
	for _, raw := range list {
		m, _ := raw.(map[string]any)
		if l, ok := m["Fn::If"].([]any); ok && len(l) == 3 {
			on, err := acEval(map[string]any{"Condition": l[0]}, conds, params)
			if err != nil {
				return nil, err
			}
			if on != true {
				if !isNoValue(l[2]) {
					return nil, fmt.Errorf("Fn::If %v: the false branch is not AWS::NoValue", l[0])
				}
				continue
			}
			m, _ = l[1].(map[string]any)
		}
		var res []string
		if r, ok := m["Resource"].(map[string]any); ok && r["Ref"] != nil {
			v, err := acEval(r, conds, params)
			if err != nil {
				return nil, err
			}
			res, _ = v.([]string)
		} else {
			res, _ = render(m["Resource"])
		}
		acts, _ := render(m["Action"])
		for _, a := range acts {
			out[a] = append(out[a], res...)
		}
	}
	return out, nil
}

// acPatternCases: what the list parameters' AllowedPattern must let in and
// keep out (CloudFormation applies it to each element).
var acPatternCases = map[string]struct{ good, bad []string }{
	"BedrockModelArns": {
		good: []string{"",
			"arn:aws:bedrock:eu-west-1::foundation-model/anthropic.claude-sonnet-4-20250514-v1:0",
			"arn:aws:bedrock:*::foundation-model/anthropic.claude-sonnet-4-20250514-v1:0",
			"arn:aws:bedrock:eu-west-1:111122223333:inference-profile/eu.anthropic.claude-sonnet-4-20250514-v1:0",
			"arn:aws-us-gov:bedrock:us-gov-west-1:111122223333:application-inference-profile/abc123"},
		bad: []string{"*", "arn:aws:bedrock:*:*:*", "arn:aws:bedrock:eu-west-1::foundation-model/*",
			"arn:aws:bedrock:eu-west-1::foundation-model/anthropic.*", "arn:aws:bedrock:eu-west-1:*:inference-profile/x",
			"arn:aws:bedrock:eu-west-1::*", "arn:aws:s3:::bucket/x", " arn:aws:bedrock:eu-west-1::foundation-model/x"},
	},
	"ReadableSecretArns": {
		good: []string{"",
			"arn:aws:secretsmanager:eu-west-1:111122223333:secret:prod/openai-AbC123",
			"arn:aws:secretsmanager:eu-west-1:111122223333:secret:team_key-??????"},
		bad: []string{"*", "arn:aws:secretsmanager:eu-west-1:111122223333:secret:*",
			"arn:aws:secretsmanager:eu-west-1:111122223333:secret:prod/*",
			"arn:aws:secretsmanager:eu-west-1:111122223333:secret:prod/openai",
			"arn:aws:secretsmanager:eu-west-1:111122223333:secret:prod/openai-*",
			"arn:aws:secretsmanager:eu-west-1:111122223333:secret:prod/op?nai-AbC123",
			"arn:aws:secretsmanager:*:111122223333:secret:x-AbC123", "arn:aws:secretsmanager:eu-west-1:*:secret:x-AbC123",
			"arn:aws:secretsmanager:eu-west-1:111122223333:secret:x-AbC12", "arn:aws:kms:eu-west-1:111122223333:key/x"},
	},
	"ArtifactPrefix": {
		good: []string{"rayito/images/agentcore/", "a/", "x-1_b.c/d/"},
		bad:  []string{"", "*", "a", "a*/", "/", "a//", "/a/", "a/b", "images/*/"},
	},
	"AgentName": {
		good: []string{"a", "my-agent", "agent1", "a" + strings.Repeat("b-", 15) + "c"},
		bad:  []string{"", "-a", "1a", "A", "my_agent", "a" + strings.Repeat("b", 32), "a*", "a/b", "a.b"},
	},
	"RuntimeName": {
		good: []string{"a", "my_agent", "Agent1"},
		bad:  []string{"", "my-agent", "1agent", "a*", strings.Repeat("a", 49)},
	},
}

func acCheckParameters(tpl map[string]any) problems {
	var p problems
	params := section(tpl, "Parameters")
	for name, tc := range acPatternCases {
		pm := section(params, name)
		pat := fmt.Sprint(pm["AllowedPattern"])
		re, err := regexp.Compile(pat)
		if err != nil {
			p.addf("%s's pattern %q: %v", name, pat, err)
			continue
		}
		for _, v := range tc.bad {
			if re.MatchString(v) {
				p.addf("%s's pattern %q lets %q in", name, pat, v)
			}
		}
		for _, v := range tc.good {
			if !re.MatchString(v) {
				p.addf("%s's pattern %q refuses %q", name, pat, v)
			}
		}
	}
	for name, want := range map[string]string{"BedrockModelArns": "", "ReadableSecretArns": "", "ArtifactPrefix": "rayito/images/agentcore/", "LogRetentionDays": "30"} {
		if got, ok := section(params, name)["Default"]; !ok || fmt.Sprint(got) != want {
			p.addf("%s: default %v, want %q", name, got, want)
		}
	}
	for _, name := range []string{"BedrockModelArns", "ReadableSecretArns"} {
		if t := section(params, name)["Type"]; t != "CommaDelimitedList" {
			p.addf("%s: type %v, want CommaDelimitedList", name, t)
		}
	}
	conds := section(tpl, "Conditions")
	for name, param := range map[string]string{"HasBedrockModels": "BedrockModelArns", "HasReadableSecrets": "ReadableSecretArns"} {
		want := fmt.Sprintf("map[Fn::Not:[map[Fn::Equals:[map[Fn::Join:[ map[Ref:%s]]] ]]]]", param)
		if got := fmt.Sprint(conds[name]); got != want {
			p.addf("condition %s is %s, want %s", name, got, want)
		}
	}
	return p
}

// acLifecycle is the part of an ECR lifecycle policy the check reads.
type acLifecycle struct {
	Rules []struct {
		Selection struct {
			TagStatus   string `json:"tagStatus"`
			CountType   string `json:"countType"`
			CountNumber int    `json:"countNumber"`
		} `json:"selection"`
		Action struct {
			Type string `json:"type"`
		} `json:"action"`
	} `json:"rules"`
}

func acCheckResources(tpl map[string]any) problems {
	var p problems
	// The repository: immutable tags, scan on push, a bounded history.
	repo := props(tpl, "Repository")
	if str(repo["ImageTagMutability"]) != "IMMUTABLE" {
		p.addf("Repository: ImageTagMutability %v, want IMMUTABLE", repo["ImageTagMutability"])
	}
	if _, ok := repo["ImageTagMutabilityExclusionFilters"]; ok {
		p.addf("Repository: mutable-tag exclusions")
	}
	if fmt.Sprint(section(repo, "ImageScanningConfiguration")["ScanOnPush"]) != "true" {
		p.addf("Repository: ScanOnPush is not true")
	}
	if str(repo["RepositoryName"]) != "Ref:EcrRepositoryName" {
		p.addf("Repository: RepositoryName %v, want the EcrRepositoryName parameter", repo["RepositoryName"])
	}
	var lc acLifecycle
	text := str(section(repo, "LifecyclePolicy")["LifecyclePolicyText"])
	bounded := false
	if err := json.Unmarshal([]byte(text), &lc); err != nil {
		p.addf("Repository: lifecycle policy %q: %v", text, err)
	}
	for _, r := range lc.Rules {
		if r.Selection.TagStatus == "any" && r.Selection.CountType == "imageCountMoreThan" && r.Action.Type == "expire" &&
			r.Selection.CountNumber >= 1 && r.Selection.CountNumber <= acMaxImages {
			bounded = true
		}
	}
	if !bounded {
		p.addf("Repository: no lifecycle rule expiring any image beyond a count of at most %d", acMaxImages)
	}
	// The build's log group.
	lg := props(tpl, "BuildLogGroup")
	if str(lg["LogGroupName"]) != "/aws/codebuild/rayito-agentcore-${AgentName}" || str(lg["RetentionInDays"]) != "Ref:LogRetentionDays" {
		p.addf("BuildLogGroup: %v", lg)
	}
	// The build project.
	bp := props(tpl, "BuildProject")
	if str(bp["Name"]) != "rayito-agentcore-${AgentName}" {
		p.addf("BuildProject: Name %v", bp["Name"])
	}
	if str(bp["ServiceRole"]) != "GetAtt:BuildRole.Arn" {
		p.addf("BuildProject: ServiceRole %s, want its own BuildRole", str(bp["ServiceRole"]))
	}
	src := section(bp, "Source")
	if str(src["Type"]) != "S3" || !strings.HasPrefix(str(src["Location"]), "${ArtifactBucket}/${ArtifactPrefix}${AgentName}/") {
		p.addf("BuildProject: source %v %v outside the agent's context prefix", src["Type"], src["Location"])
	}
	if bs := str(src["BuildSpec"]); !strings.Contains(bs, "docker push \"$REPOSITORY_URI:$IMAGE_TAG\"") {
		p.addf("BuildProject: the buildspec is not the template's own (a context could change the build's commands)")
	}
	for _, k := range []string{"SecondarySources", "SecondaryArtifacts", "VpcConfig", "FileSystemLocations"} {
		if _, ok := bp[k]; ok {
			p.addf("BuildProject: unexpected %s", k)
		}
	}
	if str(section(bp, "Artifacts")["Type"]) != "NO_ARTIFACTS" {
		p.addf("BuildProject: artifacts %v (the image is the only output)", section(bp, "Artifacts"))
	}
	env := section(bp, "Environment")
	if str(env["Image"]) != acBuildImage || str(env["Type"]) != "ARM_CONTAINER" {
		p.addf("BuildProject: environment %v %v, want the pinned %s (arm64)", env["Type"], env["Image"], acBuildImage)
	}
	if fmt.Sprint(env["PrivilegedMode"]) != "true" {
		p.addf("BuildProject: not privileged, but docker build needs the Docker daemon")
	}
	vars, _ := env["EnvironmentVariables"].([]any)
	for _, v := range vars {
		vm, _ := v.(map[string]any)
		if t := str(vm["Type"]); t != "PLAINTEXT" || str(vm["Name"]) != "REPOSITORY_URI" {
			p.addf("BuildProject: environment variable %v of type %v (only REPOSITORY_URI, plain text)", vm["Name"], t)
		}
	}
	if t := fmt.Sprint(bp["TimeoutInMinutes"]); t != "30" {
		p.addf("BuildProject: TimeoutInMinutes %s, want 30", t)
	}
	if str(section(section(bp, "LogsConfig"), "CloudWatchLogs")["GroupName"]) != "Ref:BuildLogGroup" {
		p.addf("BuildProject: logs outside its own log group")
	}
	// Role names: IAM's 64 characters for the longest agent name and
	// region (IAM is global: the region keeps two regions' roles apart).
	longest := map[string]string{"AgentName": "a" + strings.Repeat("b", 31), "AWS::Region": "ap-southeast-7"}
	for _, r := range []string{"RuntimeRole", "BuildRole"} {
		name, err := cfnEval(props(tpl, r)["RoleName"], longest)
		if s, ok := name.(string); err != nil || !ok || len(s) > 64 || !strings.Contains(s, "ap-southeast-7") {
			p.addf("%s: RoleName %v (%v) is over 64 characters or lacks the region", r, name, err)
		}
	}
	// Outputs.
	outs := section(tpl, "Outputs")
	for name, want := range map[string]string{"RuntimeRoleArn": "GetAtt:RuntimeRole.Arn", "RepositoryUri": "GetAtt:Repository.RepositoryUri", "BuildProjectName": "Ref:BuildProject"} {
		if got := str(section(outs, name)["Value"]); got != want {
			p.addf("output %s: %v, want %s", name, got, want)
		}
	}
	return p
}

func acCheckAll(tpl map[string]any) problems {
	return checkTemplate(tpl, acDocuments, acExpected, acCheckInvariants, acCheckParameters, acCheckResources)
}

func TestAgentCoreRuntimeTemplate(t *testing.T) {
	report(t, acCheckAll(loadTemplateFile(t, acTemplate)))
}

// TestAgentCoreTablesKeepT36: the expectation table itself grants nothing
// T36 forbids (a reviewer who widens the table must also change the rule).
func TestAgentCoreTablesKeepT36(t *testing.T) {
	report(t, acCheckInvariants(acExpected))
}

// TestAgentCoreOptionalStatements: with empty lists the deployed runtime
// policy has no Bedrock and no Secrets Manager action at all; with lists,
// exactly their ARNs.
func TestAgentCoreOptionalStatements(t *testing.T) {
	tpl := loadTemplateFile(t, acTemplate)
	const (
		model  = "arn:aws:bedrock:eu-west-1::foundation-model/anthropic.claude-sonnet-4-20250514-v1:0"
		model2 = "arn:aws:bedrock:eu-west-1:111122223333:inference-profile/eu.anthropic.claude-sonnet-4-20250514-v1:0"
		secret = "arn:aws:secretsmanager:eu-west-1:111122223333:secret:prod/key-AbC123"
	)
	for _, tc := range []struct {
		name            string
		models, secrets []string
	}{
		{"both empty", []string{""}, []string{""}},
		{"models only", []string{model, model2}, []string{""}},
		{"secrets only", []string{""}, []string{secret}},
		{"both", []string{model}, []string{secret}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := acDeployed(tpl, tc.models, tc.secrets)
			if err != nil {
				t.Fatal(err)
			}
			for a, res := range got {
				service, _, _ := strings.Cut(a, ":")
				var want []string
				switch service {
				case "bedrock":
					want = tc.models
				case "secretsmanager":
					want = tc.secrets
				default:
					continue
				}
				if slices.Equal(want, []string{""}) {
					t.Errorf("%s granted on %v with an empty list", a, res)
				} else if !slices.Equal(res, want) {
					t.Errorf("%s on %v, want %v", a, res, want)
				}
			}
			for _, a := range []string{"bedrock:InvokeModel", "bedrock:InvokeModelWithResponseStream"} {
				if _, ok := got[a]; ok != (tc.models[0] != "") {
					t.Errorf("%s granted=%v with models %v", a, ok, tc.models)
				}
			}
			if _, ok := got["secretsmanager:GetSecretValue"]; ok != (tc.secrets[0] != "") {
				t.Errorf("GetSecretValue granted=%v with secrets %v", ok, tc.secrets)
			}
			for _, a := range []string{"ecr:BatchGetImage", "logs:PutLogEvents", "xray:PutTraceSegments", "cloudwatch:PutMetricData", "bedrock-agentcore:GetWorkloadAccessToken"} {
				if _, ok := got[a]; !ok {
					t.Errorf("%s missing from the deployed policy", a)
				}
			}
		})
	}
}

// runtimeStatements returns the runtime policy's statement list (to replace
// a wrapped statement by its bare form).
func runtimeStatements(t *testing.T, tpl map[string]any) []any {
	t.Helper()
	return docStatements(t, tpl, acRuntime)
}

// unwrapIf replaces the Fn::If around statement sid by the statement alone
// (granted whatever the parameters).
func unwrapIf(t *testing.T, tpl map[string]any, sid string) {
	t.Helper()
	list := runtimeStatements(t, tpl)
	for i, raw := range list {
		if l, ok := raw.(map[string]any)["Fn::If"].([]any); ok && l[1].(map[string]any)["Sid"] == sid {
			list[i] = l[1]
			return
		}
	}
	t.Fatalf("no Fn::If statement %s", sid)
}

// TestAgentCoreCheckerCatches: each widening of the template is reported.
func TestAgentCoreCheckerCatches(t *testing.T) {
	sub := func(s string) map[string]any { return map[string]any{"Fn::Sub": s} }
	cases := []struct {
		name   string
		mutate func(t *testing.T, tpl map[string]any)
		want   string
	}{
		{"pull statement widened with a push action", func(t *testing.T, tpl map[string]any) {
			addToList(findStmt(t, tpl, acRuntime, "PullOwnImage"), "Action", "ecr:PutImage")
		}, "ecr:PutImage (the RuntimeRole only"},
		{"pull from any repository", func(t *testing.T, tpl map[string]any) {
			findStmt(t, tpl, acRuntime, "PullOwnImage")["Resource"] = "*"
		}, "ecr:BatchGetImage on Resource \"*\""},
		{"runtime trust drops aws:SourceAccount", func(t *testing.T, tpl map[string]any) {
			delete(findStmt(t, tpl, acRuntimeTrst, "AgentCoreInThisAccount")["Condition"].(map[string]any), "StringEquals")
		}, "trust must be bedrock-agentcore.amazonaws.com with aws:SourceAccount"},
		{"runtime trust drops aws:SourceArn", func(t *testing.T, tpl map[string]any) {
			delete(findStmt(t, tpl, acRuntimeTrst, "AgentCoreInThisAccount")["Condition"].(map[string]any), "ArnLike")
		}, "trust must be bedrock-agentcore.amazonaws.com"},
		{"runtime trusted by another service", func(t *testing.T, tpl map[string]any) {
			findStmt(t, tpl, acRuntimeTrst, "AgentCoreInThisAccount")["Principal"] = map[string]any{"Service": "lambda.amazonaws.com"}
		}, "trust must be bedrock-agentcore.amazonaws.com"},
		{"build trust drops aws:SourceAccount", func(t *testing.T, tpl map[string]any) {
			delete(findStmt(t, tpl, acBuildTrust, "CodeBuildInThisAccount"), "Condition")
		}, "trust must be codebuild.amazonaws.com with aws:SourceAccount"},
		{"kms:Decrypt added", func(t *testing.T, tpl map[string]any) {
			addToList(findStmt(t, tpl, acRuntime, "ReadSecrets"), "Action", "kms:Decrypt")
		}, "kms:Decrypt (the runtime never decrypts"},
		{"kms:Decrypt as its own statement", func(t *testing.T, tpl map[string]any) {
			addToList(acDoc(t, tpl, acRuntime), "Statement",
				map[string]any{"Sid": "Decrypt", "Effect": "Allow", "Action": "kms:Decrypt", "Resource": sub("arn:${AWS::Partition}:kms:${AWS::Region}:${AWS::AccountId}:key/*")})
		}, "kms:Decrypt (the runtime never decrypts"},
		{"ListSecrets added", func(t *testing.T, tpl map[string]any) {
			addToList(findStmt(t, tpl, acRuntime, "ReadSecrets"), "Action", "secretsmanager:ListSecrets")
		}, "secretsmanager:ListSecrets (only GetSecretValue"},
		{"secretsmanager:* instead of GetSecretValue", func(t *testing.T, tpl map[string]any) {
			findStmt(t, tpl, acRuntime, "ReadSecrets")["Action"] = "secretsmanager:*"
		}, "wildcard action \"secretsmanager:*\""},
		{"GetWorkloadAccessTokenForUserId added", func(t *testing.T, tpl map[string]any) {
			addToList(findStmt(t, tpl, acRuntime, "WorkloadAccessTokens"), "Action", "bedrock-agentcore:GetWorkloadAccessTokenForUserId")
		}, "bedrock-agentcore:GetWorkloadAccessTokenForUserId (a token for any user id"},
		{"secret resource is *", func(t *testing.T, tpl map[string]any) {
			findStmt(t, tpl, acRuntime, "ReadSecrets")["Resource"] = "*"
		}, "GetSecretValue on [*]"},
		{"secrets of the whole account", func(t *testing.T, tpl map[string]any) {
			findStmt(t, tpl, acRuntime, "ReadSecrets")["Resource"] = sub("arn:${AWS::Partition}:secretsmanager:${AWS::Region}:${AWS::AccountId}:secret:*")
		}, "GetSecretValue on [arn:${AWS::Partition}:secretsmanager"},
		{"secrets granted even when the list is empty", func(t *testing.T, tpl map[string]any) {
			unwrapIf(t, tpl, "ReadSecrets")
		}, "GetSecretValue on [Ref:ReadableSecretArns] under \"\""},
		{"models granted even when the list is empty", func(t *testing.T, tpl map[string]any) {
			unwrapIf(t, tpl, "InvokeBedrockModels")
		}, "bedrock:InvokeModel on [Ref:BedrockModelArns] under \"\""},
		{"every model", func(t *testing.T, tpl map[string]any) {
			findStmt(t, tpl, acRuntime, "InvokeBedrockModels")["Resource"] = sub("arn:${AWS::Partition}:bedrock:${AWS::Region}::foundation-model/*")
		}, "bedrock:InvokeModel on [arn:${AWS::Partition}:bedrock"},
		{"another Bedrock action", func(t *testing.T, tpl map[string]any) {
			addToList(findStmt(t, tpl, acRuntime, "InvokeBedrockModels"), "Action", "bedrock:InvokeAgent")
		}, "bedrock:InvokeAgent on"},
		{"metrics in any namespace", func(t *testing.T, tpl map[string]any) {
			delete(findStmt(t, tpl, acRuntime, "AgentCoreMetricsUnscoped"), "Condition")
		}, "PutMetricData outside the bedrock-agentcore namespace"},
		{"logs of every runtime", func(t *testing.T, tpl map[string]any) {
			findStmt(t, tpl, acRuntime, "RuntimeLogs")["Resource"] = sub("arn:${AWS::Partition}:logs:${AWS::Region}:${AWS::AccountId}:log-group:/aws/bedrock-agentcore/runtimes/*")
		}, "logs:PutLogEvents on [arn:${AWS::Partition}:logs:${AWS::Region}:${AWS::AccountId}:log-group:/aws/bedrock-agentcore/runtimes/*]"},
		{"logs read added", func(t *testing.T, tpl map[string]any) {
			addToList(findStmt(t, tpl, acRuntime, "XRayUnscoped"), "Action", "logs:GetLogEvents")
		}, "logs:GetLogEvents on Resource \"*\""},
		{"the runtime passes a role", func(t *testing.T, tpl map[string]any) {
			addToList(findStmt(t, tpl, acRuntime, "PullOwnImage"), "Action", "iam:PassRole")
		}, "iam:PassRole (no role passing"},
		{"build reads the whole bucket", func(t *testing.T, tpl map[string]any) {
			findStmt(t, tpl, acBuild, "ReadBuildContext")["Resource"] = sub("arn:${AWS::Partition}:s3:::${ArtifactBucket}/*")
		}, "s3:GetObject on [arn:${AWS::Partition}:s3:::${ArtifactBucket}/*]"},
		{"build reads every agent's context", func(t *testing.T, tpl map[string]any) {
			findStmt(t, tpl, acBuild, "ReadBuildContext")["Resource"] = sub("arn:${AWS::Partition}:s3:::${ArtifactBucket}/${ArtifactPrefix}*")
		}, "only the build's s3:GetObject on the agent's context prefix"},
		{"build writes the bucket", func(t *testing.T, tpl map[string]any) {
			addToList(findStmt(t, tpl, acBuild, "ReadBuildContext"), "Action", "s3:PutObject")
		}, "s3:PutObject on"},
		{"build pushes to any repository", func(t *testing.T, tpl map[string]any) {
			findStmt(t, tpl, acBuild, "PushOwnImage")["Resource"] = sub("arn:${AWS::Partition}:ecr:${AWS::Region}:${AWS::AccountId}:repository/*")
		}, "(only the agent's repository)"},
		{"build deletes images", func(t *testing.T, tpl map[string]any) {
			addToList(findStmt(t, tpl, acBuild, "PushOwnImage"), "Action", "ecr:BatchDeleteImage")
		}, "ecr:BatchDeleteImage (the BuildRole only"},
		{"build writes any log group", func(t *testing.T, tpl map[string]any) {
			findStmt(t, tpl, acBuild, "WriteBuildLogs")["Resource"] = sub("arn:${AWS::Partition}:logs:${AWS::Region}:${AWS::AccountId}:log-group:/aws/codebuild/*")
		}, "logs:CreateLogStream on [arn:${AWS::Partition}:logs"},
		{"wildcard action", func(t *testing.T, tpl map[string]any) {
			findStmt(t, tpl, acRuntime, "XRayUnscoped")["Action"] = "xray:*"
		}, "wildcard action \"xray:*\""},
		{"new statement", func(t *testing.T, tpl map[string]any) {
			addToList(acDoc(t, tpl, acBuild), "Statement",
				map[string]any{"Sid": "More", "Effect": "Allow", "Action": "ecr:DescribeImages", "Resource": map[string]any{"Fn::GetAtt": []any{"Repository", "Arn"}}})
		}, "unexpected statement \"More\""},
		{"a managed policy attached", func(t *testing.T, tpl map[string]any) {
			props(tpl, "RuntimeRole")["ManagedPolicyArns"] = []any{"arn:aws:iam::aws:policy/BedrockAgentCoreFullAccess"}
		}, "resource RuntimeRole: unexpected ManagedPolicyArns"},
		{"mutable tags", func(t *testing.T, tpl map[string]any) {
			props(tpl, "Repository")["ImageTagMutability"] = "MUTABLE"
		}, "ImageTagMutability MUTABLE"},
		{"no scan on push", func(t *testing.T, tpl map[string]any) {
			section(props(tpl, "Repository"), "ImageScanningConfiguration")["ScanOnPush"] = "false"
		}, "ScanOnPush is not true"},
		{"unbounded history", func(t *testing.T, tpl map[string]any) {
			delete(props(tpl, "Repository"), "LifecyclePolicy")
		}, "no lifecycle rule expiring"},
		{"a repository policy", func(t *testing.T, tpl map[string]any) {
			props(tpl, "Repository")["RepositoryPolicyText"] = map[string]any{"Statement": []any{}}
		}, "a repository policy grants"},
		{"the build image floats", func(t *testing.T, tpl map[string]any) {
			section(props(tpl, "BuildProject"), "Environment")["Image"] = "aws/codebuild/amazonlinux-aarch64-standard:latest"
		}, "want the pinned"},
		{"the build without a timeout", func(t *testing.T, tpl map[string]any) {
			delete(props(tpl, "BuildProject"), "TimeoutInMinutes")
		}, "TimeoutInMinutes <nil>"},
		{"the buildspec from the context", func(t *testing.T, tpl map[string]any) {
			section(props(tpl, "BuildProject"), "Source")["BuildSpec"] = "buildspec.yml"
		}, "the buildspec is not the template's own"},
		{"a secret in the build environment", func(t *testing.T, tpl map[string]any) {
			addToList(section(props(tpl, "BuildProject"), "Environment"), "EnvironmentVariables",
				map[string]any{"Name": "TOKEN", "Type": "SECRETS_MANAGER", "Value": "x"})
		}, "environment variable TOKEN of type SECRETS_MANAGER"},
		{"the build with another role", func(t *testing.T, tpl map[string]any) {
			props(tpl, "BuildProject")["ServiceRole"] = map[string]any{"Fn::GetAtt": []any{"RuntimeRole", "Arn"}}
		}, "ServiceRole GetAtt:RuntimeRole.Arn"},
		{"wildcard model ARNs allowed", func(t *testing.T, tpl map[string]any) {
			section(section(tpl, "Parameters"), "BedrockModelArns")["AllowedPattern"] = "^.*$"
		}, "BedrockModelArns's pattern \"^.*$\" lets \"*\" in"},
		{"secret ARNs without the suffix allowed", func(t *testing.T, tpl map[string]any) {
			section(section(tpl, "Parameters"), "ReadableSecretArns")["AllowedPattern"] = "^$|^arn:aws:secretsmanager:[a-z0-9-]+:[0-9]{12}:secret:[A-Za-z0-9/_+=.@-]+$"
		}, "lets \"arn:aws:secretsmanager:eu-west-1:111122223333:secret:prod/openai\" in"},
		{"a default secret", func(t *testing.T, tpl map[string]any) {
			section(section(tpl, "Parameters"), "ReadableSecretArns")["Default"] = "arn:aws:secretsmanager:eu-west-1:111122223333:secret:x-AbC123"
		}, "ReadableSecretArns: default"},
		{"condition always true", func(t *testing.T, tpl map[string]any) {
			section(tpl, "Conditions")["HasReadableSecrets"] = map[string]any{"Fn::Equals": []any{"a", "a"}}
		}, "condition HasReadableSecrets is"},
		{"a role name too long for the longest agent", func(t *testing.T, tpl map[string]any) {
			props(tpl, "BuildRole")["RoleName"] = sub("rayito-agentcore-build-${AgentName}-${AWS::Region}")
		}, "BuildRole: RoleName"},
		{"another resource", func(t *testing.T, tpl map[string]any) {
			section(tpl, "Resources")["Extra"] = map[string]any{"Type": "AWS::IAM::Policy", "Properties": map[string]any{}}
		}, "resource Extra: unexpected"},
		{"unused parameter", func(t *testing.T, tpl map[string]any) {
			section(tpl, "Parameters")["Unused"] = map[string]any{"Type": "String"}
		}, "parameter \"Unused\" is never used"},
	}
	base := loadTemplateFile(t, acTemplate)
	if p := acCheckAll(base); len(p) != 0 {
		t.Fatalf("the unmodified template has problems: %v", p)
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tpl := deepCopy(base).(map[string]any)
			tc.mutate(t, tpl)
			p := acCheckAll(tpl)
			for _, s := range p {
				if strings.Contains(s, tc.want) {
					return
				}
			}
			t.Errorf("checker did not report %q; it reported %d problems: %v", tc.want, len(p), p)
		})
	}
}

// acDoc returns the inline policy document at loc ("Role/Policies/name").
func acDoc(t *testing.T, tpl map[string]any, loc string) map[string]any {
	t.Helper()
	parts := strings.Split(loc, "/")
	for _, pol := range props(tpl, parts[0])["Policies"].([]any) {
		if pm := pol.(map[string]any); pm["PolicyName"] == parts[2] {
			return pm["PolicyDocument"].(map[string]any)
		}
	}
	t.Fatalf("no document %s", loc)
	return nil
}

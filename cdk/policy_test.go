package cdk_test

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/rayito-dev/rayito/agenthost/agentcore"
)

// ---------------------------------------------------------------------------
// The synthesized stack's roles held to exact tables (security model T37):
// the custom-resource function's role, the build role's read of the code
// asset and the MicroVMs image build role. Each statement is rendered to
// text (intrinsics as Ref:X, GetAtt:X.A, joins flattened, logical ids
// without the construct path and hash) and compared with the table; the
// invariants hold on their own (no wildcard action, no Resource "*", no
// Deny, NotAction or NotResource). The widenings table proves the checker
// catches an extra action, a wider resource and a missing condition.
// ---------------------------------------------------------------------------

// stmt is a statement rendered to text.
type stmt struct {
	Sid       string
	Actions   []string
	Resources []string
	Condition []string
}

// logicalID strips the construct path and the hash CDK adds:
// DemoTemplateRepository4D00030F -> Repository.
// The image's resources keep their construct's name: SandboxBuildRole.
var logicalID = regexp.MustCompile(`^(?:Demo(?:Template)?(\w+?)|(Sandbox\w+?))[0-9A-F]{8}$`)

func short(id string) string {
	if m := logicalID.FindStringSubmatch(id); m != nil {
		return m[1] + m[2]
	}
	return id
}

// render is v as text.
func render(v any) (string, error) {
	switch x := v.(type) {
	case string:
		return x, nil
	case map[string]any:
		if len(x) != 1 {
			return "", fmt.Errorf("not an intrinsic: %v", x)
		}
		for fn, arg := range x {
			switch fn {
			case "Ref":
				s, _ := arg.(string)
				return "Ref:" + short(s), nil
			case "Fn::Sub":
				s, ok := arg.(string)
				if !ok {
					return "", fmt.Errorf("Fn::Sub with variables")
				}
				return s, nil
			case "Fn::GetAtt":
				switch a := arg.(type) {
				case string:
					r, at, _ := strings.Cut(a, ".")
					return "GetAtt:" + short(r) + "." + at, nil
				case []any:
					if len(a) == 2 {
						return fmt.Sprintf("GetAtt:%s.%v", short(fmt.Sprint(a[0])), a[1]), nil
					}
				}
			case "Fn::Join":
				a, ok := arg.([]any)
				if !ok || len(a) != 2 {
					return "", fmt.Errorf("bad Fn::Join")
				}
				parts, _ := a[1].([]any)
				var out []string
				for _, p := range parts {
					s, err := render(p)
					if err != nil {
						return "", err
					}
					out = append(out, s)
				}
				return strings.Join(out, fmt.Sprint(a[0])), nil
			}
		}
	}
	return "", fmt.Errorf("cannot render %v", v)
}

func list(v any) ([]string, error) {
	items, ok := v.([]any)
	if !ok {
		items = []any{v}
	}
	var out []string
	for _, it := range items {
		s, err := render(it)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

// statements renders doc's statements and checks the invariants.
func statements(doc any) ([]stmt, error) {
	d, ok := doc.(map[string]any)
	if !ok || d["Version"] != "2012-10-17" {
		return nil, fmt.Errorf("not a policy document of version 2012-10-17")
	}
	raw, ok := d["Statement"].([]any)
	if !ok {
		return nil, fmt.Errorf("Statement is not a list")
	}
	var out []stmt
	for _, r := range raw {
		m, ok := r.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("a statement is not a mapping (an Fn::If?)")
		}
		for k := range m {
			if !slices.Contains([]string{"Sid", "Effect", "Action", "Resource", "Condition", "Principal"}, k) {
				return nil, fmt.Errorf("statement %v: key %s not allowed (NotAction, NotResource...)", m["Sid"], k)
			}
		}
		if m["Effect"] != "Allow" {
			return nil, fmt.Errorf("statement %v: Effect %v", m["Sid"], m["Effect"])
		}
		s := stmt{Sid: fmt.Sprint(m["Sid"])}
		var err error
		if s.Actions, err = list(m["Action"]); err != nil {
			return nil, err
		}
		for _, a := range s.Actions {
			if strings.Contains(a, "*") {
				return nil, fmt.Errorf("statement %s: wildcard action %s", s.Sid, a)
			}
		}
		if _, principal := m["Principal"]; principal {
			p, _ := json.Marshal(m["Principal"])
			s.Resources = []string{"Principal=" + string(p)}
		} else {
			if s.Resources, err = list(m["Resource"]); err != nil {
				return nil, err
			}
			for _, res := range s.Resources {
				if res == "*" || strings.HasSuffix(res, ":*") && !strings.HasPrefix(res, "GetAtt:") && !strings.HasSuffix(res, ":log-stream:*") {
					return nil, fmt.Errorf("statement %s: resource %s is a wildcard", s.Sid, res)
				}
			}
		}
		if c, ok := m["Condition"].(map[string]any); ok {
			for op, kv := range c {
				kvs, _ := kv.(map[string]any)
				for k, v := range kvs {
					r, err := render(v)
					if err != nil {
						return nil, err
					}
					s.Condition = append(s.Condition, op+" "+k+"="+r)
				}
			}
			sort.Strings(s.Condition)
		}
		out = append(out, s)
	}
	return out, nil
}

// checkDocument compares doc with want, statement by statement.
func checkDocument(doc any, want []stmt) error {
	got, err := statements(doc)
	if err != nil {
		return err
	}
	if len(got) != len(want) {
		return fmt.Errorf("%d statements, want %d: %+v", len(got), len(want), got)
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.Sid != w.Sid || !slices.Equal(g.Actions, w.Actions) || !slices.Equal(g.Resources, w.Resources) || !slices.Equal(g.Condition, w.Condition) {
			return fmt.Errorf("statement %d:\n got  %+v\n want %+v", i, g, w)
		}
	}
	return nil
}

// resource is the synthesized resource whose short logical id is name.
func resource(t *testing.T, tmpl map[string]any, name string) map[string]any {
	t.Helper()
	res, _ := tmpl["Resources"].(map[string]any)
	var found map[string]any
	for id, r := range res {
		if short(id) == name && (strings.HasPrefix(id, "Demo") || strings.HasPrefix(id, "Sandbox")) {
			if found != nil {
				t.Fatalf("two resources named %s", name)
			}
			found, _ = r.(map[string]any)
		}
	}
	if found == nil {
		t.Fatalf("no resource %s", name)
	}
	return found
}

func props(t *testing.T, tmpl map[string]any, name string) map[string]any {
	t.Helper()
	p, _ := resource(t, tmpl, name)["Properties"].(map[string]any)
	return p
}

// inline is the document of the role's one inline policy.
func inline(t *testing.T, tmpl map[string]any, role string) any {
	t.Helper()
	pols, _ := props(t, tmpl, role)["Policies"].([]any)
	if len(pols) != 1 {
		t.Fatalf("%s has %d inline policies, want 1", role, len(pols))
	}
	return pols[0].(map[string]any)["PolicyDocument"]
}

// asset matches a CDK bootstrap bucket object key (a content hash).
var asset = regexp.MustCompile(`^cdk-hnb659fds-assets-123456789012-us-east-1/[0-9a-f]{64}\.zip$`)

// objectOf is the bootstrap bucket object an s3 ARN names (the key is
// a content hash, so it is checked by shape).
func objectOf(t *testing.T, doc any, sid string) string {
	t.Helper()
	ss, err := statements(doc)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range ss {
		if s.Sid == sid && len(s.Resources) == 1 {
			obj := strings.TrimPrefix(strings.TrimPrefix(s.Resources[0], "arn:aws:s3:::"), "arn:Ref:AWS::Partition:s3:::")
			if !asset.MatchString(obj) {
				t.Fatalf("%s reads %q: not exactly one asset object of the bootstrap bucket", sid, s.Resources[0])
			}
			return s.Resources[0]
		}
	}
	t.Fatalf("no statement %s", sid)
	return ""
}

var (
	handlerTrust = []stmt{{Sid: "LambdaInThisAccount", Actions: []string{"sts:AssumeRole"}, Resources: []string{`Principal={"Service":"lambda.amazonaws.com"}`}}}
	handlerBuild = []stmt{
		{Sid: "StartOwnBuild", Actions: []string{"codebuild:StartBuild", "codebuild:BatchGetBuilds"}, Resources: []string{"arn:aws:codebuild:us-east-1:123456789012:project/rayito-agentcore-demo"}},
		{Sid: "DescribeOwnImages", Actions: []string{"ecr:DescribeImages"}, Resources: []string{"arn:aws:ecr:us-east-1:123456789012:repository/rayito-agent-demo"}},
		{Sid: "WriteOwnLogs", Actions: []string{"logs:CreateLogStream", "logs:PutLogEvents"}, Resources: []string{"GetAtt:HandlerLogs.Arn"}},
	}
	handlerRuntime = []stmt{
		{Sid: "ReadAndFixOwnRuntime", Actions: []string{"bedrock-agentcore:GetAgentRuntime", "bedrock-agentcore:UpdateAgentRuntime"}, Resources: []string{"GetAtt:Runtime.AgentRuntimeArn"}},
		{Sid: "PassRuntimeRole", Actions: []string{"iam:PassRole"}, Resources: []string{"GetAtt:RuntimeRole.Arn"}, Condition: []string{"StringEquals iam:PassedToService=bedrock-agentcore.amazonaws.com"}},
	}
	imageTrust = []stmt{{Sid: "LambdaMicrovmsBuildInThisAccount", Actions: []string{"sts:AssumeRole"}, Resources: []string{`Principal={"Service":"lambda.amazonaws.com"}`},
		Condition: []string{"StringEquals aws:SourceAccount=Ref:AWS::AccountId"}}}
	imageLogs  = "arn:${AWS::Partition}:logs:${AWS::Region}:${AWS::AccountId}:log-group:/rayito/sandbox-base"
	imageBuild = func(object string) []stmt {
		return []stmt{
			{Sid: "ReadImageArtifact", Actions: []string{"s3:GetObject"}, Resources: []string{object}},
			{Sid: "CreateBuildLogGroup", Actions: []string{"logs:CreateLogGroup"}, Resources: []string{imageLogs}},
			{Sid: "WriteBuildLogs", Actions: []string{"logs:CreateLogStream", "logs:PutLogEvents"}, Resources: []string{imageLogs + ":log-stream:*"}},
		}
	}
)

// TestHandlerRole: the custom-resource function's role can only start
// and read the agent's build, describe its repository's images, read and
// update its runtime, pass only the runtime role, and write its own log
// group; it is the function's role, and nothing else uses it.
func TestHandlerRole(t *testing.T) {
	if err := checkDocument(props(t, synthesized, "HandlerRole")["AssumeRolePolicyDocument"], handlerTrust); err != nil {
		t.Errorf("trust: %v", err)
	}
	if err := checkDocument(inline(t, synthesized, "HandlerRole"), handlerBuild); err != nil {
		t.Errorf("build policy: %v", err)
	}
	rp := props(t, synthesized, "HandlerRuntimePolicy")
	if err := checkDocument(rp["PolicyDocument"], handlerRuntime); err != nil {
		t.Errorf("runtime policy: %v", err)
	}
	if r, _ := list(rp["Roles"]); !slices.Equal(r, []string{"Ref:HandlerRole"}) {
		t.Errorf("the runtime policy is attached to %v", r)
	}
	if p := props(t, synthesized, "HandlerRole"); p["ManagedPolicyArns"] != nil || p["PermissionsBoundary"] != nil {
		t.Errorf("the handler role has managed policies: %v", p["ManagedPolicyArns"])
	}
	fn := props(t, synthesized, "Handler")
	if r, _ := render(fn["Role"]); r != "GetAtt:HandlerRole.Arn" || fn["Runtime"] != "python3.12" || fn["FunctionName"] != "rayito-cdk-demo" {
		t.Errorf("function: role %s runtime %v name %v", r, fn["Runtime"], fn["FunctionName"])
	}
	lg := props(t, synthesized, "HandlerLogs")
	if lg["LogGroupName"] != "/aws/lambda/rayito-cdk-demo" {
		t.Errorf("log group %v", lg["LogGroupName"])
	}
	// No other policy in the stack attaches to the handler role or the
	// runtime role.
	for id, r := range synthesized["Resources"].(map[string]any) {
		m := r.(map[string]any)
		if m["Type"] != "AWS::IAM::Policy" && m["Type"] != "AWS::IAM::ManagedPolicy" {
			continue
		}
		roles, _ := list(m["Properties"].(map[string]any)["Roles"])
		for _, role := range roles {
			if role == "Ref:RuntimeRole" || role == "Ref:HandlerRole" && short(id) != "HandlerRuntimePolicy" {
				t.Errorf("%s attaches to %s", id, role)
			}
		}
	}
}

// TestBuildRoleReadsOnlyTheAsset: the build role's one addition is
// s3:GetObject on exactly the code asset's object; the custom resource
// builds that same object and waits for the policy.
func TestBuildRoleReadsOnlyTheAsset(t *testing.T) {
	p := props(t, synthesized, "BuildReadsCodeAsset")
	object := objectOf(t, p["PolicyDocument"], "ReadCodeAsset")
	if err := checkDocument(p["PolicyDocument"], []stmt{{Sid: "ReadCodeAsset", Actions: []string{"s3:GetObject"}, Resources: []string{object}}}); err != nil {
		t.Error(err)
	}
	if r, _ := list(p["Roles"]); !slices.Equal(r, []string{"Ref:BuildRole"}) {
		t.Errorf("attached to %v, want the template's BuildRole", r)
	}
	build := resource(t, synthesized, "ImageBuild")
	bp := build["Properties"].(map[string]any)
	if loc := "arn:aws:s3:::" + fmt.Sprint(bp["SourceLocation"]); loc != object {
		t.Errorf("the build's source %s is not the object the role reads (%s)", loc, object)
	}
	if dep, _ := build["DependsOn"].([]any); len(dep) != 1 || short(fmt.Sprint(dep[0])) != "BuildReadsCodeAsset" {
		t.Errorf("ImageBuild depends on %v", build["DependsOn"])
	}
	if r, _ := render(bp["ProjectName"]); r != "Ref:BuildProject" {
		t.Errorf("ImageBuild project %s", r)
	}
	if tag, _ := bp["ImageTag"].(string); !regexp.MustCompile(`^[0-9a-f]{64}$`).MatchString(tag) || !strings.Contains(fmt.Sprint(bp["SourceLocation"]), tag) {
		t.Errorf("ImageTag %q is not the asset's hash", tag)
	}
}

// TestImageBuildRole: only Lambda in the account assumes it, it reads
// only its zip asset and writes only /rayito/<name>; the image uses it
// and logs there; both carry the tag.
func TestImageBuildRole(t *testing.T) {
	p := props(t, synthesized, "SandboxBuildRole")
	if err := checkDocument(p["AssumeRolePolicyDocument"], imageTrust); err != nil {
		t.Errorf("trust: %v", err)
	}
	doc := inline(t, synthesized, "SandboxBuildRole")
	if err := checkDocument(doc, imageBuild(objectOf(t, doc, "ReadImageArtifact"))); err != nil {
		t.Error(err)
	}
	if rn := p["RoleName"]; rn != nil {
		t.Errorf("RoleName %v: not the shared rayito-m0-iam role, and named by CloudFormation", rn)
	}
	img := props(t, synthesized, "SandboxImage")
	if r, _ := render(img["BuildRoleArn"]); r != "GetAtt:SandboxBuildRole.Arn" {
		t.Errorf("the image's build role is %s", r)
	}
	lg, _ := json.Marshal(img["Logging"])
	if string(lg) != `{"CloudWatch":{"LogGroup":"/rayito/sandbox-base"}}` {
		t.Errorf("logging %s", lg)
	}
	uri, _ := render(img["CodeArtifact"].(map[string]any)["Uri"])
	if !asset.MatchString(strings.TrimPrefix(uri, "s3://")) || !strings.HasSuffix(objectOf(t, doc, "ReadImageArtifact"), strings.TrimPrefix(uri, "s3://")) {
		t.Errorf("the image's artifact %s is not the object its role reads", uri)
	}
	for _, name := range []string{"SandboxBuildRole", "SandboxImage"} {
		if tags, _ := json.Marshal(props(t, synthesized, name)["Tags"]); string(tags) != `[{"Key":"rayito:managed-by","Value":"rayito-cdk"}]` {
			t.Errorf("%s tags %s", name, tags)
		}
	}
}

// TestMarkerAndTags: the runtime's description is MarkerCDK and it is
// tagged, the repository is tagged, the runtime runs the built image by
// digest with the runtime role, and Mmds watches every version.
func TestMarkerAndTags(t *testing.T) {
	rt := props(t, synthesized, "Runtime")
	if rt["Description"] != agentcore.MarkerCDK || rt["AgentRuntimeName"] != "rayito_demo" {
		t.Errorf("runtime description %v name %v", rt["Description"], rt["AgentRuntimeName"])
	}
	if tags, _ := json.Marshal(rt["Tags"]); string(tags) != `{"`+agentcore.ManagedByTag+`":"`+agentcore.ManagedByCDK+`"}` {
		t.Errorf("runtime tags %s", tags)
	}
	if tags, _ := json.Marshal(props(t, synthesized, "Repository")["Tags"]); string(tags) != `[{"Key":"rayito:managed-by","Value":"rayito-cdk"}]` {
		t.Errorf("repository tags %s", tags)
	}
	uri, _ := render(rt["AgentRuntimeArtifact"].(map[string]any)["ContainerConfiguration"].(map[string]any)["ContainerUri"])
	if uri != "GetAtt:Repository.RepositoryUri@GetAtt:ImageBuild.ImageDigest" {
		t.Errorf("container %s: not the repository by the built digest", uri)
	}
	if r, _ := render(rt["RoleArn"]); r != "GetAtt:RuntimeRole.Arn" {
		t.Errorf("runtime role %s", r)
	}
	env, _ := json.Marshal(rt["EnvironmentVariables"])
	if !strings.Contains(string(env), "RAYITO_SECRET_ENV") || strings.Contains(string(env), "github-token-value") {
		t.Errorf("environment %s", env)
	}
	mm := resource(t, synthesized, "RuntimeMmds")
	mp := mm["Properties"].(map[string]any)
	id, _ := render(mp["RuntimeId"])
	ver, _ := render(mp["RuntimeVersion"])
	if id != "GetAtt:Runtime.AgentRuntimeId" || ver != "GetAtt:Runtime.AgentRuntimeVersion" {
		t.Errorf("Mmds watches %s %s", id, ver)
	}
	if dep, _ := mm["DependsOn"].([]any); len(dep) != 1 || short(fmt.Sprint(dep[0])) != "HandlerRuntimePolicy" {
		t.Errorf("RuntimeMmds depends on %v", mm["DependsOn"])
	}
	if mm["Type"] != "Custom::RayitoRuntimeMmds" || resource(t, synthesized, "ImageBuild")["Type"] != "Custom::RayitoImageBuild" {
		t.Error("custom resource types")
	}
}

// TestWidenings: each widening of a role's document is caught.
func TestWidenings(t *testing.T) {
	type doc = map[string]any
	stmtOf := func(d doc, i int) doc { return d["Statement"].([]any)[i].(doc) }
	cases := []struct {
		name   string
		source func(*testing.T) any
		want   []stmt
		widen  func(doc)
	}{
		{"extra action on the build", func(t *testing.T) any { return inline(t, synthesized, "HandlerRole") }, handlerBuild,
			func(d doc) { s := stmtOf(d, 0); s["Action"] = append(s["Action"].([]any), "codebuild:StopBuild") }},
		{"wildcard action", func(t *testing.T) any { return inline(t, synthesized, "HandlerRole") }, handlerBuild,
			func(d doc) { stmtOf(d, 1)["Action"] = "ecr:*" }},
		{"resource star", func(t *testing.T) any { return inline(t, synthesized, "HandlerRole") }, handlerBuild,
			func(d doc) { stmtOf(d, 1)["Resource"] = "*" }},
		{"another project", func(t *testing.T) any { return inline(t, synthesized, "HandlerRole") }, handlerBuild,
			func(d doc) {
				stmtOf(d, 0)["Resource"] = "arn:aws:codebuild:us-east-1:123456789012:project/rayito-agentcore-*"
			}},
		{"an extra statement", func(t *testing.T) any { return inline(t, synthesized, "HandlerRole") }, handlerBuild,
			func(d doc) {
				d["Statement"] = append(d["Statement"].([]any), doc{"Sid": "X", "Effect": "Allow", "Action": "s3:GetObject", "Resource": "arn:aws:s3:::b/k"})
			}},
		{"NotResource", func(t *testing.T) any { return inline(t, synthesized, "HandlerRole") }, handlerBuild,
			func(d doc) { s := stmtOf(d, 1); s["NotResource"] = s["Resource"]; delete(s, "Resource") }},
		{"pass role without condition", func(t *testing.T) any { return props(t, synthesized, "HandlerRuntimePolicy")["PolicyDocument"] }, handlerRuntime,
			func(d doc) { delete(stmtOf(d, 1), "Condition") }},
		{"pass any role", func(t *testing.T) any { return props(t, synthesized, "HandlerRuntimePolicy")["PolicyDocument"] }, handlerRuntime,
			func(d doc) { stmtOf(d, 1)["Resource"] = "arn:aws:iam::123456789012:role/*" }},
		{"create runtimes", func(t *testing.T) any { return props(t, synthesized, "HandlerRuntimePolicy")["PolicyDocument"] }, handlerRuntime,
			func(d doc) {
				s := stmtOf(d, 0)
				s["Action"] = append(s["Action"].([]any), "bedrock-agentcore:CreateAgentRuntime")
			}},
		{"whole bootstrap bucket", func(t *testing.T) any { return props(t, synthesized, "BuildReadsCodeAsset")["PolicyDocument"] }, nil,
			func(d doc) { stmtOf(d, 0)["Resource"] = "arn:aws:s3:::cdk-hnb659fds-assets-123456789012-us-east-1/*" }},
		{"image trust without SourceAccount", func(t *testing.T) any { return props(t, synthesized, "SandboxBuildRole")["AssumeRolePolicyDocument"] }, imageTrust,
			func(d doc) { delete(stmtOf(d, 0), "Condition") }},
		{"image logs of every group", func(t *testing.T) any { return inline(t, synthesized, "SandboxBuildRole") }, nil,
			func(d doc) {
				stmtOf(d, 2)["Resource"] = doc{"Fn::Sub": "arn:${AWS::Partition}:logs:${AWS::Region}:${AWS::AccountId}:log-group:/rayito/*"}
			}},
		{"deny turned allow-all", func(t *testing.T) any { return inline(t, synthesized, "SandboxBuildRole") }, nil,
			func(d doc) { stmtOf(d, 0)["Effect"] = "Deny" }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			orig := c.source(t)
			want := c.want
			if want == nil {
				// The asset statements: the table with this synth's object.
				switch c.name {
				case "whole bootstrap bucket":
					want = []stmt{{Sid: "ReadCodeAsset", Actions: []string{"s3:GetObject"}, Resources: []string{objectOf(t, orig, "ReadCodeAsset")}}}
				default:
					want = imageBuild(objectOf(t, orig, "ReadImageArtifact"))
				}
			}
			if err := checkDocument(orig, want); err != nil {
				t.Fatalf("the synthesized document fails before widening: %v", err)
			}
			var d doc
			b, _ := json.Marshal(orig)
			json.Unmarshal(b, &d)
			c.widen(d)
			if err := checkDocument(d, want); err == nil {
				t.Error("the widened document passes the checker")
			}
		})
	}
}

package infra_test

import (
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/rayito-dev/rayito/agenthost/agentcore"
	"github.com/rayito-dev/rayito/agenthost/project"
)

// ---------------------------------------------------------------------------
// One table for the AgentCore roles (issue 33): the plan `rayito agent plan
// --target agentcore` prints (agenthost/agentcore.NewPlan) and the roles
// infra/agentcore-runtime.yaml deploys. For each project and options the
// template is resolved as CloudFormation would for the plan's parameters
// (its Fn::If, Ref, Fn::Sub and Fn::GetAtt), and each role's name, trust and
// statements must equal the plan's, statement for statement. The parameters
// are the plan's: AgentName = Agent, RuntimeName = Runtime,
// EcrRepositoryName = Repository, ArtifactBucket = the option,
// BedrockModelArns and ReadableSecretArns = the resources of the plan's
// InvokeBedrockModels and ReadSecrets statements ("" without them).
// ---------------------------------------------------------------------------

// apNoValue is what !Ref AWS::NoValue resolves to: the element vanishes.
type apNoValue struct{}

// apEnv is what the template is resolved with for one plan.
type apEnv struct {
	params map[string]string   // String and Number parameters, pseudo parameters
	lists  map[string][]string // CommaDelimitedList parameters
	getAtt map[string]string   // "Resource.Attribute" -> value
	conds  map[string]any      // the template's Conditions
}

// resolve evaluates v: intrinsic functions are replaced by their values,
// Fn::If by its branch, and AWS::NoValue removes the element or key.
func (e apEnv) resolve(v any) (any, error) {
	switch x := v.(type) {
	case string:
		return x, nil
	case []any:
		out := []any{}
		for _, el := range x {
			r, err := e.resolve(el)
			if err != nil {
				return nil, err
			}
			if _, gone := r.(apNoValue); !gone {
				out = append(out, r)
			}
		}
		return out, nil
	case map[string]any:
		if len(x) == 1 {
			for fn, arg := range x {
				if fn == "Ref" || fn == "Condition" || strings.HasPrefix(fn, "Fn::") {
					return e.intrinsic(fn, arg)
				}
			}
		}
		out := map[string]any{}
		for k, el := range x {
			r, err := e.resolve(el)
			if err != nil {
				return nil, err
			}
			if _, gone := r.(apNoValue); !gone {
				out[k] = r
			}
		}
		return out, nil
	}
	return nil, fmt.Errorf("cannot resolve %v", v)
}

func (e apEnv) intrinsic(fn string, arg any) (any, error) {
	switch fn {
	case "Ref":
		name, _ := arg.(string)
		if name == "AWS::NoValue" {
			return apNoValue{}, nil
		}
		if l, ok := e.lists[name]; ok {
			out := []any{}
			for _, s := range l {
				out = append(out, s)
			}
			return out, nil
		}
		if s, ok := e.params[name]; ok {
			return s, nil
		}
		return nil, fmt.Errorf("Ref %q: no value", name)
	case "Fn::GetAtt":
		l, _ := arg.([]any)
		if len(l) == 2 {
			if s, ok := e.getAtt[fmt.Sprintf("%v.%v", l[0], l[1])]; ok {
				return s, nil
			}
		}
		return nil, fmt.Errorf("Fn::GetAtt %v: no value", arg)
	case "Fn::Sub":
		s, ok := arg.(string)
		if !ok {
			return nil, fmt.Errorf("Fn::Sub %v: only the string form is resolved", arg)
		}
		var err error
		out := subVar.ReplaceAllStringFunc(s, func(m string) string {
			name := m[2 : len(m)-1]
			if v, ok := e.params[name]; ok {
				return v
			}
			if v, ok := e.getAtt[name]; ok {
				return v
			}
			err = fmt.Errorf("Fn::Sub: ${%s} has no value", name)
			return ""
		})
		return out, err
	case "Fn::If":
		l, ok := arg.([]any)
		if !ok || len(l) != 3 {
			return nil, fmt.Errorf("Fn::If %v", arg)
		}
		on, err := acEval(map[string]any{"Condition": l[0]}, e.conds, e.lists)
		if err != nil {
			return nil, err
		}
		if on == true {
			return e.resolve(l[1])
		}
		return e.resolve(l[2])
	}
	return nil, fmt.Errorf("unsupported function %s", fn)
}

// apStrings reads a resolved Action or Resource: a string or a list.
func apStrings(v any) ([]string, error) {
	switch x := v.(type) {
	case string:
		return []string{x}, nil
	case []any:
		var out []string
		for _, el := range x {
			s, ok := el.(string)
			if !ok {
				return nil, fmt.Errorf("list element %v is not a string", el)
			}
			out = append(out, s)
		}
		return out, nil
	}
	return nil, fmt.Errorf("%v is neither a string nor a list", v)
}

// apConditions flattens a resolved Condition block to "Operator key" ->
// value, the plan's form (a list value is joined with commas).
func apConditions(v any) (map[string]string, error) {
	cm, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("Condition %v is not a mapping", v)
	}
	out := map[string]string{}
	for op, kv := range cm {
		kvm, ok := kv.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("Condition %s is not a mapping", op)
		}
		for k, val := range kvm {
			vals, err := apStrings(val)
			if err != nil {
				return nil, fmt.Errorf("Condition %s %s: %v", op, k, err)
			}
			out[op+" "+k] = strings.Join(vals, ",")
		}
	}
	return out, nil
}

// apStatement reads one resolved identity-policy statement.
func apStatement(v any) (agentcore.Statement, error) {
	var s agentcore.Statement
	m, ok := v.(map[string]any)
	if !ok {
		return s, fmt.Errorf("statement %v is not a mapping", v)
	}
	for k, val := range m {
		var err error
		switch k {
		case "Sid":
			s.Sid, _ = val.(string)
		case "Effect":
			s.Effect, _ = val.(string)
		case "Action":
			s.Action, err = apStrings(val)
		case "Resource":
			s.Resource, err = apStrings(val)
		case "Condition":
			s.Condition, err = apConditions(val)
		default:
			// NotAction, NotResource, Principal: nothing the plan can say.
			err = fmt.Errorf("key %s", k)
		}
		if err != nil {
			return s, fmt.Errorf("statement %q: %v", s.Sid, err)
		}
	}
	return s, nil
}

// apTrustOps are the plan's words for the trust policy's operators.
var apTrustOps = map[string]string{"StringEquals": "=", "ArnLike": "like"}

// apTrust reads a resolved trust policy: its one statement's service and
// conditions in the plan's form ("aws:SourceAccount = 111122223333").
func apTrust(v any) (service string, conds []string, err error) {
	doc, _ := v.(map[string]any)
	list, _ := doc["Statement"].([]any)
	if len(list) != 1 {
		return "", nil, fmt.Errorf("%d trust statements, want 1", len(list))
	}
	m, _ := list[0].(map[string]any)
	principal, _ := m["Principal"].(map[string]any)
	service, _ = principal["Service"].(string)
	if m["Effect"] != "Allow" || m["Action"] != "sts:AssumeRole" || len(principal) != 1 || service == "" {
		return "", nil, fmt.Errorf("trust statement %v is not one service's sts:AssumeRole", m)
	}
	for k := range m {
		if !slices.Contains([]string{"Sid", "Effect", "Principal", "Action", "Condition"}, k) {
			return "", nil, fmt.Errorf("trust statement key %s", k)
		}
	}
	if m["Condition"] == nil {
		return service, nil, nil
	}
	cm, err := apConditions(m["Condition"])
	if err != nil {
		return "", nil, err
	}
	for opKey, val := range cm {
		op, key, _ := strings.Cut(opKey, " ")
		if w, ok := apTrustOps[op]; ok {
			op = w
		}
		conds = append(conds, key+" "+op+" "+val)
	}
	slices.Sort(conds)
	return service, conds, nil
}

// apRoles are the template's roles in the plan's order.
var apRoles = []string{"RuntimeRole", "BuildRole"}

// apParameters are the template parameters the plan's values fill (the
// rest keep their defaults); lists hold "" when the plan has no statement.
func apParameters(pl *agentcore.Plan, o agentcore.Options) (map[string]string, map[string][]string) {
	resources := func(sid string) []string {
		for _, s := range pl.Roles[0].Statements {
			if s.Sid == sid {
				return slices.Clone(s.Resource)
			}
		}
		return []string{""}
	}
	partition := o.Partition
	if partition == "" {
		partition = "aws"
	}
	return map[string]string{
			"AgentName": pl.Agent, "RuntimeName": pl.Runtime, "EcrRepositoryName": pl.Repository, "ArtifactBucket": o.ArtifactBucket,
			"AWS::Region": o.Region, "AWS::AccountId": o.Account, "AWS::Partition": partition,
		}, map[string][]string{
			"BedrockModelArns": resources("InvokeBedrockModels"), "ReadableSecretArns": resources("ReadSecrets"),
		}
}

// apEnvFor resolves the template's parameters for pl: the plan's values,
// else the defaults, each held to its AllowedPattern and lengths (a value
// CloudFormation would refuse is a problem: the plan could not deploy);
// Repository.Arn and BuildLogGroup.Arn as CloudFormation returns them.
func apEnvFor(tpl map[string]any, pl *agentcore.Plan, o agentcore.Options) (apEnv, problems) {
	var p problems
	params, lists := apParameters(pl, o)
	env := apEnv{params: map[string]string{}, lists: map[string][]string{}, getAtt: map[string]string{}, conds: section(tpl, "Conditions")}
	for _, k := range []string{"AWS::Region", "AWS::AccountId", "AWS::Partition"} {
		env.params[k] = params[k]
	}
	for name, raw := range section(tpl, "Parameters") {
		def, _ := raw.(map[string]any)
		typ := str(def["Type"])
		var vals []string
		switch v, ok := params[name]; {
		case ok:
			vals = []string{v}
		case lists[name] != nil:
			vals = lists[name]
		case def["Default"] != nil:
			vals = strings.Split(str(def["Default"]), ",")
		default:
			p.addf("parameter %s: the plan gives no value and the template no default", name)
			continue
		}
		if typ == "CommaDelimitedList" {
			env.lists[name] = vals
		} else {
			env.params[name] = strings.Join(vals, ",")
		}
		if pat, ok := def["AllowedPattern"].(string); ok {
			re, err := regexp.Compile(pat)
			if err != nil {
				p.addf("parameter %s: pattern %q: %v", name, pat, err)
				continue
			}
			for _, v := range vals {
				if !re.MatchString(v) {
					p.addf("parameter %s = %q: refused by the template's AllowedPattern", name, v)
				}
			}
		}
		for _, v := range vals {
			if mn := def["MinLength"]; mn != nil && len(v) < apAtoi(mn) {
				p.addf("parameter %s = %q: under MinLength %v", name, v, mn)
			}
			if mx := def["MaxLength"]; mx != nil && len(v) > apAtoi(mx) {
				p.addf("parameter %s = %q: over MaxLength %v", name, v, mx)
			}
		}
	}
	arn := func(service, res string) string {
		return fmt.Sprintf("arn:%s:%s:%s:%s:%s", env.params["AWS::Partition"], service, env.params["AWS::Region"], env.params["AWS::AccountId"], res)
	}
	repo, err := env.resolve(props(tpl, "Repository")["RepositoryName"])
	if s, ok := repo.(string); err == nil && ok {
		env.getAtt["Repository.Arn"] = arn("ecr", "repository/"+s)
	} else {
		p.addf("Repository: RepositoryName %v: %v", repo, err)
	}
	group, err := env.resolve(props(tpl, "BuildLogGroup")["LogGroupName"])
	if s, ok := group.(string); err == nil && ok {
		// A log group's Arn attribute ends in ":*".
		env.getAtt["BuildLogGroup.Arn"] = arn("logs", "log-group:"+s+":*")
	} else {
		p.addf("BuildLogGroup: LogGroupName %v: %v", group, err)
	}
	return env, p
}

// apAtoi reads a template number (a YAML scalar).
func apAtoi(v any) int {
	n, _ := strconv.Atoi(fmt.Sprint(v))
	return n
}

// apSame compares one role's statements, in order, field by field; the
// order of actions and resources within a statement does not matter.
func apSame(role string, tplStmts, planStmts []agentcore.Statement) problems {
	var p problems
	sids := func(l []agentcore.Statement) []string {
		var out []string
		for _, s := range l {
			out = append(out, s.Sid)
		}
		return out
	}
	if !slices.Equal(sids(tplStmts), sids(planStmts)) {
		p.addf("%s: statements %v in the template, %v in the plan", role, sids(tplStmts), sids(planStmts))
	}
	for i := range min(len(tplStmts), len(planStmts)) {
		t, pl := tplStmts[i], planStmts[i]
		where := fmt.Sprintf("%s statement %d (%s)", role, i, pl.Sid)
		if t.Effect != pl.Effect {
			p.addf("%s: Effect %q in the template, %q in the plan", where, t.Effect, pl.Effect)
		}
		for _, f := range []struct {
			name         string
			tpl, planned []string
		}{{"actions", t.Action, pl.Action}, {"resources", t.Resource, pl.Resource}} {
			a, b := slices.Sorted(slices.Values(f.tpl)), slices.Sorted(slices.Values(f.planned))
			if !slices.Equal(a, b) {
				p.addf("%s: %s %v in the template, %v in the plan (the plan adds %v, lacks %v)", where, f.name, a, b, apMinus(b, a), apMinus(a, b))
			}
		}
		if len(t.Condition)+len(pl.Condition) > 0 && !maps.Equal(t.Condition, pl.Condition) {
			p.addf("%s: conditions %v in the template, %v in the plan", where, t.Condition, pl.Condition)
		}
	}
	return p
}

// apMinus is a without b's elements.
func apMinus(a, b []string) []string {
	var out []string
	for _, s := range a {
		if !slices.Contains(b, s) {
			out = append(out, s)
		}
	}
	return out
}

// apCompare resolves tpl for pl and reports every difference between the
// template's roles and the plan's.
func apCompare(tpl map[string]any, pl *agentcore.Plan, o agentcore.Options) problems {
	env, p := apEnvFor(tpl, pl, o)
	if len(pl.Roles) != len(apRoles) {
		p.addf("the plan has %d roles, the template %d (%v)", len(pl.Roles), len(apRoles), apRoles)
		return p
	}
	for i, name := range apRoles {
		want := pl.Roles[i]
		rp := props(tpl, name)
		if n, err := env.resolve(rp["RoleName"]); err != nil || n != want.Name {
			p.addf("%s: RoleName %v (%v) in the template, %q in the plan", name, n, err, want.Name)
		}
		for _, k := range []string{"ManagedPolicyArns", "PermissionsBoundary"} {
			if _, ok := rp[k]; ok {
				p.addf("%s: %s in the template, none in the plan", name, k)
			}
		}
		trust, err := env.resolve(rp["AssumeRolePolicyDocument"])
		if err != nil {
			p.addf("%s: trust: %v", name, err)
		} else if service, conds, err := apTrust(trust); err != nil {
			p.addf("%s: trust: %v", name, err)
		} else {
			if service != want.TrustedBy {
				p.addf("%s: trusted by %s in the template, %s in the plan", name, service, want.TrustedBy)
			}
			if planned := slices.Sorted(slices.Values(want.Conditions)); !slices.Equal(conds, planned) {
				p.addf("%s: trust conditions %q in the template, %q in the plan", name, conds, planned)
			}
		}
		var got []agentcore.Statement
		pols, _ := rp["Policies"].([]any)
		for _, pol := range pols {
			doc, err := env.resolve(section(pol.(map[string]any), "PolicyDocument"))
			if err != nil {
				p.addf("%s: %v", name, err)
				continue
			}
			list, _ := doc.(map[string]any)["Statement"].([]any)
			for _, raw := range list {
				s, err := apStatement(raw)
				if err != nil {
					p.addf("%s: %v", name, err)
					continue
				}
				got = append(got, s)
			}
		}
		p = append(p, apSame(name, got, want.Statements)...)
	}
	// The build project the plan names, reading the context the plan
	// uploads (the plan's build context is the prefix the source is in).
	bp := props(tpl, "BuildProject")
	if n, err := env.resolve(bp["Name"]); err != nil || n != pl.BuildProject {
		p.addf("BuildProject: Name %v (%v) in the template, %q in the plan", n, err, pl.BuildProject)
	}
	loc, err := env.resolve(section(bp, "Source")["Location"])
	context, _, _ := strings.Cut(pl.BuildContext, " ")
	if s, ok := loc.(string); err != nil || !ok || context == "" || !strings.HasPrefix("s3://"+s, context) {
		p.addf("BuildProject: source %v (%v) outside the plan's build context %q", loc, err, pl.BuildContext)
	}
	return p
}

// apCase is one deployment the plan and the template must agree on.
type apCase struct {
	name    string
	project string // rayito-agent.toml
	opts    agentcore.Options
	// models and secrets are what the runtime role must grant (nil: no
	// InvokeBedrockModels, no ReadSecrets statement).
	models, secrets []string
}

const (
	apAccount = "111122223333"
	apBucket  = "my-rayito-artifacts"
	apModel   = "arn:aws:bedrock:us-east-1::foundation-model/anthropic.claude-sonnet-4-20250514-v1:0"
	apProfile = "arn:aws:bedrock:eu-west-1:111122223333:inference-profile/eu.anthropic.claude-sonnet-4-20250514-v1:0"
	apModelEU = "arn:aws:bedrock:eu-west-1::foundation-model/anthropic.claude-sonnet-4-20250514-v1:0"
	apSecretA = "arn:aws:secretsmanager:eu-west-1:111122223333:secret:prod/db-AbC123"
	apSecretB = "arn:aws:secretsmanager:eu-west-1:111122223333:secret:prod/api_token-XyZ789"
	apSecretC = "arn:aws:secretsmanager:eu-west-1:111122223333:secret:shared/json-Qq1234"
	apOpenAI  = "arn:aws:secretsmanager:eu-west-1:111122223333:secret:openai-key-Op3nAi"
)

// apBedrock is a project whose model is on Bedrock in us-east-1.
const apBedrock = `name = "support-bot"
command = ["python3", "agent.py"]
[model]
provider = "bedrock"
id = "anthropic.claude-sonnet-4-20250514-v1:0"
region = "us-east-1"
`

const apBare = `name = "bare"
command = ["./agent"]
`

func apEU(o agentcore.Options) agentcore.Options {
	o.Region, o.Account, o.ArtifactBucket = "eu-west-1", apAccount, apBucket
	return o
}

var apCases = []apCase{
	{name: "bedrock model defaulted", project: apBedrock, opts: apEU(agentcore.Options{}), models: []string{apModel}},
	{name: "bedrock models given", project: apBedrock, opts: apEU(agentcore.Options{BedrockModels: []string{apProfile, apModelEU}}),
		models: []string{apModelEU, apProfile}},
	{name: "no model", project: apBare, opts: apEU(agentcore.Options{})},
	{name: "empty lists", project: apBare, opts: apEU(agentcore.Options{BedrockModels: []string{}, ReadableSecrets: []string{}})},
	{name: "readable secrets", project: apBare, opts: apEU(agentcore.Options{ReadableSecrets: []string{apSecretB, apSecretA}}),
		secrets: []string{apSecretB, apSecretA}},
	{name: "secret_env ARNs", project: apBedrock + `[secret_env]
DB_PASSWORD = "` + apSecretA + `"
API_TOKEN = "` + apSecretB + `"
[[secret_env_from]]
secret = "` + apSecretC + `"
keys = ["SERVICE_USER", "SERVICE_PASS"]
`, opts: apEU(agentcore.Options{ReadableSecrets: []string{apSecretB}}),
		models: []string{apModel}, secrets: []string{apSecretB, apSecretA, apSecretC}},
	{name: "external openai model", project: `name = "chatter"
command = ["node", "agent.js"]
[model]
provider = "openai"
id = "gpt-4.1"
key_secret = "` + apOpenAI + `"
`, opts: apEU(agentcore.Options{ExternalModel: true, ReadableSecrets: []string{apOpenAI}}), secrets: []string{apOpenAI}},
	{name: "external openai-compatible model and a bedrock model", project: `name = "mixed"
command = ["node", "agent.js"]
[model]
provider = "openai-compatible"
id = "llama-3.3-70b"
base_url = "https://llm.example.com/v1"
`, opts: apEU(agentcore.Options{ExternalModel: true, BedrockModels: []string{apProfile}}), models: []string{apProfile}},
	{name: "GovCloud, longest name", project: `name = "a` + strings.Repeat("b-", 15) + `c"
command = ["./agent"]
[model]
provider = "bedrock"
id = "anthropic.claude-3-5-sonnet-20240620-v1:0"
region = "us-gov-west-1"
[secret_env]
TOKEN = "arn:aws-us-gov:secretsmanager:us-gov-west-1:444455556666:secret:token-GovGov"
`, opts: agentcore.Options{Region: "us-gov-west-1", Account: "444455556666", Partition: "aws-us-gov", ArtifactBucket: "gov-artifacts"},
		models:  []string{"arn:aws-us-gov:bedrock:us-gov-west-1::foundation-model/anthropic.claude-3-5-sonnet-20240620-v1:0"},
		secrets: []string{"arn:aws-us-gov:secretsmanager:us-gov-west-1:444455556666:secret:token-GovGov"}},
	{name: "longest name, longest region", project: `name = "a` + strings.Repeat("b", 31) + `"
command = ["./agent"]
`, opts: agentcore.Options{Region: "ap-southeast-7", Account: apAccount, ArtifactBucket: apBucket}},
}

// apPlan plans tc.
func apPlan(t *testing.T, tc apCase) *agentcore.Plan {
	t.Helper()
	proj, err := project.Parse([]byte(tc.project))
	if err != nil {
		t.Fatalf("project: %v", err)
	}
	pl, err := agentcore.NewPlan(proj, tc.opts)
	if err != nil {
		t.Fatalf("plan: %v", err)
	}
	return pl
}

// TestAgentCorePlanMatchesTemplate: for each deployment the template's two
// roles, resolved for the plan's parameters, are the plan's roles: names,
// trust, and each statement's Sid, Effect, actions, resources and
// conditions, in order.
func TestAgentCorePlanMatchesTemplate(t *testing.T) {
	tpl := loadTemplateFile(t, acTemplate)
	if def := str(section(section(tpl, "Parameters"), "ArtifactPrefix")["Default"]); def != agentcore.ArtifactPrefix {
		t.Errorf("ArtifactPrefix: the template's default %q, the plan's %q", def, agentcore.ArtifactPrefix)
	}
	for _, tc := range apCases {
		t.Run(tc.name, func(t *testing.T) {
			pl := apPlan(t, tc)
			report(t, apCompare(tpl, pl, tc.opts))
			// The cases say what they are about: the plan's lists are the
			// expected ones (so the comparison above covered them).
			_, lists := apParameters(pl, tc.opts)
			for name, want := range map[string][]string{"BedrockModelArns": tc.models, "ReadableSecretArns": tc.secrets} {
				if want == nil {
					want = []string{""}
				}
				if got := lists[name]; !slices.Equal(slices.Sorted(slices.Values(got)), slices.Sorted(slices.Values(want))) {
					t.Errorf("%s: the plan grants %v, the case expects %v", name, got, want)
				}
			}
		})
	}
}

// TestAgentCorePlanComparisonCatches: a plan or a template that differs
// from the other is reported, whichever side was widened.
func TestAgentCorePlanComparisonCatches(t *testing.T) {
	base := loadTemplateFile(t, acTemplate)
	// secret_env ARNs: both optional statements present.
	i := slices.IndexFunc(apCases, func(c apCase) bool { return c.name == "secret_env ARNs" })
	if i < 0 {
		t.Fatal("no case secret_env ARNs")
	}
	tc := apCases[i]
	stmtOf := func(pl *agentcore.Plan, role int, sid string) *agentcore.Statement {
		for i := range pl.Roles[role].Statements {
			if pl.Roles[role].Statements[i].Sid == sid {
				return &pl.Roles[role].Statements[i]
			}
		}
		t.Fatalf("the plan has no %s", sid)
		return nil
	}
	cases := []struct {
		name   string
		plan   func(pl *agentcore.Plan)
		tpl    func(t *testing.T, tpl map[string]any)
		opts   func(o *agentcore.Options)
		report string
	}{
		{name: "the plan's pull widened with a push action", plan: func(pl *agentcore.Plan) {
			s := stmtOf(pl, 0, "PullOwnImage")
			s.Action = append(s.Action, "ecr:PutImage")
		}, report: "RuntimeRole statement 0 (PullOwnImage): actions [ecr:BatchGetImage ecr:GetDownloadUrlForLayer] in the template, [ecr:BatchGetImage ecr:GetDownloadUrlForLayer ecr:PutImage] in the plan (the plan adds [ecr:PutImage]"},
		{name: "the plan's secrets widened", plan: func(pl *agentcore.Plan) {
			s := stmtOf(pl, 0, "ReadSecrets")
			s.Action = append(s.Action, "secretsmanager:ListSecrets")
		}, report: "(the plan adds [secretsmanager:ListSecrets]"},
		{name: "the plan's build reads the whole bucket", plan: func(pl *agentcore.Plan) {
			stmtOf(pl, 1, "ReadBuildContext").Resource = []string{"arn:aws:s3:::" + apBucket + "/*"}
		}, report: "BuildRole statement 0 (ReadBuildContext): resources"},
		{name: "the plan drops the metrics condition", plan: func(pl *agentcore.Plan) {
			stmtOf(pl, 0, "AgentCoreMetricsUnscoped").Condition = nil
		}, report: "conditions map[StringEquals cloudwatch:namespace:bedrock-agentcore] in the template, map[] in the plan"},
		{name: "the plan adds a statement", plan: func(pl *agentcore.Plan) {
			pl.Roles[1].Statements = append(pl.Roles[1].Statements, agentcore.Statement{Sid: "More", Effect: "Allow", Action: []string{"ecr:DescribeImages"}, Resource: []string{"*"}})
		}, report: "BuildRole: statements"},
		{name: "the plan denies", plan: func(pl *agentcore.Plan) {
			stmtOf(pl, 0, "PullOwnImage").Effect = "Deny"
		}, report: "Effect \"Allow\" in the template, \"Deny\" in the plan"},
		{name: "the plan's trust without aws:SourceArn", plan: func(pl *agentcore.Plan) {
			pl.Roles[0].Conditions = pl.Roles[0].Conditions[:1]
		}, report: "RuntimeRole: trust conditions"},
		{name: "the plan's role name", plan: func(pl *agentcore.Plan) {
			pl.Roles[1].Name = "rayito-agentcore-build"
		}, report: "BuildRole: RoleName"},
		{name: "the plan trusts another service", plan: func(pl *agentcore.Plan) {
			pl.Roles[1].TrustedBy = "lambda.amazonaws.com"
		}, report: "BuildRole: trusted by codebuild.amazonaws.com in the template, lambda.amazonaws.com in the plan"},
		{name: "the plan's runtime name refused by the template", plan: func(pl *agentcore.Plan) {
			pl.Runtime = "rayito-" + pl.Agent
		}, report: "parameter RuntimeName = \"rayito-support-bot\": refused"},
		{name: "an artifact bucket the template refuses", opts: func(o *agentcore.Options) {
			o.ArtifactBucket = "ARTIFACT-BUCKET"
		}, report: "parameter ArtifactBucket = \"ARTIFACT-BUCKET\": refused"},
		{name: "the template widened with an action", tpl: func(t *testing.T, tpl map[string]any) {
			addToList(findStmt(t, tpl, acRuntime, "WorkloadAccessTokens"), "Action", "bedrock-agentcore:GetWorkloadAccessTokenForUserId")
		}, report: "(the plan adds [], lacks [bedrock-agentcore:GetWorkloadAccessTokenForUserId])"},
		{name: "the template's secrets granted without a condition", tpl: func(t *testing.T, tpl map[string]any) {
			findStmt(t, tpl, acRuntime, "ReadSecrets")["Resource"] = "*"
		}, report: "RuntimeRole statement 7 (ReadSecrets): resources [*] in the template"},
		{name: "the template's build trust without aws:SourceAccount", tpl: func(t *testing.T, tpl map[string]any) {
			delete(findStmt(t, tpl, acBuildTrust, "CodeBuildInThisAccount"), "Condition")
		}, report: "BuildRole: trust conditions [] in the template"},
		{name: "the template's log group renamed", tpl: func(t *testing.T, tpl map[string]any) {
			props(tpl, "BuildLogGroup")["LogGroupName"] = map[string]any{"Fn::Sub": "/aws/codebuild/${AgentName}"}
		}, report: "BuildRole statement 1 (WriteBuildLogs): resources"},
		{name: "the template's new parameter without a default", tpl: func(t *testing.T, tpl map[string]any) {
			section(tpl, "Parameters")["KmsKeyArn"] = map[string]any{"Type": "String"}
		}, report: "parameter KmsKeyArn: the plan gives no value"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o := tc.opts
			if c.opts != nil {
				c.opts(&o)
			}
			proj, err := project.Parse([]byte(tc.project))
			if err != nil {
				t.Fatal(err)
			}
			pl, err := agentcore.NewPlan(proj, o)
			if err != nil {
				t.Fatal(err)
			}
			tpl := deepCopy(base).(map[string]any)
			if len(apCompare(tpl, pl, o)) != 0 && c.opts == nil {
				t.Fatalf("the unmodified plan and template differ: %v", apCompare(tpl, pl, o))
			}
			if c.plan != nil {
				c.plan(pl)
			}
			if c.tpl != nil {
				c.tpl(t, tpl)
			}
			p := apCompare(tpl, pl, o)
			for _, s := range p {
				if strings.Contains(s, c.report) {
					return
				}
			}
			t.Errorf("not reported: %q; reported %d: %v", c.report, len(p), p)
		})
	}
}

// TestAgentCorePlanRefusesWhatTheTemplateRefuses: a project name the
// project file allows but whose repository name ECR (and the template's
// EcrRepositoryName pattern) refuses is a typed plan error, not a plan the
// stack would fail on.
func TestAgentCorePlanRefusesWhatTheTemplateRefuses(t *testing.T) {
	for _, name := range []string{"agent-", "my--agent", "a-", "a" + strings.Repeat("-", 31)} {
		proj, err := project.Parse([]byte("name = \"" + name + "\"\ncommand = [\"./agent\"]\n"))
		if err != nil {
			t.Fatalf("%s: the project file refuses it (%v): the case is moot", name, err)
		}
		_, err = agentcore.NewPlan(proj, apEU(agentcore.Options{}))
		var pe *agentcore.Error
		if !errors.Is(err, agentcore.ErrPlan) || !errors.As(err, &pe) || pe.Code != agentcore.CodeResourceInvalid {
			t.Errorf("%s: plan error %v, want %s", name, err, agentcore.CodeResourceInvalid)
		}
	}
}

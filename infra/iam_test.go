package infra_test

import (
	"fmt"
	"maps"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// ---------------------------------------------------------------------------
// Expectations. Widening any statement of iam.yaml (an action, a resource, a
// condition, a principal, a new statement or a new policy document) makes a
// test fail until this table is changed too, in review.
// ---------------------------------------------------------------------------

const (
	imageARN     = "arn:${AWS::Partition}:lambda:${AWS::Region}:${AWS::AccountId}:microvm-image:${ImageNamePrefix}*"
	microvmARN   = "arn:${AWS::Partition}:lambda:${AWS::Region}:${AWS::AccountId}:microvm:*"
	connectorARN = "arn:${AWS::Partition}:lambda:${AWS::Region}:aws:network-connector:aws-network-connector:*"
	artifactObjs = "arn:${AWS::Partition}:s3:::${ArtifactBucket}/images/*"
	artifactBkt  = "arn:${AWS::Partition}:s3:::${ArtifactBucket}"
	persistObjs  = "arn:${AWS::Partition}:s3:::${PersistenceBucket}/${PersistencePrefix}*"
	persistBkt   = "arn:${AWS::Partition}:s3:::${PersistenceBucket}"
	logGroups    = "arn:${AWS::Partition}:logs:${AWS::Region}:${AWS::AccountId}:log-group:${LogGroupPrefix}${ImageNamePrefix}*"
	logStreams   = logGroups + ":log-stream:*"
	buildRoleARN = "GetAtt:BuildRole.Arn"
	execRoleARN  = "GetAtt:ExecutionRole.Arn"

	passedToLambda = "StringEquals iam:PassedToService=lambda.amazonaws.com"
	sourceAccount  = "StringEquals aws:SourceAccount=Ref:AWS::AccountId"
)

// unscopedActions are the only actions allowed on Resource "*", each with the
// reason it cannot be scoped.
var unscopedActions = map[string]string{
	"lambda:ListMicrovms":      "GET /microvms names no resource (only filters and nextToken)",
	"lambda:ListMicrovmImages": "GET /microvm-images names no resource (only nameFilter and nextToken)",
}

// stmt is a normalised IAM statement. Resources are rendered: a !Sub keeps
// its template text, !GetAtt X.Y is "GetAtt:X.Y", !Ref X is "Ref:X".
type stmt struct {
	Sid       string
	If        string // the Fn::If condition wrapping the statement, if any
	Principal string
	Actions   []string
	Resources []string
	Condition []string
}

func (s stmt) key() string {
	return fmt.Sprintf("if=%s principal=%s actions=%v resources=%v condition=%v",
		s.If, s.Principal, s.Actions, s.Resources, s.Condition)
}

var launcherStmts = []stmt{
	{Sid: "RunFromRayitoImages", Actions: []string{"lambda:RunMicrovm"},
		Resources: []string{imageARN, microvmARN, connectorARN}},
	{Sid: "ManageMicrovms", Actions: []string{
		"lambda:GetMicrovm", "lambda:TerminateMicrovm", "lambda:SuspendMicrovm",
		"lambda:ResumeMicrovm", "lambda:CreateMicrovmAuthToken"},
		Resources: []string{microvmARN}},
	{Sid: "ReadRayitoImages", Actions: []string{
		"lambda:GetMicrovmImage", "lambda:GetMicrovmImageVersion", "lambda:ListMicrovmImageVersions"},
		Resources: []string{imageARN}},
	{Sid: "ListUnscoped", Actions: []string{"lambda:ListMicrovms", "lambda:ListMicrovmImages"},
		Resources: []string{"*"}},
	{Sid: "PassExecutionRole", If: "CreateExecutionRoleCond", Actions: []string{"iam:PassRole"},
		Resources: []string{execRoleARN}, Condition: []string{passedToLambda}},
}

var publisherStmts = []stmt{
	{Sid: "PublishRayitoImages", Actions: []string{
		"lambda:CreateMicrovmImage", "lambda:UpdateMicrovmImage", "lambda:DeleteMicrovmImage",
		"lambda:UpdateMicrovmImageVersion", "lambda:DeleteMicrovmImageVersion",
		"lambda:GetMicrovmImage", "lambda:GetMicrovmImageVersion", "lambda:ListMicrovmImageVersions",
		"lambda:ListMicrovmImageBuilds", "lambda:GetMicrovmImageBuild"},
		Resources: []string{imageARN}},
	{Sid: "ListImagesUnscoped", Actions: []string{"lambda:ListMicrovmImages"}, Resources: []string{"*"}},
	{Sid: "UploadImageArtifacts", Actions: []string{"s3:PutObject", "s3:GetObject"},
		Resources: []string{artifactObjs}},
	{Sid: "ListImageArtifacts", Actions: []string{"s3:ListBucket"},
		Resources: []string{artifactBkt}, Condition: []string{"StringLike s3:prefix=images/*"}},
	{Sid: "TagRayitoImages", Actions: []string{"lambda:TagResource", "lambda:ListTags"},
		Resources: []string{imageARN}},
	{Sid: "PassBuildRole", Actions: []string{"iam:PassRole"},
		Resources: []string{buildRoleARN}, Condition: []string{passedToLambda}},
}

var lambdaTrust = []stmt{{Principal: "Service=lambda.amazonaws.com", Actions: []string{"sts:AssumeRole"},
	Condition: []string{sourceAccount}}}

// expected maps every policy document of the template to its statements.
// A document not listed here fails the test.
var expected = map[string][]stmt{
	"BuildRole/AssumeRolePolicyDocument": withSid(lambdaTrust, "LambdaMicrovmsBuildInThisAccount"),
	"BuildRole/Policies/build": {
		{Sid: "ReadImageArtifacts", Actions: []string{"s3:GetObject"}, Resources: []string{artifactObjs}},
		{Sid: "CreateBuildLogGroups", Actions: []string{"logs:CreateLogGroup"}, Resources: []string{logGroups}},
		{Sid: "WriteBuildLogs", Actions: []string{"logs:CreateLogStream", "logs:PutLogEvents"},
			Resources: []string{logStreams}},
	},
	"ExecutionRole/AssumeRolePolicyDocument": withSid(lambdaTrust, "LambdaMicrovmsInThisAccount"),
	"ExecutionRole/Policies/sandbox": {
		{Sid: "WriteRuntimeLogs", Actions: []string{"logs:CreateLogStream", "logs:PutLogEvents"},
			Resources: []string{logStreams}},
		{Sid: "ReadWritePersistencePrefix", If: "HasPersistence", Actions: []string{"s3:GetObject", "s3:PutObject", "s3:AbortMultipartUpload"},
			Resources: []string{persistObjs}},
		{Sid: "ListPersistencePrefix", If: "HasPersistence", Actions: []string{"s3:ListBucket"},
			Resources: []string{persistBkt}, Condition: []string{"StringLike s3:prefix=${PersistencePrefix}*"}},
	},
	"SandboxLauncherPolicy/PolicyDocument": launcherStmts,
	"ImagePublisherPolicy/PolicyDocument":  publisherStmts,
	"CallerPolicy/PolicyDocument":          slices.Concat(launcherStmts, publisherStmts),
}

var allowedResourceTypes = map[string]bool{"AWS::IAM::Role": true, "AWS::IAM::ManagedPolicy": true}

var pseudoParams = map[string]bool{
	"AWS::AccountId": true, "AWS::NotificationARNs": true, "AWS::NoValue": true, "AWS::Partition": true,
	"AWS::Region": true, "AWS::StackId": true, "AWS::StackName": true, "AWS::URLSuffix": true,
}

func withSid(in []stmt, sid string) []stmt {
	out := slices.Clone(in)
	for i := range out {
		out[i].Sid = sid
	}
	return out
}

// ---------------------------------------------------------------------------
// Parsing: yaml.v3 nodes to the JSON form of CloudFormation (short tags become
// {"Ref": x} / {"Fn::Sub": x} / {"Fn::GetAtt": [r, a]} / {"Fn::If": ...}).
// ---------------------------------------------------------------------------

var shortTags = map[string]bool{
	"!Ref": true, "!Sub": true, "!GetAtt": true, "!If": true, "!Equals": true, "!Not": true,
	"!And": true, "!Or": true, "!Condition": true, "!Join": true, "!Select": true, "!Split": true,
	"!FindInMap": true, "!GetAZs": true, "!ImportValue": true, "!Base64": true, "!Cidr": true,
}

func convert(n *yaml.Node) (any, error) {
	v, err := convertPlain(n)
	if err != nil || n.Tag == "" || strings.HasPrefix(n.Tag, "!!") {
		return v, err
	}
	if !shortTags[n.Tag] {
		return nil, fmt.Errorf("line %d: unknown tag %s", n.Line, n.Tag)
	}
	switch n.Tag {
	case "!Ref":
		return map[string]any{"Ref": v}, nil
	case "!Condition":
		return map[string]any{"Condition": v}, nil
	case "!GetAtt":
		if s, ok := v.(string); ok {
			res, attr, found := strings.Cut(s, ".")
			if !found {
				return nil, fmt.Errorf("line %d: !GetAtt %q has no attribute", n.Line, s)
			}
			return map[string]any{"Fn::GetAtt": []any{res, attr}}, nil
		}
		return map[string]any{"Fn::GetAtt": v}, nil
	default:
		return map[string]any{"Fn::" + strings.TrimPrefix(n.Tag, "!"): v}, nil
	}
}

func convertPlain(n *yaml.Node) (any, error) {
	switch n.Kind {
	case yaml.DocumentNode:
		return convert(n.Content[0])
	case yaml.AliasNode:
		return nil, fmt.Errorf("line %d: CloudFormation does not support YAML aliases", n.Line)
	case yaml.ScalarNode:
		return n.Value, nil
	case yaml.SequenceNode:
		out := []any{}
		for _, c := range n.Content {
			v, err := convert(c)
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		}
		return out, nil
	case yaml.MappingNode:
		out := map[string]any{}
		for i := 0; i < len(n.Content); i += 2 {
			k := n.Content[i].Value
			if n.Content[i].Anchor != "" || n.Content[i+1].Anchor != "" || k == "<<" {
				return nil, fmt.Errorf("line %d: CloudFormation does not support anchors or merges", n.Content[i].Line)
			}
			if _, dup := out[k]; dup {
				return nil, fmt.Errorf("line %d: duplicate key %q", n.Content[i].Line, k)
			}
			v, err := convert(n.Content[i+1])
			if err != nil {
				return nil, err
			}
			out[k] = v
		}
		return out, nil
	}
	return nil, fmt.Errorf("line %d: unexpected node kind %v", n.Line, n.Kind)
}

func loadTemplate(t *testing.T) map[string]any {
	t.Helper()
	return loadTemplateFile(t, "iam.yaml")
}

// loadTemplateFile parses one template of this directory.
func loadTemplateFile(t *testing.T, name string) map[string]any {
	t.Helper()
	raw, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	v, err := convert(&doc)
	if err != nil {
		t.Fatal(err)
	}
	m, ok := v.(map[string]any)
	if !ok {
		t.Fatal("template is not a mapping")
	}
	return m
}

// ---------------------------------------------------------------------------
// Checker. Every check returns problems instead of failing, so the mutation
// test can prove it reports widened copies.
// ---------------------------------------------------------------------------

type problems []string

func (p *problems) addf(format string, a ...any) { *p = append(*p, fmt.Sprintf(format, a...)) }

func section(tpl map[string]any, name string) map[string]any {
	m, _ := tpl[name].(map[string]any)
	return m
}

var subVar = regexp.MustCompile(`\$\{([^}]*)\}`)

// walk visits every value; refs collects Ref names, Sub variables and GetAtt
// targets, conds every condition name used.
func walk(v any, visit func(kind, name string, locals map[string]bool)) {
	switch x := v.(type) {
	case []any:
		for _, e := range x {
			walk(e, visit)
		}
	case map[string]any:
		for k, e := range x {
			switch k {
			case "Ref":
				if s, ok := e.(string); ok {
					visit("Ref", s, nil)
					continue
				}
			case "Condition":
				if s, ok := e.(string); ok {
					visit("Condition", s, nil)
					continue
				}
			case "Fn::If":
				if l, ok := e.([]any); ok && len(l) == 3 {
					if s, ok := l[0].(string); ok {
						visit("Condition", s, nil)
					}
					walk(l[1:], visit)
					continue
				}
			case "Fn::GetAtt":
				if l, ok := e.([]any); ok && len(l) == 2 {
					if s, ok := l[0].(string); ok {
						visit("GetAtt", s, nil)
						continue
					}
				}
			case "Fn::Sub":
				text, locals := e, map[string]bool{}
				if l, ok := e.([]any); ok && len(l) == 2 {
					text = l[0]
					if vars, ok := l[1].(map[string]any); ok {
						for name := range vars {
							locals[name] = true
						}
					}
					walk(l[1], visit)
				}
				if s, ok := text.(string); ok {
					for _, m := range subVar.FindAllStringSubmatch(s, -1) {
						if !strings.HasPrefix(m[1], "!") {
							visit("Sub", m[1], locals)
						}
					}
					continue
				}
			}
			walk(e, visit)
		}
	}
}

func checkReferences(tpl map[string]any) problems {
	var p problems
	params, resources, conds := section(tpl, "Parameters"), section(tpl, "Resources"), section(tpl, "Conditions")
	used := map[string]bool{}
	for _, sec := range []string{"Conditions", "Resources", "Outputs"} {
		walk(tpl[sec], func(kind, name string, locals map[string]bool) {
			switch kind {
			case "Condition":
				if _, ok := conds[name]; !ok {
					p.addf("%s: condition %q is not defined", sec, name)
				}
				return
			case "GetAtt":
				if _, ok := resources[name]; !ok {
					p.addf("%s: !GetAtt %q names no resource", sec, name)
				}
				return
			case "Sub":
				if locals[name] {
					return
				}
				if res, _, ok := strings.Cut(name, "."); ok && !strings.HasPrefix(name, "AWS::") {
					if _, ok := resources[res]; !ok {
						p.addf("%s: ${%s} names no resource", sec, name)
					}
					return
				}
			}
			used[name] = true
			_, isParam := params[name]
			_, isRes := resources[name]
			if !isParam && !isRes && !pseudoParams[name] {
				p.addf("%s: %s %q names no parameter, resource or pseudo-parameter", sec, kind, name)
			}
		})
	}
	for name := range params {
		if !used[name] {
			p.addf("parameter %q is never used", name)
		}
	}
	for name, r := range resources {
		rm, _ := r.(map[string]any)
		if c, ok := rm["Condition"].(string); ok {
			if _, ok := conds[c]; !ok {
				p.addf("resource %s: condition %q is not defined", name, c)
			}
		}
	}
	return p
}

func render(v any) ([]string, error) {
	switch x := v.(type) {
	case string:
		return []string{x}, nil
	case []any:
		var out []string
		for _, e := range x {
			r, err := render(e)
			if err != nil {
				return nil, err
			}
			out = append(out, r...)
		}
		return out, nil
	case map[string]any:
		if len(x) == 1 {
			if s, ok := x["Fn::Sub"].(string); ok {
				return []string{s}, nil
			}
			if s, ok := x["Ref"].(string); ok {
				return []string{"Ref:" + s}, nil
			}
			if l, ok := x["Fn::GetAtt"].([]any); ok && len(l) == 2 {
				return []string{fmt.Sprintf("GetAtt:%v.%v", l[0], l[1])}, nil
			}
		}
	}
	return nil, fmt.Errorf("cannot render %v", v)
}

func sortedUnique(in []string) []string {
	out := slices.Clone(in)
	sort.Strings(out)
	return slices.Compact(out)
}

func parseStatement(raw any) (stmt, error) {
	var s stmt
	m, ok := raw.(map[string]any)
	if !ok {
		return s, fmt.Errorf("statement is not a mapping: %v", raw)
	}
	if l, ok := m["Fn::If"].([]any); ok && len(m) == 1 {
		if len(l) != 3 || !isNoValue(l[2]) {
			return s, fmt.Errorf("Fn::If statement must be [cond, statement, !Ref AWS::NoValue]")
		}
		inner, err := parseStatement(l[1])
		inner.If, _ = l[0].(string)
		return inner, err
	}
	for k, v := range m {
		switch k {
		case "Sid":
			s.Sid, _ = v.(string)
		case "Effect":
			if v != "Allow" {
				return s, fmt.Errorf("Effect %v (only Allow is expected)", v)
			}
		case "Action":
			a, err := render(v)
			if err != nil {
				return s, err
			}
			s.Actions = sortedUnique(a)
		case "Resource":
			r, err := render(v)
			if err != nil {
				return s, err
			}
			s.Resources = sortedUnique(r)
		case "Principal":
			pm, ok := v.(map[string]any)
			if !ok {
				return s, fmt.Errorf("Principal %v is not a mapping", v)
			}
			var ps []string
			for kind, who := range pm {
				w, err := render(who)
				if err != nil {
					return s, err
				}
				for _, x := range w {
					ps = append(ps, kind+"="+x)
				}
			}
			s.Principal = strings.Join(sortedUnique(ps), ",")
		case "Condition":
			cm, ok := v.(map[string]any)
			if !ok {
				return s, fmt.Errorf("Condition %v is not a mapping", v)
			}
			for op, kv := range cm {
				kvm, ok := kv.(map[string]any)
				if !ok {
					return s, fmt.Errorf("Condition %s is not a mapping", op)
				}
				for ck, cv := range kvm {
					vals, err := render(cv)
					if err != nil {
						return s, err
					}
					s.Condition = append(s.Condition, fmt.Sprintf("%s %s=%s", op, ck, strings.Join(sortedUnique(vals), ",")))
				}
			}
			s.Condition = sortedUnique(s.Condition)
		default:
			// NotAction, NotResource, NotPrincipal and anything unknown.
			return s, fmt.Errorf("unexpected statement key %q", k)
		}
	}
	if len(s.Actions) == 0 {
		return s, fmt.Errorf("statement %q has no Action", s.Sid)
	}
	return s, nil
}

func isNoValue(v any) bool {
	m, ok := v.(map[string]any)
	return ok && len(m) == 1 && m["Ref"] == "AWS::NoValue"
}

// documents returns every policy document of the template by location.
func documents(tpl map[string]any) (map[string][]stmt, problems) {
	var p problems
	docs := map[string][]stmt{}
	add := func(loc string, doc any) { addDocument(docs, &p, loc, doc) }
	for name, r := range section(tpl, "Resources") {
		rm, _ := r.(map[string]any)
		typ, _ := rm["Type"].(string)
		if !allowedResourceTypes[typ] {
			p.addf("resource %s: unexpected type %q", name, typ)
			continue
		}
		props, _ := rm["Properties"].(map[string]any)
		switch typ {
		case "AWS::IAM::Role":
			add(name+"/AssumeRolePolicyDocument", props["AssumeRolePolicyDocument"])
			pols, _ := props["Policies"].([]any)
			for _, pol := range pols {
				pm, _ := pol.(map[string]any)
				add(fmt.Sprintf("%s/Policies/%v", name, pm["PolicyName"]), pm["PolicyDocument"])
			}
			for _, k := range []string{"ManagedPolicyArns", "PermissionsBoundary"} {
				if _, ok := props[k]; ok {
					p.addf("resource %s: unexpected %s", name, k)
				}
			}
		case "AWS::IAM::ManagedPolicy":
			add(name+"/PolicyDocument", props["PolicyDocument"])
		}
	}
	return docs, p
}

// checkTemplate is a stack template's whole check: its documents (with
// what they found wrong), references, the documents against the
// expectation table, the table's rules stated on their own (invariants),
// then the template's other checks. Problems come sorted.
func checkTemplate(tpl map[string]any, documents func(map[string]any) (map[string][]stmt, problems), expected map[string][]stmt,
	invariants func(map[string][]stmt) problems, more ...func(map[string]any) problems) problems {
	docs, p := documents(tpl)
	p = append(p, checkReferences(tpl)...)
	p = append(p, checkExact(docs, expected)...)
	p = append(p, invariants(docs)...)
	for _, check := range more {
		p = append(p, check(tpl)...)
	}
	sort.Strings(p)
	return p
}

// lambdaWant is what a template's Lambda function must be: its own role
// and log group, its code's key (without the ${CodePrefix} and ".zip";
// "" when not checked), exactly these environment variables, and whether
// it needs a reserved concurrency.
type lambdaWant struct {
	role, logs, code string
	env              map[string]string
	reserved         bool
}

// checkFunctions: each function of want runs provided.al2023 on arm64
// with handler bootstrap, its own role (no two share one) and log group,
// its code and exactly its environment variables (values rendered by
// envValue, !If included).
func checkFunctions(tpl map[string]any, want map[string]lambdaWant) problems {
	var p problems
	roles := map[string]string{}
	for _, fn := range slices.Sorted(maps.Keys(want)) {
		w, fp := want[fn], props(tpl, fn)
		if str(fp["Runtime"]) != "provided.al2023" || fmt.Sprint(fp["Architectures"]) != "[arm64]" || str(fp["Handler"]) != "bootstrap" {
			p.addf("%s: runtime %v %v %v (want provided.al2023, [arm64], bootstrap)", fn, fp["Runtime"], fp["Architectures"], fp["Handler"])
		}
		role := str(fp["Role"])
		if role != "GetAtt:"+w.role+".Arn" {
			p.addf("%s: role %s, want its own %s", fn, role, w.role)
		}
		if other, dup := roles[role]; dup {
			p.addf("%s and %s share the role %s", fn, other, role)
		}
		roles[role] = fn
		if str(section(fp, "LoggingConfig")["LogGroup"]) != "Ref:"+w.logs {
			p.addf("%s: logs to %v, want its own %s", fn, section(fp, "LoggingConfig")["LogGroup"], w.logs)
		}
		if _, ok := fp["ReservedConcurrentExecutions"]; w.reserved && !ok {
			p.addf("%s: no reserved concurrency", fn)
		}
		if w.code != "" && str(section(fp, "Code")["S3Key"]) != "${CodePrefix}"+w.code+".zip" {
			p.addf("%s: code %v", fn, section(fp, "Code")["S3Key"])
		}
		got := map[string]string{}
		for k, v := range section(section(fp, "Environment"), "Variables") {
			got[k] = envValue(v)
		}
		if fmt.Sprint(got) != fmt.Sprint(w.env) {
			p.addf("%s: environment %v, want %v", fn, got, w.env)
		}
	}
	return p
}

// sortedLocations is docs' locations in order (problems in a stable
// order).
func sortedLocations(docs map[string][]stmt) []string {
	return slices.Sorted(maps.Keys(docs))
}

// checkActionScope is the rule every role keeps for action a of statement
// s at loc: no wildcard action, and Resource "*" only for the actions of
// unscoped (those AWS cannot scope to a resource).
func checkActionScope(loc string, s stmt, a string, unscoped map[string]string) problems {
	var p problems
	if strings.ContainsAny(a, "*?") || !strings.Contains(a, ":") {
		p.addf("%s statement %q: wildcard action %q", loc, s.Sid, a)
	}
	if slices.Contains(s.Resources, "*") {
		if _, ok := unscoped[a]; !ok {
			p.addf("%s statement %q: %s on Resource \"*\" (not a documented unscoped action)", loc, s.Sid, a)
		}
	}
	return p
}

// checkExact compares every document with an expectation table (one per
// template: expected, evExpected).
func checkExact(docs, expected map[string][]stmt) problems {
	var p problems
	for loc := range docs {
		if _, ok := expected[loc]; !ok {
			p.addf("%s: policy document not in the expectation table", loc)
		}
	}
	for loc, want := range expected {
		got, ok := docs[loc]
		if !ok {
			p.addf("%s: missing", loc)
			continue
		}
		bySid := map[string]stmt{}
		for _, s := range got {
			if _, dup := bySid[s.Sid]; dup {
				p.addf("%s: duplicate Sid %q", loc, s.Sid)
			}
			bySid[s.Sid] = s
		}
		for _, w := range want {
			w.Actions, w.Resources, w.Condition = sortedUnique(w.Actions), sortedUnique(w.Resources), sortedUnique(w.Condition)
			g, ok := bySid[w.Sid]
			if !ok {
				p.addf("%s: statement %q missing", loc, w.Sid)
				continue
			}
			delete(bySid, w.Sid)
			if g.key() != w.key() {
				p.addf("%s statement %q:\n  got  %s\n  want %s", loc, w.Sid, g.key(), w.key())
			}
		}
		for sid, g := range bySid {
			p.addf("%s: unexpected statement %q: %s", loc, sid, g.key())
		}
	}
	return p
}

// checkNoWildcards: no "*" action, no "service:*" or partial wildcard, and
// Resource "*" only on the documented unscoped actions.
func checkNoWildcards(docs map[string][]stmt) problems {
	var p problems
	for loc, ss := range docs {
		for _, s := range ss {
			for _, a := range s.Actions {
				if strings.Contains(a, "*") || strings.Contains(a, "?") || !strings.Contains(a, ":") {
					p.addf("%s statement %q: wildcard action %q", loc, s.Sid, a)
				}
			}
			if slices.Contains(s.Resources, "*") {
				if len(s.Resources) != 1 {
					p.addf("%s statement %q: Resource \"*\" mixed with scoped resources", loc, s.Sid)
				}
				for _, a := range s.Actions {
					if _, ok := unscopedActions[a]; !ok {
						p.addf("%s statement %q: %s on Resource \"*\" (not a documented unscoped action)", loc, s.Sid, a)
					}
				}
			}
			for _, r := range s.Resources {
				if r != "*" && (strings.HasSuffix(r, ":*:*") || strings.HasSuffix(r, ":::*")) {
					p.addf("%s statement %q: unscoped resource %q", loc, s.Sid, r)
				}
			}
			if strings.HasSuffix(loc, "/AssumeRolePolicyDocument") {
				if s.Principal != "Service=lambda.amazonaws.com" || !slices.Contains(s.Condition, sourceAccount) {
					p.addf("%s statement %q: trust must be lambda.amazonaws.com with aws:SourceAccount", loc, s.Sid)
				}
			} else if s.Principal != "" {
				p.addf("%s statement %q: Principal in an identity policy", loc, s.Sid)
			}
		}
	}
	return p
}

var imageWrite = regexp.MustCompile(`^lambda:(Create|Update|Delete|Tag|Untag)Microvm`)

// checkSemantics states the security invariants independently of the table.
func checkSemantics(docs map[string][]stmt) problems {
	var p problems
	passRole := func(loc string, s stmt, role, cond string) {
		if !slices.Contains(s.Actions, "iam:PassRole") {
			return
		}
		if !slices.Equal(s.Resources, []string{role}) {
			p.addf("%s statement %q: iam:PassRole on %v (only %s allowed)", loc, s.Sid, s.Resources, role)
		}
		if !slices.Contains(s.Condition, passedToLambda) {
			p.addf("%s statement %q: iam:PassRole without iam:PassedToService=lambda.amazonaws.com", loc, s.Sid)
		}
		if s.If != cond {
			p.addf("%s statement %q: iam:PassRole must be under condition %q, is %q", loc, s.Sid, cond, s.If)
		}
	}
	for _, s := range docs["SandboxLauncherPolicy/PolicyDocument"] {
		for _, a := range s.Actions {
			if imageWrite.MatchString(a) && a != "lambda:CreateMicrovmAuthToken" {
				p.addf("SandboxLauncherPolicy statement %q: image write action %s", s.Sid, a)
			}
			if strings.HasPrefix(a, "s3:") || a == "lambda:CreateMicrovmShellAuthToken" {
				p.addf("SandboxLauncherPolicy statement %q: unexpected %s", s.Sid, a)
			}
		}
		passRole("SandboxLauncherPolicy", s, execRoleARN, "CreateExecutionRoleCond")
	}
	for _, s := range docs["ImagePublisherPolicy/PolicyDocument"] {
		passRole("ImagePublisherPolicy", s, buildRoleARN, "")
		for _, a := range s.Actions {
			listImages := a == "s3:ListBucket" && slices.Equal(s.Resources, []string{artifactBkt}) &&
				slices.Equal(s.Condition, []string{"StringLike s3:prefix=images/*"})
			if strings.HasPrefix(a, "s3:") && !listImages && !slices.Equal(s.Resources, []string{artifactObjs}) {
				p.addf("ImagePublisherPolicy statement %q: %s outside images/ of the artifact bucket: %v", s.Sid, a, s.Resources)
			}
		}
	}
	for _, s := range docs["CallerPolicy/PolicyDocument"] {
		passRole("CallerPolicy", s, map[bool]string{true: execRoleARN, false: buildRoleARN}[s.If != ""], s.If)
	}
	for _, s := range docs["ExecutionRole/Policies/sandbox"] {
		hasS3 := false
		for _, a := range s.Actions {
			if strings.HasPrefix(a, "s3:Delete") || strings.HasPrefix(a, "s3:PutLifecycle") || strings.HasPrefix(a, "s3:PutBucket") {
				p.addf("ExecutionRole statement %q: %s (the execution role never deletes)", s.Sid, a)
			}
			// Abort discards the parts of rayd's own unfinished upload,
			// no object: only on the prefix's objects, and never with a
			// way to list others' uploads.
			if a == "s3:AbortMultipartUpload" && !slices.Equal(s.Resources, []string{persistObjs}) {
				p.addf("ExecutionRole statement %q: s3:AbortMultipartUpload beyond the persistence prefix: %v", s.Sid, s.Resources)
			}
			if a == "s3:ListBucketMultipartUploads" || a == "s3:*" || a == "s3:Put*" || a == "s3:Get*" {
				p.addf("ExecutionRole statement %q: %s (more than the objects of the prefix)", s.Sid, a)
			}
			if strings.HasPrefix(a, "iam:") || strings.HasPrefix(a, "lambda:") {
				p.addf("ExecutionRole statement %q: %s", s.Sid, a)
			}
			hasS3 = hasS3 || strings.HasPrefix(a, "s3:")
		}
		if !hasS3 {
			continue
		}
		if s.If != "HasPersistence" {
			p.addf("ExecutionRole statement %q: S3 access without the HasPersistence condition", s.Sid)
		}
		for _, r := range s.Resources {
			if r != persistObjs && r != persistBkt {
				p.addf("ExecutionRole statement %q: S3 resource %q outside the persistence prefix", s.Sid, r)
			}
			if r == persistBkt && !slices.Contains(s.Condition, "StringLike s3:prefix=${PersistencePrefix}*") {
				p.addf("ExecutionRole statement %q: s3:ListBucket without the s3:prefix condition", s.Sid)
			}
		}
		for _, a := range s.Actions {
			if a == "s3:ListBucket" && !slices.Equal(s.Resources, []string{persistBkt}) {
				p.addf("ExecutionRole statement %q: s3:ListBucket must be alone on the persistence bucket", s.Sid)
			}
		}
	}
	for _, s := range docs["BuildRole/Policies/build"] {
		for _, a := range s.Actions {
			if strings.HasPrefix(a, "s3:") && (a != "s3:GetObject" || !slices.Equal(s.Resources, []string{artifactObjs})) {
				p.addf("BuildRole statement %q: %s on %v (only s3:GetObject on images/*)", s.Sid, a, s.Resources)
			}
		}
	}
	return p
}

// checkUnion: CallerPolicy is exactly the statements of the launcher plus
// those of the publisher, as parsed from the template.
func checkUnion(docs map[string][]stmt) problems {
	var p problems
	keys := func(locs ...string) []string {
		var out []string
		for _, l := range locs {
			for _, s := range docs[l] {
				out = append(out, s.Sid+" "+s.key())
			}
		}
		sort.Strings(out)
		return out
	}
	union := keys("SandboxLauncherPolicy/PolicyDocument", "ImagePublisherPolicy/PolicyDocument")
	caller := keys("CallerPolicy/PolicyDocument")
	if !slices.Equal(union, caller) {
		p.addf("CallerPolicy is not the union of SandboxLauncherPolicy and ImagePublisherPolicy:\n  caller %v\n  union  %v", caller, union)
	}
	return p
}

func checkOutputs(tpl map[string]any) problems {
	var p problems
	outs := section(tpl, "Outputs")
	for _, name := range []string{"BuildRoleArn", "ExecutionRoleArn", "SandboxLauncherPolicyArn", "ImagePublisherPolicyArn", "CallerPolicyArn"} {
		if _, ok := outs[name]; !ok {
			p.addf("output %s missing", name)
		}
	}
	return p
}

func checkAll(tpl map[string]any) problems {
	docs, p := documents(tpl)
	p = append(p, checkReferences(tpl)...)
	p = append(p, checkExact(docs, expected)...)
	p = append(p, checkNoWildcards(docs)...)
	p = append(p, checkSemantics(docs)...)
	p = append(p, checkUnion(docs)...)
	p = append(p, checkOutputs(tpl)...)
	return p
}

// ---------------------------------------------------------------------------
// Tests.
// ---------------------------------------------------------------------------

func report(t *testing.T, p problems) {
	t.Helper()
	for _, s := range p {
		t.Error(s)
	}
}

func TestTemplateParsesWithShortTags(t *testing.T) {
	tpl := loadTemplate(t)
	for _, k := range []string{"Parameters", "Conditions", "Resources", "Outputs"} {
		if section(tpl, k) == nil {
			t.Errorf("section %s missing", k)
		}
	}
	r := section(section(tpl, "Resources"), "BuildRole")
	if r == nil || r["Type"] != "AWS::IAM::Role" {
		t.Fatalf("BuildRole: %v", r)
	}
	if c := section(section(tpl, "Resources"), "ExecutionRole")["Condition"]; c != "CreateExecutionRoleCond" {
		t.Errorf("ExecutionRole must be conditional, Condition=%v", c)
	}
	if d := section(section(tpl, "Parameters"), "CreateExecutionRole")["Default"]; d != "false" {
		t.Errorf("CreateExecutionRole default %v, want false", d)
	}
	if d := section(section(tpl, "Parameters"), "PersistencePrefix")["Default"]; d != "rayito/persist/" {
		t.Errorf("PersistencePrefix default %v", d)
	}
	if d := section(section(tpl, "Parameters"), "ImageNamePrefix")["Default"]; d != "rayito-" {
		t.Errorf("ImageNamePrefix default %v", d)
	}
}

func TestReferencesAndParameters(t *testing.T) { report(t, checkReferences(loadTemplate(t))) }

func TestPolicyDocumentsMatchExpectations(t *testing.T) {
	docs, p := documents(loadTemplate(t))
	report(t, append(p, checkExact(docs, expected)...))
}

func TestNoWildcards(t *testing.T) {
	docs, p := documents(loadTemplate(t))
	report(t, append(p, checkNoWildcards(docs)...))
}

func TestSecurityInvariants(t *testing.T) {
	docs, p := documents(loadTemplate(t))
	report(t, append(p, checkSemantics(docs)...))
}

func TestCallerIsUnion(t *testing.T) {
	docs, p := documents(loadTemplate(t))
	report(t, append(p, checkUnion(docs)...))
}

func TestOutputs(t *testing.T) { report(t, checkOutputs(loadTemplate(t))) }

// TestExpectationTablesAreMinimal keeps the tables themselves honest: the
// launcher table writes no image, the publisher table launches nothing.
func TestExpectationTablesAreMinimal(t *testing.T) {
	for _, s := range launcherStmts {
		for _, a := range s.Actions {
			if imageWrite.MatchString(a) && a != "lambda:CreateMicrovmAuthToken" {
				t.Errorf("launcher table has %s", a)
			}
		}
	}
	for _, s := range publisherStmts {
		for _, a := range s.Actions {
			if strings.HasSuffix(a, "Microvm") || strings.Contains(a, "AuthToken") || a == "lambda:ListMicrovms" {
				t.Errorf("publisher table has %s", a)
			}
		}
	}
}

// --- mutation test ---------------------------------------------------------

func deepCopy(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = deepCopy(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = deepCopy(e)
		}
		return out
	}
	return v
}

// docStatements returns the Statement list of a document by location.
func docStatements(t *testing.T, tpl map[string]any, loc string) []any {
	t.Helper()
	parts := strings.Split(loc, "/")
	props := section(section(section(tpl, "Resources"), parts[0]), "Properties")
	var doc map[string]any
	switch {
	case len(parts) == 3 && parts[1] == "Policies":
		for _, pol := range props["Policies"].([]any) {
			if pm := pol.(map[string]any); pm["PolicyName"] == parts[2] {
				doc = pm["PolicyDocument"].(map[string]any)
			}
		}
	default:
		doc = props[parts[1]].(map[string]any)
	}
	if doc == nil {
		t.Fatalf("no document %s", loc)
	}
	return doc["Statement"].([]any)
}

// findStmt returns the raw statement mapping (inside an Fn::If if wrapped).
func findStmt(t *testing.T, tpl map[string]any, loc, sid string) map[string]any {
	t.Helper()
	for _, raw := range docStatements(t, tpl, loc) {
		m := raw.(map[string]any)
		if l, ok := m["Fn::If"].([]any); ok {
			m = l[1].(map[string]any)
		}
		if m["Sid"] == sid {
			return m
		}
	}
	t.Fatalf("no statement %s in %s", sid, loc)
	return nil
}

func addToList(m map[string]any, key string, v any) {
	switch x := m[key].(type) {
	case []any:
		m[key] = append(x, v)
	default:
		m[key] = []any{x, v}
	}
}

func TestCheckerReportsWidening(t *testing.T) {
	const (
		exec     = "ExecutionRole/Policies/sandbox"
		build    = "BuildRole/Policies/build"
		launcher = "SandboxLauncherPolicy/PolicyDocument"
		pub      = "ImagePublisherPolicy/PolicyDocument"
		caller   = "CallerPolicy/PolicyDocument"
	)
	cases := []struct {
		name   string
		mutate func(t *testing.T, tpl map[string]any)
		want   string
	}{
		{"exec role gets s3:DeleteObject", func(t *testing.T, tpl map[string]any) {
			addToList(findStmt(t, tpl, exec, "ReadWritePersistencePrefix"), "Action", "s3:DeleteObject")
		}, "s3:DeleteObject (the execution role never deletes)"},
		{"exec role lists the uploads of others", func(t *testing.T, tpl map[string]any) {
			addToList(findStmt(t, tpl, exec, "ListPersistencePrefix"), "Action", "s3:ListBucketMultipartUploads")
		}, "s3:ListBucketMultipartUploads (more than the objects of the prefix)"},
		{"exec role aborts uploads on the whole bucket", func(t *testing.T, tpl map[string]any) {
			st := findStmt(t, tpl, exec, "ListPersistencePrefix")
			addToList(st, "Action", "s3:AbortMultipartUpload")
		}, "s3:AbortMultipartUpload beyond the persistence prefix"},
		{"exec role reaches the whole bucket", func(t *testing.T, tpl map[string]any) {
			findStmt(t, tpl, exec, "ReadWritePersistencePrefix")["Resource"] =
				map[string]any{"Fn::Sub": "arn:${AWS::Partition}:s3:::${PersistenceBucket}/*"}
		}, "outside the persistence prefix"},
		{"exec role ListBucket loses s3:prefix", func(t *testing.T, tpl map[string]any) {
			delete(findStmt(t, tpl, exec, "ListPersistencePrefix"), "Condition")
		}, "without the s3:prefix condition"},
		{"exec role S3 without HasPersistence", func(t *testing.T, tpl map[string]any) {
			list := docStatements(t, tpl, exec)
			list[1] = findStmt(t, tpl, exec, "ReadWritePersistencePrefix")
		}, "without the HasPersistence condition"},
		{"launcher gets lambda:CreateMicrovmImage", func(t *testing.T, tpl map[string]any) {
			addToList(findStmt(t, tpl, launcher, "ReadRayitoImages"), "Action", "lambda:CreateMicrovmImage")
		}, "image write action lambda:CreateMicrovmImage"},
		{"launcher PassRole loses PassedToService", func(t *testing.T, tpl map[string]any) {
			delete(findStmt(t, tpl, launcher, "PassExecutionRole"), "Condition")
		}, "without iam:PassedToService"},
		{"launcher passes the build role", func(t *testing.T, tpl map[string]any) {
			findStmt(t, tpl, launcher, "PassExecutionRole")["Resource"] = map[string]any{"Fn::GetAtt": []any{"BuildRole", "Arn"}}
		}, "iam:PassRole on [GetAtt:BuildRole.Arn]"},
		{"publisher PassRole loses PassedToService", func(t *testing.T, tpl map[string]any) {
			delete(findStmt(t, tpl, pub, "PassBuildRole"), "Condition")
		}, "ImagePublisherPolicy statement \"PassBuildRole\": iam:PassRole without iam:PassedToService"},
		{"publisher PassRole on any role", func(t *testing.T, tpl map[string]any) {
			findStmt(t, tpl, pub, "PassBuildRole")["Resource"] = "*"
		}, "iam:PassRole on [*]"},
		{"publisher gets lambda:RunMicrovm", func(t *testing.T, tpl map[string]any) {
			addToList(findStmt(t, tpl, pub, "PublishRayitoImages"), "Action", "lambda:RunMicrovm")
		}, pub + " statement \"PublishRayitoImages\""},
		{"publisher uploads anywhere in the bucket", func(t *testing.T, tpl map[string]any) {
			findStmt(t, tpl, pub, "UploadImageArtifacts")["Resource"] =
				map[string]any{"Fn::Sub": "arn:${AWS::Partition}:s3:::${ArtifactBucket}/*"}
		}, "outside images/ of the artifact bucket"},
		{"publisher lists the whole artifact bucket", func(t *testing.T, tpl map[string]any) {
			delete(findStmt(t, tpl, pub, "ListImageArtifacts"), "Condition")
		}, "outside images/ of the artifact bucket"},
		{"publisher tags any resource", func(t *testing.T, tpl map[string]any) {
			findStmt(t, tpl, pub, "TagRayitoImages")["Resource"] = "*"
		}, pub + " statement \"TagRayitoImages\""},
		{"build role reads the whole artifact bucket", func(t *testing.T, tpl map[string]any) {
			addToList(findStmt(t, tpl, build, "ReadImageArtifacts"), "Resource",
				map[string]any{"Fn::Sub": "arn:${AWS::Partition}:s3:::${ArtifactBucket}/*"})
		}, "only s3:GetObject on images/*"},
		{"service wildcard action", func(t *testing.T, tpl map[string]any) {
			findStmt(t, tpl, launcher, "ManageMicrovms")["Action"] = "lambda:*"
		}, "wildcard action \"lambda:*\""},
		{"star action", func(t *testing.T, tpl map[string]any) {
			findStmt(t, tpl, build, "WriteBuildLogs")["Action"] = "*"
		}, "wildcard action \"*\""},
		{"Resource star on a scoped action", func(t *testing.T, tpl map[string]any) {
			findStmt(t, tpl, launcher, "ManageMicrovms")["Resource"] = "*"
		}, "lambda:GetMicrovm on Resource \"*\""},
		{"NotAction", func(t *testing.T, tpl map[string]any) {
			findStmt(t, tpl, launcher, "ListUnscoped")["NotAction"] = "iam:*"
		}, "unexpected statement key \"NotAction\""},
		{"caller drops a publisher statement", func(t *testing.T, tpl map[string]any) {
			list := docStatements(t, tpl, caller)
			section(section(section(tpl, "Resources"), "CallerPolicy"), "Properties")["PolicyDocument"].(map[string]any)["Statement"] = list[:len(list)-1]
		}, "CallerPolicy is not the union"},
		{"caller widens a copied statement", func(t *testing.T, tpl map[string]any) {
			addToList(findStmt(t, tpl, caller, "ManageMicrovms"), "Action", "lambda:CreateMicrovmShellAuthToken")
		}, "CallerPolicy is not the union"},
		{"new inline policy", func(t *testing.T, tpl map[string]any) {
			props := section(section(section(tpl, "Resources"), "BuildRole"), "Properties")
			addToList(props, "Policies", map[string]any{"PolicyName": "extra", "PolicyDocument": map[string]any{
				"Version": "2012-10-17", "Statement": []any{map[string]any{"Effect": "Allow", "Action": "s3:GetObject", "Resource": "arn:aws:s3:::x/*"}}}})
		}, "BuildRole/Policies/extra: policy document not in the expectation table"},
		{"trust any principal", func(t *testing.T, tpl map[string]any) {
			m := findStmt(t, tpl, "ExecutionRole/AssumeRolePolicyDocument", "LambdaMicrovmsInThisAccount")
			delete(m, "Condition")
		}, "trust must be lambda.amazonaws.com with aws:SourceAccount"},
		{"unused parameter", func(t *testing.T, tpl map[string]any) {
			section(tpl, "Parameters")["Unused"] = map[string]any{"Type": "String"}
		}, "parameter \"Unused\" is never used"},
		{"Ref to nothing", func(t *testing.T, tpl map[string]any) {
			section(section(tpl, "Outputs"), "CallerPolicyArn")["Value"] = map[string]any{"Ref": "Nope"}
		}, "Ref \"Nope\" names no parameter"},
		{"Sub variable to nothing", func(t *testing.T, tpl map[string]any) {
			findStmt(t, tpl, build, "ReadImageArtifacts")["Resource"] =
				map[string]any{"Fn::Sub": "arn:${AWS::Partition}:s3:::${ArtefactBucket}/images/*"}
		}, "Sub \"ArtefactBucket\" names no parameter"},
	}
	base := loadTemplate(t)
	if p := checkAll(base); len(p) != 0 {
		t.Fatalf("the unmodified template has problems: %v", p)
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tpl := deepCopy(base).(map[string]any)
			tc.mutate(t, tpl)
			p := checkAll(tpl)
			for _, s := range p {
				if strings.Contains(s, tc.want) {
					return
				}
			}
			t.Errorf("checker did not report %q; it reported %d problems: %v", tc.want, len(p), p)
		})
	}
}

// roleDocuments returns every policy document of a template's IAM roles
// (trust and inline policies) by location; checks that its resources are
// exactly want (logical id → type) and that no role takes a managed policy
// or a boundary; and hands every other resource to other, which adds the
// documents (add) or problems of its kind.
func roleDocuments(tpl map[string]any, want map[string]string, other func(name, typ string, props map[string]any, add func(loc string, doc any), p *problems)) (map[string][]stmt, problems) {
	var p problems
	docs := map[string][]stmt{}
	add := func(loc string, doc any) { addDocument(docs, &p, loc, doc) }
	res := section(tpl, "Resources")
	for name, r := range res {
		rm, _ := r.(map[string]any)
		typ, _ := rm["Type"].(string)
		if w, ok := want[name]; !ok || w != typ {
			p.addf("resource %s: unexpected (type %q)", name, typ)
		}
		props, _ := rm["Properties"].(map[string]any)
		if typ != "AWS::IAM::Role" {
			if other != nil {
				other(name, typ, props, add, &p)
			}
			continue
		}
		add(name+"/AssumeRolePolicyDocument", props["AssumeRolePolicyDocument"])
		pols, _ := props["Policies"].([]any)
		for _, pol := range pols {
			pm, _ := pol.(map[string]any)
			add(fmt.Sprintf("%s/Policies/%v", name, pm["PolicyName"]), pm["PolicyDocument"])
		}
		for _, k := range []string{"ManagedPolicyArns", "PermissionsBoundary"} {
			if _, ok := props[k]; ok {
				p.addf("resource %s: unexpected %s", name, k)
			}
		}
	}
	for name := range want {
		if _, ok := res[name]; !ok {
			p.addf("resource %s: missing", name)
		}
	}
	return docs, p
}

// addDocument parses one policy document into docs[loc], reporting what
// is not a 2012-10-17 document of statements.
func addDocument(docs map[string][]stmt, p *problems, loc string, doc any) {
	dm, ok := doc.(map[string]any)
	if !ok {
		p.addf("%s: policy document is not a mapping", loc)
		return
	}
	if dm["Version"] != "2012-10-17" {
		p.addf("%s: Version %v", loc, dm["Version"])
	}
	list, ok := dm["Statement"].([]any)
	if !ok {
		p.addf("%s: Statement is not a list", loc)
		return
	}
	for i, raw := range list {
		s, err := parseStatement(raw)
		if err != nil {
			p.addf("%s statement %d: %v", loc, i, err)
			continue
		}
		docs[loc] = append(docs[loc], s)
	}
}

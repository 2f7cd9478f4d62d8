package cdk_test

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/rayito-dev/rayito/agenthost/agentcore"
)

// ---------------------------------------------------------------------------
// The synthesized roles of the included template equal those of
// agentcore.RuntimeTemplate (the CLI's bytes) for the same parameters:
// both are resolved as CloudFormation would (Ref, Fn::Sub, Fn::If with the
// template's conditions, AWS::NoValue) and compared whole; and the
// runtime role's statements equal the CLI's plan (agentcore.NewPlan).
// ---------------------------------------------------------------------------

// cfnYAML turns the template's YAML, short tags included, into the JSON
// shape (!Ref x -> {"Ref": x}, !GetAtt a.b -> {"Fn::GetAtt": [a, b]}).
func cfnYAML(n *yaml.Node) any {
	var v any
	switch n.Kind {
	case yaml.DocumentNode:
		return cfnYAML(n.Content[0])
	case yaml.ScalarNode:
		v = n.Value
	case yaml.SequenceNode:
		l := []any{}
		for _, c := range n.Content {
			l = append(l, cfnYAML(c))
		}
		v = l
	case yaml.MappingNode:
		m := map[string]any{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			m[n.Content[i].Value] = cfnYAML(n.Content[i+1])
		}
		v = m
	}
	switch tag := n.Tag; {
	case tag == "!Ref":
		return map[string]any{"Ref": v}
	case tag == "!GetAtt":
		r, a, _ := strings.Cut(v.(string), ".")
		return map[string]any{"Fn::GetAtt": []any{r, a}}
	case strings.HasPrefix(tag, "!") && !strings.HasPrefix(tag, "!!"):
		return map[string]any{"Fn::" + tag[1:]: v}
	}
	return v
}

// noValue is what AWS::NoValue resolves to.
type noValue struct{}

// resolver resolves one template with concrete parameters.
type resolver struct {
	params map[string]any // strings and []any lists
	conds  map[string]any
}

func (r resolver) resolve(v any) (any, error) {
	switch x := v.(type) {
	case []any:
		out := []any{}
		for _, el := range x {
			e, err := r.resolve(el)
			if err != nil {
				return nil, err
			}
			if _, gone := e.(noValue); !gone {
				out = append(out, e)
			}
		}
		return out, nil
	case map[string]any:
		if len(x) == 1 {
			for fn, arg := range x {
				if fn == "Ref" || strings.HasPrefix(fn, "Fn::") {
					return r.intrinsic(fn, arg)
				}
			}
		}
		out := map[string]any{}
		for k, el := range x {
			e, err := r.resolve(el)
			if err != nil {
				return nil, err
			}
			if _, gone := e.(noValue); !gone {
				out[k] = e
			}
		}
		return out, nil
	}
	return v, nil
}

func (r resolver) intrinsic(fn string, arg any) (any, error) {
	switch fn {
	case "Ref":
		name := arg.(string)
		if name == "AWS::NoValue" {
			return noValue{}, nil
		}
		if v, ok := r.params[name]; ok {
			return v, nil
		}
		return "Ref:" + short(name), nil
	case "Fn::GetAtt":
		if s, ok := arg.(string); ok {
			res, at, _ := strings.Cut(s, ".")
			return "GetAtt:" + short(res) + "." + at, nil
		}
		a := arg.([]any)
		return fmt.Sprintf("GetAtt:%s.%v", short(fmt.Sprint(a[0])), a[1]), nil
	case "Fn::Sub":
		s := arg.(string)
		for k, v := range r.params {
			if str, ok := v.(string); ok {
				s = strings.ReplaceAll(s, "${"+k+"}", str)
			}
		}
		return s, nil
	case "Fn::Join":
		a := arg.([]any)
		parts, err := r.resolve(a[1])
		if err != nil {
			return nil, err
		}
		var ss []string
		for _, p := range parts.([]any) {
			ss = append(ss, fmt.Sprint(p))
		}
		return strings.Join(ss, a[0].(string)), nil
	case "Fn::Equals":
		a, err := r.resolve(arg)
		if err != nil {
			return nil, err
		}
		l := a.([]any)
		return fmt.Sprint(l[0]) == fmt.Sprint(l[1]), nil
	case "Fn::Not":
		a, err := r.resolve(arg)
		if err != nil {
			return nil, err
		}
		return !a.([]any)[0].(bool), nil
	case "Fn::If":
		a := arg.([]any)
		c, err := r.resolve(r.conds[a[0].(string)])
		if err != nil {
			return nil, err
		}
		if c.(bool) {
			return r.resolve(a[1])
		}
		return r.resolve(a[2])
	}
	return nil, fmt.Errorf("intrinsic %s not resolved", fn)
}

// rawTemplate is agentcore.RuntimeTemplate as JSON shapes.
func rawTemplate(t *testing.T) map[string]any {
	t.Helper()
	var n yaml.Node
	if err := yaml.Unmarshal([]byte(agentcore.RuntimeTemplate), &n); err != nil {
		t.Fatal(err)
	}
	return cfnYAML(&n).(map[string]any)
}

func TestRolesEqualTheCLITemplate(t *testing.T) {
	pl := testAgent.Plan
	raw := rawTemplate(t)
	models := planList(pl, "InvokeBedrockModels")
	secrets := planList(pl, "ReadSecrets")
	if len(models) != 1 || len(secrets) != 1 {
		t.Fatalf("the test project should give one model and one secret: %v %v", models, secrets)
	}
	rawR := resolver{
		params: map[string]any{"AgentName": pl.Agent, "RuntimeName": pl.Runtime, "EcrRepositoryName": pl.Repository, "ArtifactBucket": testBucket,
			"ArtifactPrefix": agentcore.ArtifactPrefix, "BedrockModelArns": models, "ReadableSecretArns": secrets, "LogRetentionDays": "30"},
		conds: raw["Conditions"].(map[string]any),
	}
	synR := resolver{params: map[string]any{}, conds: map[string]any{}}
	for k, v := range synthesized["Conditions"].(map[string]any) {
		// DemoTemplateConditionsHasBedrockModelsC8D4B2E5 -> HasBedrockModels
		synR.conds[k] = v
	}
	for _, role := range []string{"RuntimeRole", "BuildRole"} {
		want, err := rawR.resolve(raw["Resources"].(map[string]any)[role].(map[string]any)["Properties"])
		if err != nil {
			t.Fatal(err)
		}
		got, err := synR.resolve(props(t, synthesized, role))
		if err != nil {
			t.Fatal(err)
		}
		// Fn::Sub of the template's own parameters is substituted by
		// CfnInclude; the pseudo parameters stay ${AWS::...} on both sides.
		if !reflect.DeepEqual(normal(want), normal(got)) {
			w, _ := json.MarshalIndent(normal(want), "", " ")
			g, _ := json.MarshalIndent(normal(got), "", " ")
			t.Errorf("%s differs from agentcore.RuntimeTemplate's:\ngot  %s\nwant %s", role, g, w)
		}
	}
	// The comparison is not vacuous: another runtime name differs.
	other := resolver{params: map[string]any{}, conds: rawR.conds}
	for k, v := range rawR.params {
		other.params[k] = v
	}
	other.params["RuntimeName"] = "rayito_other"
	a, _ := other.resolve(raw["Resources"].(map[string]any)["RuntimeRole"].(map[string]any)["Properties"])
	b, _ := synR.resolve(props(t, synthesized, "RuntimeRole"))
	if reflect.DeepEqual(normal(a), normal(b)) {
		t.Error("the runtime role of another RuntimeName resolves equal: the comparison proves nothing")
	}
	// And the runtime role's statements are the plan's, the CLI's.
	got, err := synR.resolve(props(t, synthesized, "RuntimeRole")["Policies"].([]any)[0].(map[string]any)["PolicyDocument"])
	if err != nil {
		t.Fatal(err)
	}
	var sids []string
	for _, s := range got.(map[string]any)["Statement"].([]any) {
		sids = append(sids, s.(map[string]any)["Sid"].(string))
	}
	var want []string
	for _, s := range pl.Roles[0].Statements {
		want = append(want, s.Sid)
	}
	if !slices.Equal(sids, want) {
		t.Errorf("runtime role statements %v, the plan's %v", sids, want)
	}
}

// normal is v through JSON (one representation of numbers and lists).
func normal(v any) any {
	b, _ := json.Marshal(v)
	var out any
	json.Unmarshal(b, &out)
	return out
}

func planList(pl *agentcore.Plan, sid string) []any {
	for _, s := range pl.Roles[0].Statements {
		if s.Sid == sid {
			out := []any{}
			for _, r := range s.Resource {
				out = append(out, r)
			}
			return out
		}
	}
	return []any{}
}

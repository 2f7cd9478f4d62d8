package infra_test

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// ---------------------------------------------------------------------------
// sizes-guard.yaml (security model T27, docs/index.md "Sizes"): one managed
// policy of two Deny statements and nothing else. Its NotResource is
// evaluated (Fn::Split, Fn::Sub, Fn::Join, Ref) for sample parameters and
// held to the exact list: the allowed images, their versions, the new
// microVM and the network connectors; so launching any other image is
// denied. The publishing deny covers every image write iam.yaml's
// ImagePublisherPolicy grants, on every image.
// ---------------------------------------------------------------------------

const (
	sgTemplate = "sizes-guard.yaml"
	sgPolicy   = "SizesGuardPolicy"
	sgRun      = "DenyRunOutsideAllowedImages"
	sgPublish  = "DenyImagePublishing"
	sgImageA   = "arn:aws:lambda:eu-west-1:111122223333:microvm-image:tpl-2gb"
	sgImageB   = "arn:aws:lambda:eu-west-1:111122223333:microvm-image:rayito-base-2gb"
)

// sgParams are the sample parameter and pseudo-parameter values.
var sgParams = map[string]string{
	"AllowedImageArns": sgImageA + "," + sgImageB, "NamePrefix": "rayito",
	"AWS::Partition": "aws", "AWS::Region": "eu-west-1", "AWS::AccountId": "111122223333",
}

// sgNotResource is what the run deny's NotResource must evaluate to.
var sgNotResource = []string{
	sgImageA, sgImageB, sgImageA + ":*", sgImageB + ":*",
	"arn:aws:lambda:eu-west-1:111122223333:microvm:*",
	"arn:aws:lambda:eu-west-1:aws:network-connector:*",
	"arn:aws:lambda:eu-west-1:111122223333:network-connector:*",
}

var sgPublishActions = []string{
	"lambda:CreateMicrovmImage", "lambda:UpdateMicrovmImage", "lambda:DeleteMicrovmImage",
	"lambda:UpdateMicrovmImageVersion", "lambda:DeleteMicrovmImageVersion",
	"lambda:TagResource", "lambda:UntagResource",
}

// cfnEval evaluates the intrinsic functions a guard statement uses.
func cfnEval(v any, params map[string]string) (any, error) {
	switch x := v.(type) {
	case string:
		return x, nil
	case []any:
		out := []any{}
		for _, e := range x {
			r, err := cfnEval(e, params)
			if err != nil {
				return nil, err
			}
			out = append(out, r)
		}
		return out, nil
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
			case "Fn::Sub":
				tpl, vars := arg, map[string]any{}
				if l, ok := arg.([]any); ok && len(l) == 2 {
					tpl = l[0]
					vars, _ = l[1].(map[string]any)
				}
				s, ok := tpl.(string)
				if !ok {
					return nil, fmt.Errorf("Fn::Sub template %v", tpl)
				}
				var ferr error
				out := subVar.ReplaceAllStringFunc(s, func(m string) string {
					name := m[2 : len(m)-1]
					if v, ok := vars[name]; ok {
						r, err := cfnEval(v, params)
						if rs, ok := r.(string); err == nil && ok {
							return rs
						}
						ferr = fmt.Errorf("Fn::Sub variable %s: %v %v", name, r, err)
						return ""
					}
					if v, ok := params[name]; ok {
						return v
					}
					ferr = fmt.Errorf("Fn::Sub: ${%s} has no value", name)
					return ""
				})
				return out, ferr
			case "Fn::Join", "Fn::Split":
				l, ok := arg.([]any)
				if !ok || len(l) != 2 {
					return nil, fmt.Errorf("%s %v", fn, arg)
				}
				delim, _ := l[0].(string)
				r, err := cfnEval(l[1], params)
				if err != nil {
					return nil, err
				}
				if fn == "Fn::Split" {
					s, ok := r.(string)
					if !ok {
						return nil, fmt.Errorf("Fn::Split of %v", r)
					}
					out := []any{}
					for _, p := range strings.Split(s, delim) {
						out = append(out, p)
					}
					return out, nil
				}
				parts, ok := r.([]any)
				if !ok {
					return nil, fmt.Errorf("Fn::Join of %v", r)
				}
				ss := make([]string, 0, len(parts))
				for _, p := range parts {
					ps, ok := p.(string)
					if !ok {
						return nil, fmt.Errorf("Fn::Join element %v", p)
					}
					ss = append(ss, ps)
				}
				return strings.Join(ss, delim), nil
			}
			return nil, fmt.Errorf("unsupported function %s", fn)
		}
	}
	return nil, fmt.Errorf("cannot evaluate %v", v)
}

// cfnStrings evaluates v to a list of strings.
func cfnStrings(v any, params map[string]string) ([]string, error) {
	r, err := cfnEval(v, params)
	if err != nil {
		return nil, err
	}
	if s, ok := r.(string); ok {
		return []string{s}, nil
	}
	var out []string
	for _, e := range r.([]any) {
		s, ok := e.(string)
		if !ok {
			return nil, fmt.Errorf("list element %v", e)
		}
		out = append(out, s)
	}
	return out, nil
}

func sgCheckAll(tpl, iam map[string]any) problems {
	var p problems
	res := section(tpl, "Resources")
	if len(res) != 1 {
		p.addf("resources: %d, want the one managed policy", len(res))
	}
	pol := section(res, sgPolicy)
	if pol["Type"] != "AWS::IAM::ManagedPolicy" {
		p.addf("%s: type %v", sgPolicy, pol["Type"])
		return p
	}
	props, _ := pol["Properties"].(map[string]any)
	for _, k := range []string{"Roles", "Users", "Groups"} {
		if _, ok := props[k]; ok {
			p.addf("%s: attached by the template (%s); callers attach it", sgPolicy, k)
		}
	}
	doc, _ := props["PolicyDocument"].(map[string]any)
	if doc["Version"] != "2012-10-17" {
		p.addf("PolicyDocument Version %v", doc["Version"])
	}
	list, _ := doc["Statement"].([]any)
	seen := map[string]bool{}
	for i, raw := range list {
		st, _ := raw.(map[string]any)
		sid, _ := st["Sid"].(string)
		seen[sid] = true
		if st["Effect"] != "Deny" {
			p.addf("statement %d (%s): Effect %v (a guard only denies)", i, sid, st["Effect"])
		}
		actions, err := cfnStrings(st["Action"], sgParams)
		if err != nil {
			p.addf("statement %s: Action: %v", sid, err)
		}
		actions = sortedUnique(actions)
		keys := []string{}
		for k := range st {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		switch sid {
		case sgRun:
			if !slices.Equal(keys, []string{"Action", "Effect", "NotResource", "Sid"}) {
				p.addf("statement %s: keys %v, want Action, Effect, NotResource, Sid", sid, keys)
			}
			if !slices.Equal(actions, []string{"lambda:RunMicrovm"}) {
				p.addf("statement %s: actions %v, want lambda:RunMicrovm", sid, actions)
			}
			nr, err := cfnStrings(st["NotResource"], sgParams)
			if err != nil {
				p.addf("statement %s: NotResource: %v", sid, err)
			}
			if !slices.Equal(sortedUnique(nr), sortedUnique(sgNotResource)) {
				p.addf("statement %s: NotResource evaluates to %v, want %v", sid, nr, sgNotResource)
			}
			for _, r := range nr {
				if strings.Contains(r, ":microvm-image:") && strings.ContainsAny(strings.TrimSuffix(r, ":*"), "*?") {
					p.addf("statement %s: NotResource %q exempts images by wildcard", sid, r)
				}
			}
		case sgPublish:
			if !slices.Equal(keys, []string{"Action", "Effect", "Resource", "Sid"}) {
				p.addf("statement %s: keys %v, want Action, Effect, Resource, Sid", sid, keys)
			}
			if !slices.Equal(actions, sortedUnique(sgPublishActions)) {
				p.addf("statement %s: actions %v, want %v", sid, actions, sortedUnique(sgPublishActions))
			}
			if st["Resource"] != "*" {
				p.addf("statement %s: Resource %v, want \"*\" (every image)", sid, st["Resource"])
			}
			// Every write ImagePublisherPolicy grants is denied.
			if iam != nil {
				docs, _ := documents(iam)
				for _, s := range docs["ImagePublisherPolicy/PolicyDocument"] {
					for _, a := range s.Actions {
						verb := a[strings.Index(a, ":")+1:]
						if strings.HasPrefix(a, "lambda:") && !strings.HasPrefix(verb, "Get") && !strings.HasPrefix(verb, "List") && !slices.Contains(actions, a) {
							p.addf("statement %s: ImagePublisherPolicy's %s is not denied", sid, a)
						}
					}
				}
			}
		default:
			p.addf("unexpected statement %d (%q)", i, sid)
		}
	}
	for _, sid := range []string{sgRun, sgPublish} {
		if !seen[sid] {
			p.addf("statement %s missing", sid)
		}
	}
	// The list parameter: image ARNs only, no wildcard, no default.
	param := section(section(tpl, "Parameters"), "AllowedImageArns")
	if _, ok := param["Default"]; ok {
		p.addf("AllowedImageArns has a default (the list must be given)")
	}
	pat, _ := param["AllowedPattern"].(string)
	re, err := regexp.Compile(pat)
	if err != nil {
		p.addf("AllowedImageArns pattern: %v", err)
		return p
	}
	for _, good := range []string{sgImageA, sgImageA + "," + sgImageB} {
		if !re.MatchString(good) {
			p.addf("AllowedImageArns pattern refuses %q", good)
		}
	}
	for _, bad := range []string{"", "*", "arn:aws:lambda:eu-west-1:111122223333:microvm-image:*",
		"arn:aws:lambda:eu-west-1:111122223333:microvm-image:tpl-*", sgImageA + ", " + sgImageB, sgImageA + ",",
		"arn:aws:lambda:eu-west-1:111122223333:microvm:*", sgImageA + ":1"} {
		if re.MatchString(bad) {
			p.addf("AllowedImageArns pattern admits %q", bad)
		}
	}
	p = append(p, checkReferences(tpl)...)
	return p
}

func TestSizesGuardTemplate(t *testing.T) {
	for _, msg := range sgCheckAll(loadTemplateFile(t, sgTemplate), loadTemplate(t)) {
		t.Error(msg)
	}
}

// TestSizesGuardCheckerCatches: each widening of what the guard lets
// through is reported.
func TestSizesGuardCheckerCatches(t *testing.T) {
	stmts := func(tpl map[string]any) []any {
		return section(section(tpl, "Resources"), sgPolicy)["Properties"].(map[string]any)["PolicyDocument"].(map[string]any)["Statement"].([]any)
	}
	find := func(t *testing.T, tpl map[string]any, sid string) map[string]any {
		for _, raw := range stmts(tpl) {
			if m := raw.(map[string]any); m["Sid"] == sid {
				return m
			}
		}
		t.Fatalf("no statement %s", sid)
		return nil
	}
	for _, tc := range []struct {
		name   string
		mutate func(t *testing.T, tpl map[string]any)
		want   string
	}{
		{"run deny becomes an allow", func(t *testing.T, tpl map[string]any) { find(t, tpl, sgRun)["Effect"] = "Allow" }, "a guard only denies"},
		{"every image exempted", func(t *testing.T, tpl map[string]any) {
			addToList(find(t, tpl, sgRun), "NotResource", "arn:aws:lambda:eu-west-1:111122223333:microvm-image:*")
		}, "NotResource"},
		{"a prefix exempted", func(t *testing.T, tpl map[string]any) {
			find(t, tpl, sgRun)["NotResource"] = []any{map[string]any{"Fn::Sub": "arn:${AWS::Partition}:lambda:${AWS::Region}:${AWS::AccountId}:microvm-image:tpl-*"}}
		}, "exempts images by wildcard"},
		{"run deny gets a condition", func(t *testing.T, tpl map[string]any) {
			find(t, tpl, sgRun)["Condition"] = map[string]any{"StringEquals": map[string]any{"aws:RequestedRegion": "us-east-1"}}
		}, "keys"},
		{"publishing: update allowed", func(t *testing.T, tpl map[string]any) {
			find(t, tpl, sgPublish)["Action"] = []any{"lambda:CreateMicrovmImage"}
		}, "UpdateMicrovmImage is not denied"},
		{"publishing: only some images", func(t *testing.T, tpl map[string]any) {
			find(t, tpl, sgPublish)["Resource"] = map[string]any{"Fn::Sub": "arn:${AWS::Partition}:lambda:${AWS::Region}:${AWS::AccountId}:microvm-image:rayito-*"}
		}, "every image"},
		{"an allow statement", func(t *testing.T, tpl map[string]any) {
			doc := section(section(tpl, "Resources"), sgPolicy)["Properties"].(map[string]any)["PolicyDocument"].(map[string]any)
			doc["Statement"] = append(doc["Statement"].([]any), map[string]any{"Sid": "Extra", "Effect": "Allow", "Action": "lambda:RunMicrovm", "Resource": "*"})
		}, "a guard only denies"},
		{"a wildcard list", func(t *testing.T, tpl map[string]any) {
			section(section(tpl, "Parameters"), "AllowedImageArns")["AllowedPattern"] = ".*"
		}, "pattern admits"},
		{"a default list", func(t *testing.T, tpl map[string]any) {
			section(section(tpl, "Parameters"), "AllowedImageArns")["Default"] = sgImageA
		}, "has a default"},
		{"attached", func(t *testing.T, tpl map[string]any) {
			section(section(tpl, "Resources"), sgPolicy)["Properties"].(map[string]any)["Roles"] = []any{"x"}
		}, "attached by the template"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tpl := loadTemplateFile(t, sgTemplate)
			tc.mutate(t, tpl)
			p := sgCheckAll(tpl, loadTemplate(t))
			for _, s := range p {
				if strings.Contains(s, tc.want) {
					return
				}
			}
			t.Errorf("checker did not report %q; it reported %d problems: %v", tc.want, len(p), p)
		})
	}
}

package infra_test

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
)

// ---------------------------------------------------------------------------
// s3-mounts.yaml (security model T20, docs/s3-mounts.md): one managed
// policy for the execution role, held to an exact table. Each of the four
// prefix slots lists (s3:ListBucket with an s3:prefix condition) and reads
// (s3:GetObject) its prefix only; writes (PutObject, AbortMultipartUpload)
// and deletes (DeleteObject) exist only in the write variants; slots 2-4
// only when set; nothing else, and nothing attached by the template.
// ---------------------------------------------------------------------------

const (
	smTemplate = "s3-mounts.yaml"
	smPolicy   = "RayitoS3MountPolicy/PolicyDocument"
	smBucket   = "arn:${AWS::Partition}:s3:::${BucketName}"
)

var smResources = map[string]string{"RayitoS3MountPolicy": "AWS::IAM::ManagedPolicy"}

func smExpected() map[string][]stmt {
	var out []stmt
	for n := 1; n <= 4; n++ {
		p := fmt.Sprintf("${Prefix%d}", n)
		has, write, del := fmt.Sprintf("HasPrefix%d", n), fmt.Sprintf("Write%d", n), fmt.Sprintf("Delete%d", n)
		if n == 1 {
			has, write, del = "", "Writable", "Deletable"
		}
		out = append(out,
			stmt{Sid: fmt.Sprintf("ListPrefix%d", n), If: has, Actions: []string{"s3:ListBucket"}, Resources: []string{smBucket},
				Condition: []string{"StringLike s3:prefix=" + p + "*"}},
			stmt{Sid: fmt.Sprintf("ReadPrefix%d", n), If: has, Actions: []string{"s3:GetObject"}, Resources: []string{smBucket + "/" + p + "*"}},
			stmt{Sid: fmt.Sprintf("WritePrefix%d", n), If: write, Actions: []string{"s3:AbortMultipartUpload", "s3:PutObject"}, Resources: []string{smBucket + "/" + p + "*"}},
			stmt{Sid: fmt.Sprintf("DeletePrefix%d", n), If: del, Actions: []string{"s3:DeleteObject"}, Resources: []string{smBucket + "/" + p + "*"}},
		)
	}
	return map[string][]stmt{smPolicy: out}
}

func smDocuments(tpl map[string]any) (map[string][]stmt, problems) {
	return roleDocuments(tpl, smResources, func(name, typ string, props map[string]any, add func(string, any), p *problems) {
		if typ != "AWS::IAM::ManagedPolicy" {
			return
		}
		for _, k := range []string{"Roles", "Users", "Groups"} {
			if _, ok := props[k]; ok {
				p.addf("resource %s: attached by the template (%s); callers attach it", name, k)
			}
		}
		add(name+"/PolicyDocument", props["PolicyDocument"])
	})
}

// smCheckConditions: the variants mean what their names say.
func smCheckConditions(tpl map[string]any) problems {
	var p problems
	conds := section(tpl, "Conditions")
	want := map[string]string{
		"Writable":  "map[Fn::Not:[map[Fn::Equals:[map[Ref:Access] read-only]]]]",
		"Deletable": "map[Fn::Equals:[map[Ref:Access] read-write-delete]]",
	}
	for n := 2; n <= 4; n++ {
		want[fmt.Sprintf("HasPrefix%d", n)] = fmt.Sprintf("map[Fn::Not:[map[Fn::Equals:[map[Ref:Prefix%d] ]]]]", n)
		want[fmt.Sprintf("Write%d", n)] = fmt.Sprintf("map[Fn::And:[map[Condition:HasPrefix%d] map[Condition:Writable]]]", n)
		want[fmt.Sprintf("Delete%d", n)] = fmt.Sprintf("map[Fn::And:[map[Condition:HasPrefix%d] map[Condition:Deletable]]]", n)
	}
	for k, v := range want {
		if got := fmt.Sprint(conds[k]); got != v {
			p.addf("condition %s is %s, want %s", k, got, v)
		}
	}
	params := section(tpl, "Parameters")
	if a, _ := params["Access"].(map[string]any); fmt.Sprint(a["Default"]) != "read-only" {
		p.addf("Access defaults to %v, want read-only", a["Default"])
	}
	for n := 1; n <= 4; n++ {
		pp, _ := params[fmt.Sprintf("Prefix%d", n)].(map[string]any)
		pat := fmt.Sprint(pp["AllowedPattern"])
		re, err := regexp.Compile(pat)
		if err != nil {
			p.addf("Prefix%d's pattern %q: %v", n, pat, err)
			continue
		}
		// No IAM wildcard, no unterminated or absolute prefix.
		for _, bad := range []string{"*", "a*/", "a?/", "a", "/a/", "a//", "a/b"} {
			if re.MatchString(bad) {
				p.addf("Prefix%d's pattern %q lets %q in", n, pat, bad)
			}
		}
		for _, good := range []string{"", "a/", "data/in/", "x-1_(b)/"} {
			if !re.MatchString(good) {
				p.addf("Prefix%d's pattern %q refuses %q", n, pat, good)
			}
		}
	}
	return p
}

func smCheckAll(tpl map[string]any) problems {
	docs, p := smDocuments(tpl)
	p = append(p, checkExact(docs, smExpected())...)
	p = append(p, checkReferences(tpl)...)
	p = append(p, smCheckConditions(tpl)...)
	for _, s := range docs[smPolicy] {
		for _, a := range s.Actions {
			if (a == "s3:PutObject" || a == "s3:AbortMultipartUpload") && s.If != "Writable" && !strings.HasPrefix(s.If, "Write") {
				p.addf("statement %q writes outside the write variants", s.Sid)
			}
			if a == "s3:DeleteObject" && s.If != "Deletable" && !strings.HasPrefix(s.If, "Delete") {
				p.addf("statement %q deletes outside the delete variant", s.Sid)
			}
		}
	}
	return p
}

func TestS3MountsTemplate(t *testing.T) {
	for _, msg := range smCheckAll(loadTemplateFile(t, smTemplate)) {
		t.Error(msg)
	}
}

// TestS3MountsCheckerCatches: each widening is reported.
func TestS3MountsCheckerCatches(t *testing.T) {
	sub := func(s string) map[string]any { return map[string]any{"Fn::Sub": s} }
	for _, tc := range []struct {
		name   string
		mutate func(t *testing.T, tpl map[string]any)
		want   string
	}{
		{"read writes", func(t *testing.T, tpl map[string]any) {
			addToList(findStmt(t, tpl, smPolicy, "ReadPrefix1"), "Action", "s3:PutObject")
		}, "writes outside the write variants"},
		{"write always", func(t *testing.T, tpl map[string]any) {
			doc := section(section(tpl, "Resources"), "RayitoS3MountPolicy")["Properties"].(map[string]any)["PolicyDocument"].(map[string]any)
			sts := doc["Statement"].([]any)
			for i, s := range sts {
				if m, ok := s.(map[string]any); ok && m["Fn::If"] != nil {
					args := m["Fn::If"].([]any)
					if fmt.Sprint(args[0]) == "Writable" {
						sts[i] = args[1]
					}
				}
			}
		}, "writes outside the write variants"},
		{"list unconditioned", func(t *testing.T, tpl map[string]any) {
			delete(findStmt(t, tpl, smPolicy, "ListPrefix1"), "Condition")
		}, smPolicy + " statement \"ListPrefix1\""},
		{"read the whole bucket", func(t *testing.T, tpl map[string]any) {
			findStmt(t, tpl, smPolicy, "ReadPrefix1")["Resource"] = sub("arn:${AWS::Partition}:s3:::${BucketName}/*")
		}, smPolicy + " statement \"ReadPrefix1\""},
		{"every bucket", func(t *testing.T, tpl map[string]any) {
			findStmt(t, tpl, smPolicy, "ReadPrefix1")["Resource"] = sub("arn:${AWS::Partition}:s3:::*")
		}, smPolicy + " statement \"ReadPrefix1\""},
		{"new statement", func(t *testing.T, tpl map[string]any) {
			doc := section(section(tpl, "Resources"), "RayitoS3MountPolicy")["Properties"].(map[string]any)["PolicyDocument"].(map[string]any)
			doc["Statement"] = append(doc["Statement"].([]any), map[string]any{"Sid": "More", "Effect": "Allow", "Action": "s3:ListAllMyBuckets", "Resource": "*"})
		}, "unexpected statement \"More\""},
		{"attached", func(t *testing.T, tpl map[string]any) {
			section(section(tpl, "Resources"), "RayitoS3MountPolicy")["Properties"].(map[string]any)["Roles"] = []any{"x"}
		}, "attached by the template"},
		{"wildcard prefixes", func(t *testing.T, tpl map[string]any) {
			section(section(tpl, "Parameters"), "Prefix2")["AllowedPattern"] = ".*"
		}, "Prefix2's pattern"},
		{"writable by default", func(t *testing.T, tpl map[string]any) {
			section(section(tpl, "Parameters"), "Access")["Default"] = "read-write"
		}, "Access defaults"},
		{"delete when writable", func(t *testing.T, tpl map[string]any) {
			section(tpl, "Conditions")["Deletable"] = section(tpl, "Conditions")["Writable"]
		}, "condition Deletable"},
		{"another resource", func(t *testing.T, tpl map[string]any) {
			section(tpl, "Resources")["Extra"] = map[string]any{"Type": "AWS::IAM::Policy", "Properties": map[string]any{}}
		}, "resource Extra: unexpected"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tpl := loadTemplateFile(t, smTemplate)
			tc.mutate(t, tpl)
			p := smCheckAll(tpl)
			for _, s := range p {
				if strings.Contains(s, tc.want) {
					return
				}
			}
			t.Errorf("checker did not report %q; it reported %d problems: %v", tc.want, len(p), p)
		})
	}
}

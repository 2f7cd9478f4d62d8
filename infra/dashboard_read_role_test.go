package infra_test

import (
	"fmt"
	"strings"
	"testing"
)

// ---------------------------------------------------------------------------
// dashboard-read-role.yaml (rayito dashboard --account, issue 30 phase 3):
// the expectation table. Five reads, nothing else; trusted only by the
// principal named (never a root: the parameter's pattern), with the
// session name rayito-dashboard, and with ExternalId when one is given.
// ---------------------------------------------------------------------------

const (
	rrTemplate  = "dashboard-read-role.yaml"
	rrPrincipal = "AWS=Ref:TrustedPrincipalArn"
	rrSession   = "StringEquals sts:RoleSessionName=rayito-dashboard"
)

var rrExpected = map[string][]stmt{
	"ReadRole/AssumeRolePolicyDocument": {
		{Sid: "DashboardWithExternalId", If: "HasExternalId", Principal: rrPrincipal, Actions: []string{"sts:AssumeRole"},
			Condition: []string{"StringEquals sts:ExternalId=Ref:ExternalId", rrSession}},
		{Sid: "Dashboard", If: "NoExternalId", Principal: rrPrincipal, Actions: []string{"sts:AssumeRole"}, Condition: []string{rrSession}},
	},
	"ReadRole/Policies/dashboard-read": {
		{Sid: "ReadMicrovms", Actions: []string{"lambda:GetMicrovm"}, Resources: []string{"arn:${AWS::Partition}:lambda:${AWS::Region}:${AWS::AccountId}:microvm:*"}},
		{Sid: "ReadImageVersions", Actions: []string{"lambda:ListMicrovmImageVersions"}, Resources: []string{"arn:${AWS::Partition}:lambda:${AWS::Region}:${AWS::AccountId}:microvm-image:*"}},
		{Sid: "ListUnscoped", Actions: []string{"lambda:ListMicrovmImages", "lambda:ListMicrovms", "servicequotas:ListServiceQuotas"}, Resources: []string{"*"}},
	},
}

func rrCheckAll(tpl map[string]any) problems {
	docs, p := roleDocuments(tpl, map[string]string{"ReadRole": "AWS::IAM::Role"}, nil)
	p = append(p, checkExact(docs, rrExpected)...)
	// Five reads in all, none of them a write.
	n := 0
	for _, s := range docs["ReadRole/Policies/dashboard-read"] {
		for _, a := range s.Actions {
			n++
			verb := a[strings.Index(a, ":")+1:]
			if !strings.HasPrefix(verb, "Get") && !strings.HasPrefix(verb, "List") {
				p.addf("ReadRole: %s is not a read", a)
			}
		}
	}
	if n != 5 {
		p.addf("ReadRole: %d actions, want the five reads", n)
	}
	props := section(section(tpl, "Resources"), "ReadRole")["Properties"].(map[string]any)
	if fmt.Sprint(props["MaxSessionDuration"]) != "3600" {
		p.addf("ReadRole: MaxSessionDuration %v, want 3600", props["MaxSessionDuration"])
	}
	// The principal parameter admits a role or a user, never a root.
	pat, _ := section(section(tpl, "Parameters"), "TrustedPrincipalArn")["AllowedPattern"].(string)
	if !strings.Contains(pat, ":(role|user)/") {
		p.addf("TrustedPrincipalArn: pattern %q admits more than a role or a user", pat)
	}
	return p
}

func TestDashboardReadRole(t *testing.T) {
	for _, msg := range rrCheckAll(loadTemplateFile(t, rrTemplate)) {
		t.Error(msg)
	}
}

// TestDashboardReadRoleCheckerCatches: a write, a sixth read, a trust
// without the session name and a longer session are each reported.
func TestDashboardReadRoleCheckerCatches(t *testing.T) {
	for name, mutate := range map[string]func(tpl map[string]any){
		"write": func(tpl map[string]any) {
			st := policyStatements(tpl)
			st[0].(map[string]any)["Action"] = []any{"lambda:GetMicrovm", "lambda:TerminateMicrovm"}
		},
		"sixth read": func(tpl map[string]any) {
			st := policyStatements(tpl)
			st[2].(map[string]any)["Action"] = []any{"lambda:ListMicrovms", "lambda:ListMicrovmImages", "servicequotas:ListServiceQuotas", "logs:GetLogEvents"}
		},
		"no session name": func(tpl map[string]any) {
			trust := section(section(tpl, "Resources"), "ReadRole")["Properties"].(map[string]any)["AssumeRolePolicyDocument"].(map[string]any)["Statement"].([]any)
			inner := trust[1].(map[string]any)["Fn::If"].([]any)[1].(map[string]any)
			delete(inner, "Condition")
		},
		"longer session": func(tpl map[string]any) {
			section(section(tpl, "Resources"), "ReadRole")["Properties"].(map[string]any)["MaxSessionDuration"] = 43200
		},
	} {
		tpl := loadTemplateFile(t, rrTemplate)
		mutate(tpl)
		if len(rrCheckAll(tpl)) == 0 {
			t.Errorf("%s: not caught", name)
		}
	}
}

func policyStatements(tpl map[string]any) []any {
	pols := section(section(tpl, "Resources"), "ReadRole")["Properties"].(map[string]any)["Policies"].([]any)
	return pols[0].(map[string]any)["PolicyDocument"].(map[string]any)["Statement"].([]any)
}

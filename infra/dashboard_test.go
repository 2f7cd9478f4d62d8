package infra_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// ---------------------------------------------------------------------------
// dashboard.yaml (the dashboard stack, issue 30): the expectation tables.
// Widening a statement, adding one, giving a function another's role,
// letting the actions role exist without AllowActions or trust anyone but
// the function's role, or letting anyone rewrite audit rows fails until
// the table changes too, in review.
// ---------------------------------------------------------------------------

const (
	dbTemplate    = "dashboard.yaml"
	dbAudit       = "GetAtt:AuditTable.Arn"
	dbState       = "GetAtt:StateTable.Arn"
	dbPool        = "arn:${AWS::Partition}:cognito-idp:${AWS::Region}:${AWS::AccountId}:userpool/${UserPoolId}"
	dbActionsRole = "arn:${AWS::Partition}:iam::${AWS::AccountId}:role/${AWS::StackName}-actions"
	dbMicrovms    = "arn:${AWS::Partition}:lambda:${AWS::Region}:${AWS::AccountId}:microvm:*"
	dbCostRows    = "ForAllValues:StringLike dynamodb:LeadingKeys=cost-budget#*,cost-cache#*"
	dbQuotaRow    = "ForAllValues:StringEquals dynamodb:LeadingKeys=quota-alert"
	dbSessionName = "StringLike sts:RoleSessionName=rayito-dash-*"
	dbMetrics     = "StringEquals cloudwatch:namespace=Rayito/Dashboard"
)

// dbUnscoped are the only actions allowed on Resource "*", with the reason.
var dbUnscoped = map[string]string{
	"lambda:ListMicrovms":      "GET /microvms names no resource",
	"ce:GetCostAndUsage":       "Cost Explorer has no resource-level permissions",
	"cloudwatch:PutMetricData": "PutMetricData names no resource; the namespace condition holds it",
}

var dbExpected = map[string][]stmt{
	"ApiRole/AssumeRolePolicyDocument": evTrust("lambda.amazonaws.com", "LambdaInThisAccount"),
	"ApiRole/Policies/dashboard-read": {
		{Sid: "ListMicrovmsUnscoped", Actions: []string{"lambda:ListMicrovms"}, Resources: []string{"*"}},
		{Sid: "RecheckUsers", Actions: []string{"cognito-idp:AdminGetUser", "cognito-idp:AdminListGroupsForUser"}, Resources: []string{dbPool}},
		{Sid: "WriteAuditRows", Actions: []string{"dynamodb:PutItem"}, Resources: []string{dbAudit}},
		{Sid: "CostBudgetAndCache", If: "CostOn", Actions: []string{"dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem"}, Resources: []string{dbState}, Condition: []string{dbCostRows}},
		{Sid: "GetCostAndUsageUnscoped", If: "CostOn", Actions: []string{"ce:GetCostAndUsage"}, Resources: []string{"*"}},
		{Sid: "AssumeActionsRole", If: "ActionsOn", Actions: []string{"sts:AssumeRole"}, Resources: []string{dbActionsRole}},
		{Sid: "ReadTheLogo", If: "LogoOn", Actions: []string{"s3:GetObject"}, Resources: []string{"arn:${AWS::Partition}:s3:::${LogoBucket}/${LogoKey}"}},
		ownLogs("ApiLogGroup"),
	},
	"ActionsRole/AssumeRolePolicyDocument": {
		{Sid: "OnlyTheDashboardFunction", Principal: "AWS=GetAtt:ApiRole.Arn", Actions: []string{"sts:AssumeRole"}, Condition: []string{dbSessionName}},
	},
	"ActionsRole/Policies/dashboard-actions": {
		{Sid: "KillPauseResume", Actions: []string{"lambda:TerminateMicrovm", "lambda:SuspendMicrovm", "lambda:ResumeMicrovm"}, Resources: []string{dbMicrovms}},
	},
	"QuotaRole/AssumeRolePolicyDocument": evTrust("lambda.amazonaws.com", "LambdaInThisAccount"),
	"QuotaRole/Policies/quota-alert": {
		{Sid: "ListMicrovmsUnscoped", Actions: []string{"lambda:ListMicrovms"}, Resources: []string{"*"}},
		{Sid: "OwnStateRow", Actions: []string{"dynamodb:GetItem", "dynamodb:PutItem"}, Resources: []string{dbState}, Condition: []string{dbQuotaRow}},
		{Sid: "PutOwnMetricsUnscoped", Actions: []string{"cloudwatch:PutMetricData"}, Resources: []string{"*"}, Condition: []string{dbMetrics}},
		{Sid: "PublishToOwnTopic", Actions: []string{"sns:Publish"}, Resources: []string{"Ref:QuotaTopic"}},
		ownLogs("QuotaLogGroup"),
	},
	"SchedulerRole/AssumeRolePolicyDocument": evTrust("scheduler.amazonaws.com", "SchedulerInThisAccount"),
	"SchedulerRole/Policies/invoke-quota": {
		{Sid: "InvokeQuotaAlert", Actions: []string{"lambda:InvokeFunction"}, Resources: []string{"GetAtt:QuotaFunction.Arn"}},
	},
}

var dbResources = map[string]string{
	"AuditTable": "AWS::DynamoDB::Table", "StateTable": "AWS::DynamoDB::Table",
	"ApiLogGroup": "AWS::Logs::LogGroup", "QuotaLogGroup": "AWS::Logs::LogGroup",
	"ApiRole": "AWS::IAM::Role", "ActionsRole": "AWS::IAM::Role", "QuotaRole": "AWS::IAM::Role", "SchedulerRole": "AWS::IAM::Role",
	"ApiFunction": "AWS::Lambda::Function", "QuotaFunction": "AWS::Lambda::Function",
	"ApiFunctionUrl": "AWS::Lambda::Url", "ApiFunctionUrlPermission": "AWS::Lambda::Permission", "ApiFunctionInvokePermission": "AWS::Lambda::Permission",
	"QuotaTopic": "AWS::SNS::Topic", "QuotaSchedule": "AWS::Scheduler::Schedule",
}

var dbFunctions = map[string]lambdaWant{
	"ApiFunction": {role: "ApiRole", logs: "ApiLogGroup", reserved: true, env: map[string]string{
		"RAYITO_DASHBOARD_MODE": "api", "RAYITO_DASHBOARD_USER_POOL_ID": "Ref:UserPoolId", "RAYITO_DASHBOARD_CLIENT_ID": "Ref:UserPoolClientId",
		"RAYITO_DASHBOARD_HOSTED_UI_DOMAIN": "Ref:HostedUIDomain", "RAYITO_DASHBOARD_GROUP": "Ref:ActionsGroup",
		"RAYITO_DASHBOARD_AUDIT_TABLE": "Ref:AuditTable", "RAYITO_DASHBOARD_STATE_TABLE": "Ref:StateTable",
		"RAYITO_DASHBOARD_ACTIONS_ROLE_ARN": "If:ActionsOn:" + dbActionsRole, "RAYITO_DASHBOARD_COST_EXPLORER": "Ref:EnableCostExplorer",
		"RAYITO_DASHBOARD_THEME": "Ref:Theme", "RAYITO_DASHBOARD_LOGO": "If:LogoOn:s3://${LogoBucket}/${LogoKey}",
	}},
	"QuotaFunction": {role: "QuotaRole", logs: "QuotaLogGroup", reserved: true, env: map[string]string{
		"RAYITO_DASHBOARD_MODE": "quota", "RAYITO_DASHBOARD_STATE_TABLE": "Ref:StateTable", "RAYITO_DASHBOARD_QUOTA_TOPIC_ARN": "Ref:QuotaTopic",
		"RAYITO_DASHBOARD_QUOTA_LIMIT": "Ref:QuotaLimit", "RAYITO_DASHBOARD_QUOTA_PERCENT": "Ref:QuotaAlertPercent",
	}},
}

// dbAuditDenied are the writes the audit table's resource policy denies to
// every principal.
var dbAuditDenied = []string{"dynamodb:BatchWriteItem", "dynamodb:DeleteItem", "dynamodb:PartiQLDelete", "dynamodb:PartiQLUpdate", "dynamodb:UpdateItem"}

func dbDocuments(tpl map[string]any) (map[string][]stmt, problems) {
	return roleDocuments(tpl, dbResources, func(name, typ string, props map[string]any, _ func(string, any), p *problems) {
		switch typ {
		case "AWS::DynamoDB::Table":
			if name != "AuditTable" && props["ResourcePolicy"] != nil {
				p.addf("resource %s: a resource policy grants outside the expectation table", name)
			}
		case "AWS::IAM::Policy", "AWS::IAM::ManagedPolicy", "AWS::SNS::TopicPolicy", "AWS::IAM::User", "AWS::IAM::AccessKey":
			p.addf("resource %s: %s grants outside the expectation table", name, typ)
		}
	})
}

func dbCheckInvariants(docs map[string][]stmt) problems {
	var p problems
	for _, loc := range sortedLocations(docs) {
		owner, _, _ := strings.Cut(loc, "/")
		for _, s := range docs[loc] {
			for _, a := range s.Actions {
				p = append(p, checkActionScope(loc, s, a, dbUnscoped)...)
				// The audit table: PutItem only, by the API function only.
				if slices.Contains(s.Resources, dbAudit) && (a != "dynamodb:PutItem" || owner != "ApiRole") {
					p.addf("%s statement %q: %s on the audit table (only the API function's PutItem)", loc, s.Sid, a)
				}
				// Acting on microVMs: the actions role only.
				if (a == "lambda:TerminateMicrovm" || a == "lambda:SuspendMicrovm" || a == "lambda:ResumeMicrovm" || a == "lambda:RunMicrovm") && owner != "ActionsRole" {
					p.addf("%s statement %q: %s outside the actions role", loc, s.Sid, a)
				}
				if owner == "ActionsRole" && strings.HasSuffix(loc, "/Policies/dashboard-actions") && a != "lambda:TerminateMicrovm" && a != "lambda:SuspendMicrovm" && a != "lambda:ResumeMicrovm" {
					p.addf("%s statement %q: the actions role gets %s", loc, s.Sid, a)
				}
				if a == "dynamodb:Scan" || a == "dynamodb:DeleteItem" || a == "dynamodb:BatchWriteItem" || a == "dynamodb:DeleteTable" || strings.HasPrefix(a, "dynamodb:PartiQL") {
					p.addf("%s statement %q: %s (never needed)", loc, s.Sid, a)
				}
				if strings.HasPrefix(a, "dynamodb:") && slices.Contains(s.Resources, dbState) && len(s.Condition) == 0 {
					p.addf("%s statement %q: %s on the state table without a dynamodb:LeadingKeys condition", loc, s.Sid, a)
				}
				if a == "cloudwatch:PutMetricData" && (owner != "QuotaRole" || !slices.Equal(s.Condition, []string{dbMetrics})) {
					p.addf("%s statement %q: PutMetricData outside the quota role's namespace", loc, s.Sid)
				}
				if a == "ce:GetCostAndUsage" && s.If != "CostOn" {
					p.addf("%s statement %q: Cost Explorer without EnableCostExplorer", loc, s.Sid)
				}
				if a == "sts:AssumeRole" && owner == "ApiRole" && !strings.HasSuffix(loc, "AssumeRolePolicyDocument") && s.If != "ActionsOn" {
					p.addf("%s statement %q: assumes a role without AllowActions", loc, s.Sid)
				}
			}
			if strings.HasSuffix(loc, "AssumeRolePolicyDocument") {
				if owner == "ActionsRole" {
					if s.Principal != "AWS=GetAtt:ApiRole.Arn" || !slices.Contains(s.Condition, dbSessionName) {
						p.addf("%s: the actions role trusts %q (only the API function's role, session rayito-dash-*)", loc, s.Principal)
					}
				} else if !slices.Contains(s.Condition, sourceAccount) {
					p.addf("%s: trust without aws:SourceAccount", loc)
				}
			}
		}
	}
	return p
}

func dbCheckResources(tpl map[string]any) problems {
	var p problems
	res := section(tpl, "Resources")
	// The actions role exists only with AllowActions=true.
	if section(res, "ActionsRole")["Condition"] != "ActionsOn" {
		p.addf("ActionsRole: not conditional on ActionsOn")
	}
	if c := section(section(tpl, "Conditions"), "ActionsOn"); fmt.Sprint(c["Fn::Equals"]) != "[map[Ref:AllowActions] true]" {
		p.addf("ActionsOn: %v (want AllowActions == \"true\")", c)
	}
	if a := section(section(tpl, "Parameters"), "AllowActions"); a["Default"] != "false" {
		p.addf("AllowActions: default %v (want false)", a["Default"])
	}
	if a := section(section(tpl, "Parameters"), "EnableCostExplorer"); a["Default"] != "false" {
		p.addf("EnableCostExplorer: default %v (want false)", a["Default"])
	}
	// The audit table: retained, PITR, SSE, and a resource policy denying
	// every rewrite to everyone.
	at := props(tpl, "AuditTable")
	if section(res, "AuditTable")["DeletionPolicy"] != "Retain" || fmt.Sprint(at["DeletionProtectionEnabled"]) != "true" {
		p.addf("AuditTable: not retained and protected from deletion")
	}
	if fmt.Sprint(section(at, "PointInTimeRecoverySpecification")["PointInTimeRecoveryEnabled"]) != "true" || fmt.Sprint(section(at, "SSESpecification")["SSEEnabled"]) != "true" {
		p.addf("AuditTable: PITR or SSE off")
	}
	denied := false
	doc := section(section(at, "ResourcePolicy"), "PolicyDocument")
	list, _ := doc["Statement"].([]any)
	for _, raw := range list {
		m, _ := raw.(map[string]any)
		if m["Effect"] != "Deny" {
			p.addf("AuditTable: the resource policy has a non-Deny statement %v", m["Sid"])
			continue
		}
		acts, _ := render(m["Action"])
		if m["Principal"] == "*" && str(m["Resource"]) == "*" && slices.Equal(sortedUnique(acts), dbAuditDenied) && m["Condition"] == nil {
			denied = true
		}
	}
	if !denied {
		p.addf("AuditTable: no unconditional Deny of %v to every principal", dbAuditDenied)
	}
	st := props(tpl, "StateTable")
	if ttl := section(st, "TimeToLiveSpecification"); str(ttl["AttributeName"]) != "expires_at" || fmt.Sprint(ttl["Enabled"]) != "true" {
		p.addf("StateTable: TTL on expires_at not enabled")
	}
	// The URL: AuthType NONE (the function checks identity), no CORS, and
	// permissions only for the URL.
	u := props(tpl, "ApiFunctionUrl")
	if str(u["AuthType"]) != "NONE" || str(u["TargetFunctionArn"]) != "GetAtt:ApiFunction.Arn" {
		p.addf("ApiFunctionUrl: %v", u)
	}
	if _, ok := u["Cors"]; ok {
		p.addf("ApiFunctionUrl: CORS enabled")
	}
	if pu := props(tpl, "ApiFunctionUrlPermission"); str(pu["Action"]) != "lambda:InvokeFunctionUrl" || str(pu["FunctionUrlAuthType"]) != "NONE" || str(pu["FunctionName"]) != "Ref:ApiFunction" {
		p.addf("ApiFunctionUrlPermission: %v", pu)
	}
	if pi := props(tpl, "ApiFunctionInvokePermission"); str(pi["Action"]) != "lambda:InvokeFunction" || fmt.Sprint(pi["InvokedViaFunctionUrl"]) != "true" || str(pi["FunctionName"]) != "Ref:ApiFunction" {
		p.addf("ApiFunctionInvokePermission: %v (only via the function URL)", pi)
	}
	// Functions: their own role, log group, exact variables; reserved
	// concurrency bounded.
	p = append(p, checkFunctions(tpl, dbFunctions)...)
	if rc := section(section(tpl, "Parameters"), "ReservedConcurrency"); fmt.Sprint(rc["MaxValue"]) != "50" || fmt.Sprint(rc["MinValue"]) != "1" {
		p.addf("ReservedConcurrency: %v (want 1 to 50)", rc)
	}
	if str(props(tpl, "ApiFunction")["ReservedConcurrentExecutions"]) != "Ref:ReservedConcurrency" {
		p.addf("ApiFunction: reserved concurrency is not the ReservedConcurrency parameter")
	}
	if t := props(tpl, "QuotaTopic"); t["KmsMasterKeyId"] == nil {
		p.addf("QuotaTopic: not encrypted")
	}
	s := props(tpl, "QuotaSchedule")
	if str(s["ScheduleExpression"]) != "rate(${QuotaCheckMinutes} minutes)" || str(section(s, "Target")["Arn"]) != "GetAtt:QuotaFunction.Arn" {
		p.addf("QuotaSchedule: %v", s)
	}
	return p
}

// envValue renders an environment value, !If included.
func envValue(v any) string {
	if m, ok := v.(map[string]any); ok {
		if l, ok := m["Fn::If"].([]any); ok && len(l) == 3 {
			return fmt.Sprintf("If:%v:%s", l[0], str(l[1]))
		}
	}
	return str(v)
}

func dbCheckAll(tpl map[string]any) problems {
	return checkTemplate(tpl, dbDocuments, dbExpected, dbCheckInvariants, dbCheckResources)
}

func TestDashboardTemplate(t *testing.T) {
	report(t, dbCheckAll(loadTemplateFile(t, dbTemplate)))
}

// TestDashboardCheckerCatches: each widening of the template is reported.
func TestDashboardCheckerCatches(t *testing.T) {
	const (
		api     = "ApiRole/Policies/dashboard-read"
		actions = "ActionsRole/Policies/dashboard-actions"
		quota   = "QuotaRole/Policies/quota-alert"
	)
	cases := []struct {
		name   string
		mutate func(t *testing.T, tpl map[string]any)
		want   string
	}{
		{"function updates audit rows", func(t *testing.T, tpl map[string]any) {
			addToList(findStmt(t, tpl, api, "WriteAuditRows"), "Action", "dynamodb:UpdateItem")
		}, "on the audit table (only the API function's PutItem)"},
		{"function deletes audit rows", func(t *testing.T, tpl map[string]any) {
			addToList(findStmt(t, tpl, api, "WriteAuditRows"), "Action", "dynamodb:DeleteItem")
		}, "dynamodb:DeleteItem (never needed)"},
		{"quota function writes the audit table", func(t *testing.T, tpl map[string]any) {
			addToList(findStmt(t, tpl, quota, "OwnStateRow"), "Resource", map[string]any{"Fn::GetAtt": []any{"AuditTable", "Arn"}})
		}, "on the audit table"},
		{"the deny on rewrites dropped", func(t *testing.T, tpl map[string]any) {
			delete(props(tpl, "AuditTable"), "ResourcePolicy")
		}, "AuditTable: no unconditional Deny"},
		{"the deny narrowed", func(t *testing.T, tpl map[string]any) {
			st := section(section(props(tpl, "AuditTable"), "ResourcePolicy"), "PolicyDocument")["Statement"].([]any)[0].(map[string]any)
			st["Action"] = []any{"dynamodb:DeleteItem"}
		}, "AuditTable: no unconditional Deny"},
		{"the read role terminates", func(t *testing.T, tpl map[string]any) {
			addToList(findStmt(t, tpl, api, "ListMicrovmsUnscoped"), "Action", "lambda:TerminateMicrovm")
		}, "lambda:TerminateMicrovm outside the actions role"},
		{"the actions role runs microVMs", func(t *testing.T, tpl map[string]any) {
			addToList(findStmt(t, tpl, actions, "KillPauseResume"), "Action", "lambda:RunMicrovm")
		}, "the actions role gets lambda:RunMicrovm"},
		{"the actions role without AllowActions", func(t *testing.T, tpl map[string]any) {
			delete(section(section(tpl, "Resources"), "ActionsRole"), "Condition")
		}, "ActionsRole: not conditional on ActionsOn"},
		{"the actions role trusts the account", func(t *testing.T, tpl map[string]any) {
			findStmt(t, tpl, "ActionsRole/AssumeRolePolicyDocument", "OnlyTheDashboardFunction")["Principal"] = map[string]any{"AWS": map[string]any{"Fn::Sub": "arn:${AWS::Partition}:iam::${AWS::AccountId}:root"}}
		}, "the actions role trusts"},
		{"the actions role without the session name", func(t *testing.T, tpl map[string]any) {
			delete(findStmt(t, tpl, "ActionsRole/AssumeRolePolicyDocument", "OnlyTheDashboardFunction"), "Condition")
		}, "the actions role trusts"},
		{"assume without AllowActions", func(t *testing.T, tpl map[string]any) {
			for i, raw := range docStatements(t, tpl, api) {
				if l, ok := raw.(map[string]any)["Fn::If"].([]any); ok && l[1].(map[string]any)["Sid"] == "AssumeActionsRole" {
					section(section(section(tpl, "Resources"), "ApiRole"), "Properties")["Policies"].([]any)[0].(map[string]any)["PolicyDocument"].(map[string]any)["Statement"].([]any)[i] = l[1]
				}
			}
		}, "assumes a role without AllowActions"},
		{"cost without EnableCostExplorer", func(t *testing.T, tpl map[string]any) {
			for i, raw := range docStatements(t, tpl, api) {
				if l, ok := raw.(map[string]any)["Fn::If"].([]any); ok && l[1].(map[string]any)["Sid"] == "GetCostAndUsageUnscoped" {
					section(section(section(tpl, "Resources"), "ApiRole"), "Properties")["Policies"].([]any)[0].(map[string]any)["PolicyDocument"].(map[string]any)["Statement"].([]any)[i] = l[1]
				}
			}
		}, "Cost Explorer without EnableCostExplorer"},
		{"budget rows unconditioned", func(t *testing.T, tpl map[string]any) {
			delete(findStmt(t, tpl, api, "CostBudgetAndCache"), "Condition")
		}, "on the state table without a dynamodb:LeadingKeys condition"},
		{"quota function reads the budget", func(t *testing.T, tpl map[string]any) {
			findStmt(t, tpl, quota, "OwnStateRow")["Condition"] = map[string]any{"ForAllValues:StringLike": map[string]any{"dynamodb:LeadingKeys": []any{"*"}}}
		}, quota + " statement \"OwnStateRow\""},
		{"metrics in any namespace", func(t *testing.T, tpl map[string]any) {
			delete(findStmt(t, tpl, quota, "PutOwnMetricsUnscoped"), "Condition")
		}, "PutMetricData outside the quota role's namespace"},
		{"publish to any topic", func(t *testing.T, tpl map[string]any) {
			findStmt(t, tpl, quota, "PublishToOwnTopic")["Resource"] = "*"
		}, "sns:Publish on Resource \"*\""},
		{"every user pool", func(t *testing.T, tpl map[string]any) {
			findStmt(t, tpl, api, "RecheckUsers")["Resource"] = map[string]any{"Fn::Sub": "arn:${AWS::Partition}:cognito-idp:${AWS::Region}:${AWS::AccountId}:userpool/*"}
		}, api + " statement \"RecheckUsers\""},
		{"wildcard action", func(t *testing.T, tpl map[string]any) {
			findStmt(t, tpl, api, "WriteOwnLogs")["Action"] = "logs:*"
		}, "wildcard action \"logs:*\""},
		{"CORS on the URL", func(t *testing.T, tpl map[string]any) {
			props(tpl, "ApiFunctionUrl")["Cors"] = map[string]any{"AllowOrigins": []any{"*"}}
		}, "ApiFunctionUrl: CORS enabled"},
		{"invoke from anywhere, not only the URL", func(t *testing.T, tpl map[string]any) {
			delete(props(tpl, "ApiFunctionInvokePermission"), "InvokedViaFunctionUrl")
		}, "ApiFunctionInvokePermission"},
		{"no reserved concurrency", func(t *testing.T, tpl map[string]any) {
			delete(props(tpl, "ApiFunction"), "ReservedConcurrentExecutions")
		}, "ApiFunction: no reserved concurrency"},
		{"functions share a role", func(t *testing.T, tpl map[string]any) {
			props(tpl, "QuotaFunction")["Role"] = map[string]any{"Fn::GetAtt": []any{"ApiRole", "Arn"}}
		}, "QuotaFunction: role GetAtt:ApiRole.Arn"},
		{"actions on by default", func(t *testing.T, tpl map[string]any) {
			section(section(tpl, "Parameters"), "AllowActions")["Default"] = "true"
		}, "AllowActions: default true"},
		{"trust without source account", func(t *testing.T, tpl map[string]any) {
			delete(findStmt(t, tpl, "QuotaRole/AssumeRolePolicyDocument", "LambdaInThisAccount"), "Condition")
		}, "trust without aws:SourceAccount"},
		{"audit table without PITR", func(t *testing.T, tpl map[string]any) {
			section(props(tpl, "AuditTable"), "PointInTimeRecoverySpecification")["PointInTimeRecoveryEnabled"] = "false"
		}, "AuditTable: PITR or SSE off"},
		{"a topic policy", func(t *testing.T, tpl map[string]any) {
			section(tpl, "Resources")["OpenTopic"] = map[string]any{"Type": "AWS::SNS::TopicPolicy", "Properties": map[string]any{}}
		}, "resource OpenTopic: unexpected"},
	}
	base := loadTemplateFile(t, dbTemplate)
	if p := dbCheckAll(base); len(p) != 0 {
		t.Fatalf("the unmodified template has problems: %v", p)
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tpl := deepCopy(base).(map[string]any)
			tc.mutate(t, tpl)
			p := dbCheckAll(tpl)
			for _, s := range p {
				if strings.Contains(s, tc.want) {
					return
				}
			}
			t.Errorf("checker did not report %q; it reported %d problems: %v", tc.want, len(p), p)
		})
	}
}

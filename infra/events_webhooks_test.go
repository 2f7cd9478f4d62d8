package infra_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// ---------------------------------------------------------------------------
// ../events/stack/events-webhooks.yaml (the template the events module
// embeds and `rayito stack deploy events` deploys): the expectation tables. Widening a statement, adding
// one, or giving a function another's role fails until the table changes
// too, in review.
// ---------------------------------------------------------------------------

const (
	evTemplate      = "../events/stack/events-webhooks.yaml"
	evTable         = "GetAtt:EventsTable.Arn"
	evStream        = "GetAtt:EventsTable.StreamArn"
	evIndex         = "${EventsTable.Arn}/index/open-sandboxes"
	evStackKey      = "Ref:StackKeySecret"
	evWebhookSecret = "arn:${AWS::Partition}:secretsmanager:${AWS::Region}:${AWS::AccountId}:secret:rayito/webhooks/*"
	evMicrovms      = "arn:${AWS::Partition}:lambda:${AWS::Region}:${AWS::AccountId}:microvm:*"
	sandboxRows     = "ForAllValues:StringLike dynamodb:LeadingKeys=sandbox#*"
	webhookRows     = "ForAllValues:StringEquals dynamodb:LeadingKeys=webhooks"
	delivererRows   = "ForAllValues:StringLike dynamodb:LeadingKeys=delivery#*,webhooks"
)

// evUnscoped are the only actions allowed on Resource "*" in this
// template, each with the reason.
var evUnscoped = map[string]string{
	"lambda:ListMicrovms":  "GET /microvms names no resource",
	"dynamodb:ListStreams": "ListStreams lists the account's streams; it names none",
}

func evTrust(service, sid string) []stmt {
	return []stmt{{Sid: sid, Principal: "Service=" + service, Actions: []string{"sts:AssumeRole"}, Condition: []string{sourceAccount}}}
}

func ownLogs(group string) stmt {
	return stmt{Sid: "WriteOwnLogs", Actions: []string{"logs:CreateLogStream", "logs:PutLogEvents"}, Resources: []string{"GetAtt:" + group + ".Arn"}}
}

var evExpected = map[string][]stmt{
	"ForwarderRole/AssumeRolePolicyDocument": evTrust("lambda.amazonaws.com", "LambdaInThisAccount"),
	"ForwarderRole/Policies/forwarder": {
		{Sid: "ReadStackKey", Actions: []string{"secretsmanager:GetSecretValue"}, Resources: []string{evStackKey}},
		{Sid: "WriteSandboxRows", Actions: []string{"dynamodb:GetItem", "dynamodb:PutItem"}, Resources: []string{evTable}, Condition: []string{sandboxRows}},
		{Sid: "ReportFailedInvocations", Actions: []string{"sqs:SendMessage"}, Resources: []string{"GetAtt:InvocationFailureQueue.Arn"}},
		ownLogs("ForwarderLogGroup"),
	},
	"DelivererRole/AssumeRolePolicyDocument": evTrust("lambda.amazonaws.com", "LambdaInThisAccount"),
	"DelivererRole/Policies/deliverer": {
		{Sid: "ReadTableStream", Actions: []string{"dynamodb:DescribeStream", "dynamodb:GetRecords", "dynamodb:GetShardIterator"}, Resources: []string{evStream}},
		{Sid: "ListStreamsUnscoped", Actions: []string{"dynamodb:ListStreams"}, Resources: []string{"*"}},
		{Sid: "ReadWebhooksWriteDeliveries", Actions: []string{"dynamodb:Query", "dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem"}, Resources: []string{evTable}, Condition: []string{delivererRows}},
		{Sid: "ReadWebhookSecrets", Actions: []string{"secretsmanager:GetSecretValue"}, Resources: []string{evWebhookSecret}},
		{Sid: "SendFailures", Actions: []string{"sqs:SendMessage"}, Resources: []string{"GetAtt:DeliveryFailureQueue.Arn", "GetAtt:InvocationFailureQueue.Arn"}},
		ownLogs("DelivererLogGroup"),
	},
	"ReconcilerRole/AssumeRolePolicyDocument": evTrust("lambda.amazonaws.com", "LambdaInThisAccount"),
	"ReconcilerRole/Policies/reconciler": {
		{Sid: "QueryOpenSandboxes", Actions: []string{"dynamodb:Query"}, Resources: []string{evIndex}},
		{Sid: "WriteKilledEvents", Actions: []string{"dynamodb:GetItem", "dynamodb:PutItem"}, Resources: []string{evTable}, Condition: []string{sandboxRows}},
		{Sid: "GetMicrovms", Actions: []string{"lambda:GetMicrovm"}, Resources: []string{evMicrovms}},
		{Sid: "ListMicrovmsUnscoped", Actions: []string{"lambda:ListMicrovms"}, Resources: []string{"*"}},
		ownLogs("ReconcilerLogGroup"),
	},
	"SchedulerRole/AssumeRolePolicyDocument": evTrust("scheduler.amazonaws.com", "SchedulerInThisAccount"),
	"SchedulerRole/Policies/invoke-reconciler": {
		{Sid: "InvokeReconciler", Actions: []string{"lambda:InvokeFunction"}, Resources: []string{"GetAtt:ReconcilerFunction.Arn"}},
	},
	"EventsLauncherPolicy/PolicyDocument": {
		{Sid: "ReadStackKey", Actions: []string{"secretsmanager:GetSecretValue"}, Resources: []string{evStackKey}},
	},
	"EventsReaderPolicy/PolicyDocument": {
		{Sid: "ReadSandboxRows", Actions: []string{"dynamodb:GetItem", "dynamodb:Query"}, Resources: []string{evTable}, Condition: []string{sandboxRows}},
	},
	"EventsWebhookAdminPolicy/PolicyDocument": {
		{Sid: "ManageWebhookRows", Actions: []string{"dynamodb:GetItem", "dynamodb:Query", "dynamodb:PutItem", "dynamodb:DeleteItem"}, Resources: []string{evTable}, Condition: []string{webhookRows}},
		{Sid: "ManageWebhookSecrets", Actions: []string{"secretsmanager:CreateSecret", "secretsmanager:PutSecretValue", "secretsmanager:DeleteSecret", "secretsmanager:DescribeSecret", "secretsmanager:TagResource"}, Resources: []string{evWebhookSecret}},
	},
}

// evResources is every resource of the template and its type.
var evResources = map[string]string{
	"StackKeySecret": "AWS::SecretsManager::Secret", "EventsTable": "AWS::DynamoDB::Table",
	"FailureDeadLetterQueue": "AWS::SQS::Queue", "DeliveryFailureQueue": "AWS::SQS::Queue", "InvocationFailureQueue": "AWS::SQS::Queue",
	"ForwarderLogGroup": "AWS::Logs::LogGroup", "DelivererLogGroup": "AWS::Logs::LogGroup", "ReconcilerLogGroup": "AWS::Logs::LogGroup",
	"ForwarderRole": "AWS::IAM::Role", "DelivererRole": "AWS::IAM::Role", "ReconcilerRole": "AWS::IAM::Role", "SchedulerRole": "AWS::IAM::Role",
	"ForwarderFunction": "AWS::Lambda::Function", "DelivererFunction": "AWS::Lambda::Function", "ReconcilerFunction": "AWS::Lambda::Function",
	"ForwarderInvokeConfig": "AWS::Lambda::EventInvokeConfig", "ForwarderLogsPermission": "AWS::Lambda::Permission",
	"ImageLogSubscription": "AWS::Logs::SubscriptionFilter", "DelivererStreamMapping": "AWS::Lambda::EventSourceMapping",
	"ReconcileSchedule":    "AWS::Scheduler::Schedule",
	"EventsLauncherPolicy": "AWS::IAM::ManagedPolicy", "EventsReaderPolicy": "AWS::IAM::ManagedPolicy", "EventsWebhookAdminPolicy": "AWS::IAM::ManagedPolicy",
}

// evFunctions maps each function to its role, log group and environment
// variables.
var evFunctions = map[string]lambdaWant{
	"ForwarderFunction":  {role: "ForwarderRole", logs: "ForwarderLogGroup", code: "forwarder", env: map[string]string{"RAYITO_EVENTS_TABLE": "Ref:EventsTable", "RAYITO_EVENTS_STACK_KEY_SECRET": "Ref:StackKeySecret"}},
	"DelivererFunction":  {role: "DelivererRole", logs: "DelivererLogGroup", code: "deliverer", env: map[string]string{"RAYITO_EVENTS_TABLE": "Ref:EventsTable", "RAYITO_EVENTS_FAILURE_QUEUE_URL": "Ref:DeliveryFailureQueue"}},
	"ReconcilerFunction": {role: "ReconcilerRole", logs: "ReconcilerLogGroup", code: "reconciler", env: map[string]string{"RAYITO_EVENTS_TABLE": "Ref:EventsTable"}},
}

// ---------------------------------------------------------------------------
// Checks.
// ---------------------------------------------------------------------------

// evDocuments returns every policy document (roles' trust and inline
// policies, managed policies) by location.
func evDocuments(tpl map[string]any) (map[string][]stmt, problems) {
	return roleDocuments(tpl, evResources, func(name, typ string, props map[string]any, add func(string, any), p *problems) {
		switch typ {
		case "AWS::IAM::ManagedPolicy":
			for _, k := range []string{"Roles", "Users", "Groups"} {
				if _, ok := props[k]; ok {
					p.addf("resource %s: attached by the template (%s); callers attach it", name, k)
				}
			}
			add(name+"/PolicyDocument", props["PolicyDocument"])
		case "AWS::SQS::QueuePolicy", "AWS::SecretsManager::ResourcePolicy", "AWS::IAM::Policy":
			p.addf("resource %s: %s grants outside the expectation table", name, typ)
		}
	})
}

// evCheckInvariants are the rules the tables encode, stated on their own
// so that a table edited in review still cannot break them.
func evCheckInvariants(docs map[string][]stmt) problems {
	var p problems
	for _, loc := range sortedLocations(docs) {
		owner, _, _ := strings.Cut(loc, "/")
		for _, s := range docs[loc] {
			for _, a := range s.Actions {
				p = append(p, checkActionScope(loc, s, a, evUnscoped)...)
				if strings.HasPrefix(a, "dynamodb:") && slices.Contains(s.Resources, evTable) && len(s.Condition) == 0 {
					p.addf("%s statement %q: %s on the table without a dynamodb:LeadingKeys condition", loc, s.Sid, a)
				}
				if a == "dynamodb:Scan" || a == "dynamodb:BatchWriteItem" || a == "dynamodb:PartiQLSelect" || a == "dynamodb:DeleteTable" {
					p.addf("%s statement %q: %s (never needed)", loc, s.Sid, a)
				}
			}
			// Who may read the stack key: the forwarder and the launcher
			// policy only.
			if slices.Contains(s.Resources, evStackKey) && owner != "ForwarderRole" && owner != "EventsLauncherPolicy" {
				p.addf("%s statement %q: reads the stack key", loc, s.Sid)
			}
			if slices.Contains(s.Resources, evStackKey) && !slices.Equal(s.Actions, []string{"secretsmanager:GetSecretValue"}) {
				p.addf("%s statement %q: %v on the stack key (only GetSecretValue)", loc, s.Sid, s.Actions)
			}
			// Webhook secrets: the deliverer reads, the admin manages,
			// nobody else touches them.
			if slices.ContainsFunc(s.Resources, func(r string) bool { return strings.Contains(r, "rayito/webhooks") }) {
				switch owner {
				case "DelivererRole":
					if !slices.Equal(s.Actions, []string{"secretsmanager:GetSecretValue"}) {
						p.addf("%s statement %q: the deliverer only reads webhook secrets", loc, s.Sid)
					}
				case "EventsWebhookAdminPolicy":
					if slices.Contains(s.Actions, "secretsmanager:GetSecretValue") {
						p.addf("%s statement %q: the admin policy reads webhook secrets", loc, s.Sid)
					}
				default:
					p.addf("%s statement %q: touches webhook secrets", loc, s.Sid)
				}
			}
			// The reader sees sandbox rows only.
			if owner == "EventsReaderPolicy" {
				for _, a := range s.Actions {
					if a != "dynamodb:GetItem" && a != "dynamodb:Query" {
						p.addf("%s statement %q: the reader policy gets %s", loc, s.Sid, a)
					}
				}
				if !slices.Equal(s.Condition, []string{sandboxRows}) {
					p.addf("%s statement %q: the reader policy is not limited to sandbox rows", loc, s.Sid)
				}
			}
			// The reconciler queries the index, never the table.
			if owner == "ReconcilerRole" && slices.Contains(s.Actions, "dynamodb:Query") && !slices.Equal(s.Resources, []string{evIndex}) {
				p.addf("%s statement %q: the reconciler queries beyond the open-sandbox index", loc, s.Sid)
			}
			if strings.HasSuffix(loc, "AssumeRolePolicyDocument") && !slices.Contains(s.Condition, sourceAccount) {
				p.addf("%s: trust without aws:SourceAccount", loc)
			}
		}
	}
	return p
}

func props(tpl map[string]any, name string) map[string]any {
	return section(section(section(tpl, "Resources"), name), "Properties")
}

func str(v any) string {
	r, err := render(v)
	if err != nil || len(r) != 1 {
		return fmt.Sprint(v)
	}
	return r[0]
}

// evCheckResources checks the non-IAM resources' security settings.
func evCheckResources(tpl map[string]any) problems {
	var p problems
	// The table.
	tb := props(tpl, "EventsTable")
	if str(section(tb, "StreamSpecification")["StreamViewType"]) != "NEW_IMAGE" {
		p.addf("EventsTable: stream must be NEW_IMAGE")
	}
	ttl := section(tb, "TimeToLiveSpecification")
	if str(ttl["AttributeName"]) != "expires_at" || fmt.Sprint(ttl["Enabled"]) != "true" {
		p.addf("EventsTable: TTL on expires_at not enabled")
	}
	if fmt.Sprint(section(tb, "PointInTimeRecoverySpecification")["PointInTimeRecoveryEnabled"]) != "true" {
		p.addf("EventsTable: point-in-time recovery off")
	}
	if fmt.Sprint(section(tb, "SSESpecification")["SSEEnabled"]) != "true" {
		p.addf("EventsTable: SSE off")
	}
	gsis, _ := tb["GlobalSecondaryIndexes"].([]any)
	if len(gsis) != 1 {
		p.addf("EventsTable: want one index (open-sandboxes), got %d", len(gsis))
	} else {
		g, _ := gsis[0].(map[string]any)
		ks, _ := g["KeySchema"].([]any)
		var keys []string
		for _, k := range ks {
			km, _ := k.(map[string]any)
			keys = append(keys, str(km["AttributeName"])+"/"+str(km["KeyType"]))
		}
		if str(g["IndexName"]) != "open-sandboxes" || strings.Join(keys, ",") != "open/HASH,sandbox_id/RANGE" {
			p.addf("EventsTable: index %v %v (want open-sandboxes on open/HASH, sandbox_id/RANGE)", g["IndexName"], keys)
		}
	}
	if section(section(tpl, "Resources"), "EventsTable")["DeletionPolicy"] != "Retain" {
		p.addf("EventsTable: not retained on stack deletion")
	}
	// The secret is generated, never a parameter or literal.
	sk := props(tpl, "StackKeySecret")
	if _, ok := sk["SecretString"]; ok {
		p.addf("StackKeySecret: a literal SecretString")
	}
	if gen := section(sk, "GenerateSecretString"); fmt.Sprint(gen["PasswordLength"]) != "64" {
		p.addf("StackKeySecret: want a generated 64-character key, got %v", gen)
	}
	if name := str(sk["Name"]); strings.HasPrefix(name, "rayito/webhooks/") {
		p.addf("StackKeySecret: named under rayito/webhooks/ (the deliverer and admins reach it)")
	}
	// Queues: SSE; the two failure queues redrive to the DLQ.
	for _, q := range []string{"FailureDeadLetterQueue", "DeliveryFailureQueue", "InvocationFailureQueue"} {
		qp := props(tpl, q)
		if fmt.Sprint(qp["SqsManagedSseEnabled"]) != "true" && qp["KmsMasterKeyId"] == nil {
			p.addf("%s: not encrypted", q)
		}
		if q != "FailureDeadLetterQueue" && str(section(qp, "RedrivePolicy")["deadLetterTargetArn"]) != "GetAtt:FailureDeadLetterQueue.Arn" {
			p.addf("%s: no dead-letter queue", q)
		}
	}
	// Functions: provided.al2023 on arm64, their own role, log group and
	// code, exactly their variables.
	p = append(p, checkFunctions(tpl, evFunctions)...)
	// The subscription: the image log group, only event lines, to the
	// forwarder, which only logs.amazonaws.com of this account may invoke
	// for that group.
	sub := props(tpl, "ImageLogSubscription")
	if str(sub["LogGroupName"]) != "Ref:ImageLogGroupName" || str(sub["FilterPattern"]) != `"rayito.event.v1"` || str(sub["DestinationArn"]) != "GetAtt:ForwarderFunction.Arn" {
		p.addf("ImageLogSubscription: %v", sub)
	}
	perm := props(tpl, "ForwarderLogsPermission")
	if str(perm["Principal"]) != "logs.amazonaws.com" || str(perm["SourceAccount"]) != "Ref:AWS::AccountId" ||
		str(perm["SourceArn"]) != "arn:${AWS::Partition}:logs:${AWS::Region}:${AWS::AccountId}:log-group:${ImageLogGroupName}:*" {
		p.addf("ForwarderLogsPermission: %v", perm)
	}
	// The stream mapping: new event items only, failures kept.
	m := props(tpl, "DelivererStreamMapping")
	filters, _ := section(m, "FilterCriteria")["Filters"].([]any)
	pattern := ""
	if len(filters) == 1 {
		pattern = str(filters[0].(map[string]any)["Pattern"])
	}
	if str(m["EventSourceArn"]) != evStream || pattern != `{"eventName":["INSERT"],"dynamodb":{"NewImage":{"kind":{"S":["event"]}}}}` ||
		str(section(section(m, "DestinationConfig"), "OnFailure")["Destination"]) != "GetAtt:InvocationFailureQueue.Arn" {
		p.addf("DelivererStreamMapping: %v", m)
	}
	// The schedule: the reconciler every ReconcileMinutes (2 at least).
	s := props(tpl, "ReconcileSchedule")
	if str(s["ScheduleExpression"]) != "rate(${ReconcileMinutes} minutes)" || str(section(s, "Target")["Arn"]) != "GetAtt:ReconcilerFunction.Arn" {
		p.addf("ReconcileSchedule: %v", s)
	}
	if rm := section(section(tpl, "Parameters"), "ReconcileMinutes"); fmt.Sprint(rm["MinValue"]) != "2" || fmt.Sprint(rm["Default"]) != "5" {
		p.addf("ReconcileMinutes: %v (want default 5, minimum 2)", rm)
	}
	return p
}

func evCheckAll(tpl map[string]any) problems {
	return checkTemplate(tpl, evDocuments, evExpected, evCheckInvariants, evCheckResources)
}

func TestEventsWebhooksTemplate(t *testing.T) {
	report(t, evCheckAll(loadTemplateFile(t, evTemplate)))
}

// TestEventsWebhooksCheckerCatches: each mutation of the template is
// reported.
func TestEventsWebhooksCheckerCatches(t *testing.T) {
	const (
		fwd   = "ForwarderRole/Policies/forwarder"
		dlv   = "DelivererRole/Policies/deliverer"
		rec   = "ReconcilerRole/Policies/reconciler"
		read  = "EventsReaderPolicy/PolicyDocument"
		admin = "EventsWebhookAdminPolicy/PolicyDocument"
		launc = "EventsLauncherPolicy/PolicyDocument"
	)
	sub := func(s string) map[string]any { return map[string]any{"Fn::Sub": s} }
	cases := []struct {
		name   string
		mutate func(t *testing.T, tpl map[string]any)
		want   string
	}{
		{"forwarder writes any row", func(t *testing.T, tpl map[string]any) {
			delete(findStmt(t, tpl, fwd, "WriteSandboxRows"), "Condition")
		}, "without a dynamodb:LeadingKeys condition"},
		{"forwarder deletes", func(t *testing.T, tpl map[string]any) {
			addToList(findStmt(t, tpl, fwd, "WriteSandboxRows"), "Action", "dynamodb:DeleteItem")
		}, fwd + " statement \"WriteSandboxRows\""},
		{"forwarder reads webhook secrets", func(t *testing.T, tpl map[string]any) {
			addToList(findStmt(t, tpl, fwd, "ReadStackKey"), "Resource", sub(evWebhookSecret))
		}, "touches webhook secrets"},
		{"deliverer reads the stack key", func(t *testing.T, tpl map[string]any) {
			addToList(findStmt(t, tpl, dlv, "ReadWebhookSecrets"), "Resource", map[string]any{"Ref": "StackKeySecret"})
		}, "reads the stack key"},
		{"deliverer reads every secret", func(t *testing.T, tpl map[string]any) {
			findStmt(t, tpl, dlv, "ReadWebhookSecrets")["Resource"] = sub("arn:${AWS::Partition}:secretsmanager:${AWS::Region}:${AWS::AccountId}:secret:*")
		}, dlv + " statement \"ReadWebhookSecrets\""},
		{"deliverer writes sandbox rows", func(t *testing.T, tpl map[string]any) {
			findStmt(t, tpl, dlv, "ReadWebhooksWriteDeliveries")["Condition"] = map[string]any{"ForAllValues:StringLike": map[string]any{"dynamodb:LeadingKeys": []any{"webhooks", "delivery#*", "sandbox#*"}}}
		}, dlv + " statement \"ReadWebhooksWriteDeliveries\""},
		{"deliverer sends to any queue", func(t *testing.T, tpl map[string]any) {
			findStmt(t, tpl, dlv, "SendFailures")["Resource"] = "*"
		}, "sqs:SendMessage on Resource \"*\""},
		{"reconciler scans", func(t *testing.T, tpl map[string]any) {
			addToList(findStmt(t, tpl, rec, "QueryOpenSandboxes"), "Action", "dynamodb:Scan")
		}, "dynamodb:Scan (never needed)"},
		{"reconciler queries the table", func(t *testing.T, tpl map[string]any) {
			findStmt(t, tpl, rec, "QueryOpenSandboxes")["Resource"] = map[string]any{"Fn::GetAtt": []any{"EventsTable", "Arn"}}
		}, "queries beyond the open-sandbox index"},
		{"reconciler terminates microVMs", func(t *testing.T, tpl map[string]any) {
			addToList(findStmt(t, tpl, rec, "GetMicrovms"), "Action", "lambda:TerminateMicrovm")
		}, rec + " statement \"GetMicrovms\""},
		{"reader reads webhooks", func(t *testing.T, tpl map[string]any) {
			delete(findStmt(t, tpl, read, "ReadSandboxRows"), "Condition")
		}, "the reader policy is not limited to sandbox rows"},
		{"reader writes", func(t *testing.T, tpl map[string]any) {
			addToList(findStmt(t, tpl, read, "ReadSandboxRows"), "Action", "dynamodb:PutItem")
		}, "the reader policy gets dynamodb:PutItem"},
		{"admin reads webhook secrets", func(t *testing.T, tpl map[string]any) {
			addToList(findStmt(t, tpl, admin, "ManageWebhookSecrets"), "Action", "secretsmanager:GetSecretValue")
		}, "the admin policy reads webhook secrets"},
		{"launcher rotates the stack key", func(t *testing.T, tpl map[string]any) {
			addToList(findStmt(t, tpl, launc, "ReadStackKey"), "Action", "secretsmanager:PutSecretValue")
		}, "on the stack key (only GetSecretValue)"},
		{"wildcard action", func(t *testing.T, tpl map[string]any) {
			findStmt(t, tpl, fwd, "WriteOwnLogs")["Action"] = "logs:*"
		}, "wildcard action \"logs:*\""},
		{"trust without source account", func(t *testing.T, tpl map[string]any) {
			delete(findStmt(t, tpl, "DelivererRole/AssumeRolePolicyDocument", "LambdaInThisAccount"), "Condition")
		}, "trust without aws:SourceAccount"},
		{"functions share a role", func(t *testing.T, tpl map[string]any) {
			props(tpl, "ReconcilerFunction")["Role"] = map[string]any{"Fn::GetAtt": []any{"DelivererRole", "Arn"}}
		}, "ReconcilerFunction: role GetAtt:DelivererRole.Arn"},
		{"function logs to another's group", func(t *testing.T, tpl map[string]any) {
			section(props(tpl, "DelivererFunction"), "LoggingConfig")["LogGroup"] = map[string]any{"Ref": "ForwarderLogGroup"}
		}, "DelivererFunction: logs to"},
		{"x86 function", func(t *testing.T, tpl map[string]any) {
			props(tpl, "ForwarderFunction")["Architectures"] = []any{"x86_64"}
		}, "ForwarderFunction: runtime"},
		{"stack key in the environment", func(t *testing.T, tpl map[string]any) {
			section(section(props(tpl, "DelivererFunction"), "Environment"), "Variables")["RAYITO_EVENTS_STACK_KEY_SECRET"] = map[string]any{"Ref": "StackKeySecret"}
		}, "DelivererFunction: environment"},
		{"table without PITR", func(t *testing.T, tpl map[string]any) {
			section(props(tpl, "EventsTable"), "PointInTimeRecoverySpecification")["PointInTimeRecoveryEnabled"] = "false"
		}, "point-in-time recovery off"},
		{"table stream with old images", func(t *testing.T, tpl map[string]any) {
			section(props(tpl, "EventsTable"), "StreamSpecification")["StreamViewType"] = "NEW_AND_OLD_IMAGES"
		}, "stream must be NEW_IMAGE"},
		{"TTL off", func(t *testing.T, tpl map[string]any) {
			section(props(tpl, "EventsTable"), "TimeToLiveSpecification")["Enabled"] = "false"
		}, "TTL on expires_at not enabled"},
		{"index keyed on the table key", func(t *testing.T, tpl map[string]any) {
			g := props(tpl, "EventsTable")["GlobalSecondaryIndexes"].([]any)[0].(map[string]any)
			g["KeySchema"].([]any)[0].(map[string]any)["AttributeName"] = "pk"
		}, "want open-sandboxes on open/HASH"},
		{"queue without SSE", func(t *testing.T, tpl map[string]any) {
			delete(props(tpl, "DeliveryFailureQueue"), "SqsManagedSseEnabled")
		}, "DeliveryFailureQueue: not encrypted"},
		{"queue without DLQ", func(t *testing.T, tpl map[string]any) {
			delete(props(tpl, "InvocationFailureQueue"), "RedrivePolicy")
		}, "InvocationFailureQueue: no dead-letter queue"},
		{"stack key under rayito/webhooks", func(t *testing.T, tpl map[string]any) {
			props(tpl, "StackKeySecret")["Name"] = sub("rayito/webhooks/${AWS::StackName}")
		}, "named under rayito/webhooks/"},
		{"subscription of every line", func(t *testing.T, tpl map[string]any) {
			props(tpl, "ImageLogSubscription")["FilterPattern"] = ""
		}, "ImageLogSubscription"},
		{"logs of any account invoke the forwarder", func(t *testing.T, tpl map[string]any) {
			delete(props(tpl, "ForwarderLogsPermission"), "SourceAccount")
		}, "ForwarderLogsPermission"},
		{"stream mapping without filter", func(t *testing.T, tpl map[string]any) {
			delete(props(tpl, "DelivererStreamMapping"), "FilterCriteria")
		}, "DelivererStreamMapping"},
		{"reconcile every minute", func(t *testing.T, tpl map[string]any) {
			section(section(tpl, "Parameters"), "ReconcileMinutes")["MinValue"] = "1"
		}, "want default 5, minimum 2"},
		{"a queue policy", func(t *testing.T, tpl map[string]any) {
			section(tpl, "Resources")["OpenQueue"] = map[string]any{"Type": "AWS::SQS::QueuePolicy", "Properties": map[string]any{}}
		}, "resource OpenQueue: unexpected"},
		{"managed policy attached by the template", func(t *testing.T, tpl map[string]any) {
			props(tpl, "EventsReaderPolicy")["Roles"] = []any{"someone"}
		}, "attached by the template"},
	}
	base := loadTemplateFile(t, evTemplate)
	if p := evCheckAll(base); len(p) != 0 {
		t.Fatalf("the unmodified template has problems: %v", p)
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tpl := deepCopy(base).(map[string]any)
			tc.mutate(t, tpl)
			p := evCheckAll(tpl)
			for _, s := range p {
				if strings.Contains(s, tc.want) {
					return
				}
			}
			t.Errorf("checker did not report %q; it reported %d problems: %v", tc.want, len(p), p)
		})
	}
}

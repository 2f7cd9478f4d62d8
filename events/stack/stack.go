// Package stack is the CloudFormation template of the events stack, as the
// events module releases it: the stack key secret, the events table, the
// forwarder, deliverer and reconciler Lambdas of this module, their
// failure queues and schedule, and the IAM policies for callers.
//
// [Template] is the file events-webhooks.yaml of this directory, embedded
// so that a tool deploying the stack (`rayito stack deploy events`) sends
// exactly the template that was reviewed and tested with the Lambdas of the
// same release. The constants name what the template expects and returns:
// its parameters, its outputs, and the code it runs: in CodeBucket, under
// CodePrefix, one zip per function ([ZipKey]), each holding one executable
// named [ZipEntry] (a provided.al2023 arm64 build of cmd/<function>).
//
// The package only describes the template; it calls no AWS API.
package stack

import _ "embed"

// Template is the CloudFormation template (YAML) of the events stack.
//
//go:embed events-webhooks.yaml
var Template []byte

// DescriptionPrefix is how the template's Description begins: a tool
// updating a stack of the events stack's name checks it is one.
const DescriptionPrefix = "Rayito signed lifecycle events and webhooks"

// The template's parameters.
const (
	// ParamImageLogGroupName is the log group the sandboxes' rayd writes
	// to; its streams are named after the sandbox ids.
	ParamImageLogGroupName = "ImageLogGroupName"
	// ParamCodeBucket is the bucket holding the Lambda zips.
	ParamCodeBucket = "CodeBucket"
	// ParamCodePrefix is the key prefix of the zips; it ends in "/".
	ParamCodePrefix = "CodePrefix"
	// ParamReconcileMinutes is how often the reconciler runs (2 to 60,
	// default 5).
	ParamReconcileMinutes = "ReconcileMinutes"
	// ParamLogRetentionDays is the retention of the functions' own log
	// groups (one of [LogRetentionDays], default 30).
	ParamLogRetentionDays = "LogRetentionDays"
)

// The bounds and defaults the template declares for its numeric
// parameters.
const (
	ReconcileMinutesMin     = 2
	ReconcileMinutesMax     = 60
	ReconcileMinutesDefault = 5
	LogRetentionDaysDefault = 30
)

// LogRetentionDays are the values ParamLogRetentionDays allows.
var LogRetentionDays = []int{1, 3, 5, 7, 14, 30, 60, 90, 180, 365}

// The template's outputs.
const (
	OutputEventsTableName             = "EventsTableName"
	OutputEventsStreamArn             = "EventsStreamArn"
	OutputStackKeySecretArn           = "StackKeySecretArn"
	OutputDeliveryFailureQueueURL     = "DeliveryFailureQueueUrl"
	OutputInvocationFailureQueueURL   = "InvocationFailureQueueUrl"
	OutputEventsLauncherPolicyArn     = "EventsLauncherPolicyArn"
	OutputEventsReaderPolicyArn       = "EventsReaderPolicyArn"
	OutputEventsWebhookAdminPolicyArn = "EventsWebhookAdminPolicyArn"
)

// Outputs lists the template's outputs in the order it declares them.
var Outputs = []string{
	OutputEventsTableName, OutputEventsStreamArn, OutputStackKeySecretArn,
	OutputDeliveryFailureQueueURL, OutputInvocationFailureQueueURL,
	OutputEventsLauncherPolicyArn, OutputEventsReaderPolicyArn, OutputEventsWebhookAdminPolicyArn,
}

// The logical ids of the resources the template retains when the stack is
// deleted (DeletionPolicy: Retain): the stack key secret, named
// rayito/events/<stack name>/stack-key, and the events table.
const (
	ResourceStackKeySecret = "StackKeySecret"
	ResourceEventsTable    = "EventsTable"
)

// StackKeySecretName is the name of the stack key secret of the stack
// named stackName.
func StackKeySecretName(stackName string) string {
	return "rayito/events/" + stackName + "/stack-key"
}

// The Lambdas: each is the command events/cmd/<name> of this module.
const (
	Forwarder  = "forwarder"
	Deliverer  = "deliverer"
	Reconciler = "reconciler"
)

// Functions lists the Lambdas in a fixed order.
var Functions = []string{Forwarder, Deliverer, Reconciler}

// ZipEntry is the one file of each function's zip: the executable the
// provided.al2023 runtime starts.
const ZipEntry = "bootstrap"

// ZipKey is the S3 key of function's zip under codePrefix (a
// ParamCodePrefix value, ending in "/"), as the template reads it:
// <CodePrefix><function>.zip.
func ZipKey(codePrefix, function string) string {
	return codePrefix + function + ".zip"
}

// Capabilities are the CloudFormation capabilities the template needs:
// it creates IAM roles and managed policies, none of them with a custom
// name.
var Capabilities = []string{"CAPABILITY_IAM"}

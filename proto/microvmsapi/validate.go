package microvmsapi

import (
	"fmt"
	"unicode/utf8"
)

// InvalidInputError is a request the service refuses with a
// ValidationException. Message names the field and the limit in the
// service's words, never a value sent.
type InvalidInputError struct{ Message string }

func (e *InvalidInputError) Error() string { return e.Message }

func invalidf(format string, args ...any) error {
	return &InvalidInputError{Message: fmt.Sprintf(format, args...)}
}

// CheckRun is the one validation of a RunMicrovm input the SDK (before
// sending), the fake service and the local platform share: the image is
// named; the payload is valid UTF-8 of at most MaxRunHookPayload
// characters; the maximum duration is 0 (the service's maximum) or
// MinDurationSeconds to MaxDurationSeconds; an idle policy idles
// MinIdleSeconds to MaxDurationSeconds and stays suspended 0 to
// MaxDurationSeconds; logging names exactly one destination, a log group
// of 1 to 512 characters; at most MaxConnectors connectors each way; a
// client token of printable ASCII, at most MaxClientTokenLen. Which
// connectors exist, and the role, are each implementation's to check.
func CheckRun(in *RunMicrovmInput) error {
	switch {
	case in == nil || in.ImageIdentifier == "":
		return invalidf("imageIdentifier is required.")
	case len(in.ImageIdentifier) > maxIdentifierLen:
		return invalidf("imageIdentifier must be at most %d characters.", maxIdentifierLen)
	case len(in.ImageVersion) > maxVersionLen:
		return invalidf("imageVersion must be at most %d characters.", maxVersionLen)
	case len(in.ExecutionRoleArn) > maxIdentifierLen:
		return invalidf("executionRoleArn must be at most %d characters.", maxIdentifierLen)
	case utf8.RuneCountInString(in.RunHookPayload) > MaxRunHookPayload:
		return invalidf("runHookPayload must be at most %d characters.", MaxRunHookPayload)
	case !utf8.ValidString(in.RunHookPayload):
		return invalidf("runHookPayload must be valid UTF-8.")
	case in.MaximumDurationInSeconds < 0 || in.MaximumDurationInSeconds > MaxDurationSeconds:
		return invalidf("maximumDurationInSeconds must be between %d and %d.", MinDurationSeconds, MaxDurationSeconds)
	case len(in.IngressNetworkConnectors) > MaxConnectors:
		return invalidf("ingressNetworkConnectors must have at most %d items.", MaxConnectors)
	case len(in.EgressNetworkConnectors) > MaxConnectors:
		return invalidf("egressNetworkConnectors must have at most %d items.", MaxConnectors)
	}
	if p := in.IdlePolicy; p != nil {
		if p.MaxIdleDurationSeconds < MinIdleSeconds || p.MaxIdleDurationSeconds > MaxDurationSeconds {
			return invalidf("idlePolicy.maxIdleDurationSeconds must be between %d and %d.", MinIdleSeconds, MaxDurationSeconds)
		}
		if p.SuspendedDurationSeconds < 0 || p.SuspendedDurationSeconds > MaxDurationSeconds {
			return invalidf("idlePolicy.suspendedDurationSeconds must be between 0 and %d.", MaxDurationSeconds)
		}
	}
	if err := CheckLogging(in.Logging); err != nil {
		return err
	}
	return CheckClientToken(in.ClientToken)
}

// CheckLogging accepts no logging block (the default), or one naming
// exactly one destination: disabled, or a CloudWatch log group of 1 to
// 512 characters.
func CheckLogging(l *Logging) error {
	switch {
	case l == nil:
		return nil
	case (l.Disabled == nil) == (l.CloudWatch == nil):
		return invalidf("logging must set exactly one of disabled and cloudWatch.")
	case l.CloudWatch != nil && (l.CloudWatch.LogGroup == "" || len(l.CloudWatch.LogGroup) > maxLogGroupLen):
		return invalidf("logging.cloudWatch.logGroup must be 1 to %d characters.", maxLogGroupLen)
	}
	return nil
}

// CheckClientToken accepts an idempotency token of at most
// MaxClientTokenLen printable ASCII characters without spaces ("" for
// none).
func CheckClientToken(tok string) error {
	if len(tok) > MaxClientTokenLen {
		return invalidf("clientToken must be at most %d characters.", MaxClientTokenLen)
	}
	for i := 0; i < len(tok); i++ {
		if tok[i] < '!' || tok[i] > '~' {
			return invalidf("clientToken must be printable ASCII without spaces.")
		}
	}
	return nil
}

// Bounds on free-form strings: the service's own are not all public;
// these keep requests, state files and answers small.
const (
	maxIdentifierLen = 2048 // imageIdentifier, executionRoleArn, logGroup
	maxVersionLen    = 128  // imageVersion
	maxLogGroupLen   = 512  // CloudWatch Logs' own limit
)

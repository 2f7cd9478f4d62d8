package registry

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/rayito-dev/rayito/proto/microvmsapi"
)

// Bounds on free-form strings the API accepts. The service's own limits
// are not all public; these keep the state files and answers small.
const (
	maxIdentifierLen = 2048 // imageIdentifier, executionRoleArn, logGroup
	maxVersionLen    = 128  // imageVersion
	// MaxAllowedPorts bounds allowedPorts of CreateMicrovmAuthToken, so
	// that a token fits comfortably in a request header (the same bound as
	// package authtoken).
	MaxAllowedPorts = 16
	maxPort         = 65535
	// connectorHTTPIngress is the implicit default ingress connector; it
	// may also be named explicitly.
	connectorHTTPIngress = "HTTP_INGRESS"
)

// normalizeRun checks a RunMicrovm input and fills in defaults. Messages
// name fields and limits, never the values sent.
func normalizeRun(in *microvmsapi.RunMicrovmInput) error {
	switch {
	case in.ImageIdentifier == "":
		return validationErr("imageIdentifier is required.")
	case len(in.ImageIdentifier) > maxIdentifierLen:
		return validationErr(fmt.Sprintf("imageIdentifier must be at most %d characters.", maxIdentifierLen))
	case len(in.ImageVersion) > maxVersionLen:
		return validationErr(fmt.Sprintf("imageVersion must be at most %d characters.", maxVersionLen))
	case len(in.ExecutionRoleArn) > maxIdentifierLen:
		return validationErr(fmt.Sprintf("executionRoleArn must be at most %d characters.", maxIdentifierLen))
	case in.MaximumDurationInSeconds < 0 || in.MaximumDurationInSeconds > microvmsapi.MaxDurationSeconds:
		return validationErr(fmt.Sprintf("maximumDurationInSeconds must be between %d and %d.",
			microvmsapi.MinDurationSeconds, microvmsapi.MaxDurationSeconds))
	case utf8.RuneCountInString(in.RunHookPayload) > microvmsapi.MaxRunHookPayload:
		return validationErr(fmt.Sprintf("runHookPayload must be at most %d characters.", microvmsapi.MaxRunHookPayload))
	case !utf8.ValidString(in.RunHookPayload):
		return validationErr("runHookPayload must be valid UTF-8.")
	}
	if in.MaximumDurationInSeconds == 0 {
		in.MaximumDurationInSeconds = microvmsapi.MaxDurationSeconds
	}
	if err := checkClientToken(in.ClientToken); err != nil {
		return err
	}
	if p := in.IdlePolicy; p != nil {
		if p.MaxIdleDurationSeconds < microvmsapi.MinIdleSeconds || p.MaxIdleDurationSeconds > microvmsapi.MaxDurationSeconds {
			return validationErr(fmt.Sprintf("idlePolicy.maxIdleDurationSeconds must be between %d and %d.",
				microvmsapi.MinIdleSeconds, microvmsapi.MaxDurationSeconds))
		}
		if p.SuspendedDurationSeconds < 0 || p.SuspendedDurationSeconds > microvmsapi.MaxDurationSeconds {
			return validationErr(fmt.Sprintf("idlePolicy.suspendedDurationSeconds must be between 0 and %d.",
				microvmsapi.MaxDurationSeconds))
		}
	}
	if l := in.Logging; l != nil {
		switch {
		case (l.Disabled == nil) == (l.CloudWatch == nil):
			return validationErr("logging must set exactly one of disabled and cloudWatch.")
		case l.CloudWatch != nil && (l.CloudWatch.LogGroup == "" || len(l.CloudWatch.LogGroup) > maxIdentifierLen):
			return validationErr(fmt.Sprintf("logging.cloudWatch.logGroup must be 1 to %d characters.", maxIdentifierLen))
		}
	}
	if err := checkConnectors("ingressNetworkConnectors", in.IngressNetworkConnectors, isIngressConnector); err != nil {
		return err
	}
	return checkConnectors("egressNetworkConnectors", in.EgressNetworkConnectors, isEgressConnector)
}

func checkClientToken(tok string) error {
	if len(tok) > microvmsapi.MaxClientTokenLen {
		return validationErr(fmt.Sprintf("clientToken must be at most %d characters.", microvmsapi.MaxClientTokenLen))
	}
	for i := 0; i < len(tok); i++ {
		if tok[i] < '!' || tok[i] > '~' {
			return validationErr("clientToken must be printable ASCII without spaces.")
		}
	}
	return nil
}

func isIngressConnector(name string) bool {
	switch name {
	case microvmsapi.ConnectorAllIngress, microvmsapi.ConnectorNoIngress, microvmsapi.ConnectorShellIngress, connectorHTTPIngress:
		return true
	}
	return false
}

func isEgressConnector(name string) bool { return name == microvmsapi.ConnectorInternet }

func checkConnectors(field string, arns []string, allowed func(string) bool) error {
	if len(arns) > microvmsapi.MaxConnectors {
		return validationErr(fmt.Sprintf("%s must list at most %d connectors.", field, microvmsapi.MaxConnectors))
	}
	for i, arn := range arns {
		name, ok := connectorName(arn)
		if !ok || !allowed(name) {
			return validationErr(fmt.Sprintf("%s[%d] is not a valid network connector ARN for this list.", field, i))
		}
	}
	return nil
}

// connectorName returns NAME of a well-formed connector ARN
// "arn:aws:lambda:<region>:aws:network-connector:aws-network-connector:<NAME>".
func connectorName(arn string) (string, bool) {
	rest, ok := strings.CutPrefix(arn, microvmsapi.ConnectorARNPrefix)
	if !ok {
		return "", false
	}
	region, name, ok := strings.Cut(rest, microvmsapi.ConnectorARNInfix)
	if !ok || region == "" || len(region) > 32 || name == "" {
		return "", false
	}
	for _, c := range region {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '-' {
			return "", false
		}
	}
	return name, true
}

// hasConnector reports whether arns name the connector name.
func hasConnector(arns []string, name string) bool {
	for _, arn := range arns {
		if n, ok := connectorName(arn); ok && n == name {
			return true
		}
	}
	return false
}

// checkAuthToken checks a CreateMicrovmAuthToken input.
func checkAuthToken(in *microvmsapi.CreateMicrovmAuthTokenInput) error {
	if in.ExpirationInMinutes < microvmsapi.MinAuthTokenMinutes || in.ExpirationInMinutes > microvmsapi.MaxAuthTokenMinutes {
		return validationErr(fmt.Sprintf("expirationInMinutes must be between %d and %d.",
			microvmsapi.MinAuthTokenMinutes, microvmsapi.MaxAuthTokenMinutes))
	}
	if len(in.AllowedPorts) == 0 || len(in.AllowedPorts) > MaxAllowedPorts {
		return validationErr(fmt.Sprintf("allowedPorts must list 1 to %d entries.", MaxAllowedPorts))
	}
	for i, p := range in.AllowedPorts {
		set := 0
		if p.Port != nil {
			set++
			if *p.Port < 1 || *p.Port > maxPort {
				return validationErr(fmt.Sprintf("allowedPorts[%d].port must be between 1 and %d.", i, maxPort))
			}
		}
		if p.Range != nil {
			set++
			if p.Range.StartPort < 1 || p.Range.EndPort > maxPort || p.Range.StartPort > p.Range.EndPort {
				return validationErr(fmt.Sprintf("allowedPorts[%d].range must satisfy 1 <= startPort <= endPort <= %d.", i, maxPort))
			}
		}
		if p.AllPorts != nil {
			set++
		}
		if set != 1 {
			return validationErr(fmt.Sprintf("allowedPorts[%d] must set exactly one of port, range and allPorts.", i))
		}
	}
	return nil
}

package registry

import (
	"fmt"
	"strings"

	"github.com/rayito-dev/rayito/proto/microvmsapi"
)

// Bounds of the API beyond microvmsapi's.
const (
	// MaxAllowedPorts bounds allowedPorts of CreateMicrovmAuthToken, so
	// that a token fits comfortably in a request header (the same bound as
	// package authtoken).
	MaxAllowedPorts = 16
	maxPort         = 65535
	// connectorHTTPIngress is the implicit default ingress connector; it
	// may also be named explicitly.
	connectorHTTPIngress = "HTTP_INGRESS"
)

// normalizeRun checks a RunMicrovm input (microvmsapi.CheckRun, the rules
// the SDK and the fake service share, then the connectors this platform
// knows) and fills in the default duration. Messages name fields and
// limits, never the values sent.
func normalizeRun(in *microvmsapi.RunMicrovmInput) error {
	if err := microvmsapi.CheckRun(in); err != nil {
		return validationErr(err.Error())
	}
	if in.MaximumDurationInSeconds == 0 {
		in.MaximumDurationInSeconds = microvmsapi.MaxDurationSeconds
	}
	if err := checkConnectors("ingressNetworkConnectors", in.IngressNetworkConnectors, isIngressConnector); err != nil {
		return err
	}
	return checkConnectors("egressNetworkConnectors", in.EgressNetworkConnectors, isEgressConnector)
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

package microvms

import (
	"fmt"
	"strings"

	"github.com/rayito-dev/rayito/proto/microvmsapi"
)

// maxIDLen bounds microVM identifiers.
const maxIDLen = 256

// validateID accepts 1 to 256 printable ASCII characters, no spaces. The id
// is not echoed in the refusal.
func validateID(op Operation, id string) error {
	if id == "" {
		return invalid(op, "empty microVM id")
	}
	if len(id) > maxIDLen {
		return invalid(op, fmt.Sprintf("microVM id is %d bytes, more than %d", len(id), maxIDLen))
	}
	for i := 0; i < len(id); i++ {
		if id[i] < 0x21 || id[i] > 0x7e {
			return invalid(op, "microVM id has a character that is not printable ASCII")
		}
	}
	return nil
}

// validateRun refuses, before any call, what the service would refuse
// (microvmsapi.CheckRun, the one rule the fake and the local platform
// share).
func validateRun(in *microvmsapi.RunMicrovmInput) error {
	if err := microvmsapi.CheckRun(in); err != nil {
		return invalid(OpRunMicrovm, strings.TrimSuffix(err.Error(), "."))
	}
	return nil
}

func validateAuthToken(in *microvmsapi.CreateMicrovmAuthTokenInput) error {
	const op = OpCreateMicrovmAuthToken
	if in == nil {
		return invalid(op, "nil input")
	}
	if m := in.ExpirationInMinutes; m < microvmsapi.MinAuthTokenMinutes || m > microvmsapi.MaxAuthTokenMinutes {
		return invalid(op, fmt.Sprintf("expirationInMinutes must be between %d and %d", microvmsapi.MinAuthTokenMinutes, microvmsapi.MaxAuthTokenMinutes))
	}
	const hooks = microvmsapi.HooksPort
	for i, p := range in.AllowedPorts {
		set := 0
		if p.Port != nil {
			set++
		}
		if p.Range != nil {
			set++
		}
		if p.AllPorts != nil {
			set++
		}
		switch {
		case set != 1:
			return invalid(op, fmt.Sprintf("allowedPorts[%d] needs exactly one of port, range and allPorts", i))
		case p.AllPorts != nil:
			return invalid(op, fmt.Sprintf("allowedPorts[%d]: allPorts would expose the lifecycle hook port %d", i, hooks))
		case p.Port != nil:
			if !validPort(*p.Port) {
				return invalid(op, fmt.Sprintf("allowedPorts[%d]: port %d is not between 1 and 65535", i, *p.Port))
			}
			if *p.Port == hooks {
				return invalid(op, fmt.Sprintf("allowedPorts[%d]: port %d is the lifecycle hook port", i, hooks))
			}
		default:
			r := p.Range
			if !validPort(r.StartPort) || !validPort(r.EndPort) || r.StartPort > r.EndPort {
				return invalid(op, fmt.Sprintf("allowedPorts[%d]: range %d-%d is not a range of ports", i, r.StartPort, r.EndPort))
			}
			if r.StartPort <= hooks && hooks <= r.EndPort {
				return invalid(op, fmt.Sprintf("allowedPorts[%d]: range %d-%d covers the lifecycle hook port %d", i, r.StartPort, r.EndPort, hooks))
			}
		}
	}
	return nil
}

func validPort(p int) bool { return 1 <= p && p <= 65535 }

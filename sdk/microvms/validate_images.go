package microvms

import (
	"fmt"
	"slices"
	"strings"

	"github.com/rayito-dev/rayito/proto/microvmsapi"
)

// validateIdent is validateID for any identifier, named what in refusals.
// The value is not echoed.
func validateIdent(op Operation, what, s string) error {
	if s == "" {
		return invalid(op, "empty "+what)
	}
	if len(s) > maxIDLen {
		return invalid(op, fmt.Sprintf("%s is %d bytes, more than %d", what, len(s), maxIDLen))
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e {
			return invalid(op, what+" has a character that is not printable ASCII")
		}
	}
	return nil
}

func validateMaxResults(op Operation, n int) error {
	if n < 0 {
		return invalid(op, "maxResults must not be negative")
	}
	return nil
}

// isARN reports whether s looks like arn:partition:service:region:account:resource.
func isARN(s string) bool {
	return strings.HasPrefix(s, "arn:") && strings.Count(s, ":") >= 5
}

func validImageName(s string) bool {
	if s == "" || len(s) > microvmsapi.MaxImageNameLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

func validateCreateImage(in *microvmsapi.CreateMicrovmImageInput) error {
	const op = OpCreateMicrovmImage
	if in == nil {
		return invalid(op, "nil input")
	}
	if !validImageName(in.Name) {
		return invalid(op, fmt.Sprintf("name must be 1 to %d characters of a-z, A-Z, 0-9, '-' and '_'", microvmsapi.MaxImageNameLen))
	}
	if err := validateBuildConfig(op, &in.ImageBuildConfig); err != nil {
		return err
	}
	return validateClientToken(op, in.ClientToken)
}

func validateUpdateImage(in *microvmsapi.UpdateMicrovmImageInput) error {
	const op = OpUpdateMicrovmImage
	if in == nil {
		return invalid(op, "nil input")
	}
	if err := validateBuildConfig(op, &in.ImageBuildConfig); err != nil {
		return err
	}
	return validateClientToken(op, in.ClientToken)
}

func validateClientToken(op Operation, tok string) error {
	if n := len(tok); n > microvmsapi.MaxClientTokenLen {
		return invalid(op, fmt.Sprintf("clientToken is %d bytes, more than %d", n, microvmsapi.MaxClientTokenLen))
	}
	return nil
}

// validateBuildConfig checks what contracts.md §2.2 and §2.5 state;
// baseImageArn, buildRoleArn and codeArtifact are required by both
// CreateMicrovmImage and UpdateMicrovmImage.
func validateBuildConfig(op Operation, c *microvmsapi.ImageBuildConfig) error {
	switch {
	case c.BaseImageArn == "":
		return invalid(op, "baseImageArn is required")
	case !isARN(c.BaseImageArn):
		return invalid(op, "baseImageArn is not an ARN")
	case c.BuildRoleArn == "":
		return invalid(op, "buildRoleArn is required")
	case !isARN(c.BuildRoleArn) || !strings.Contains(c.BuildRoleArn, ":role/"):
		return invalid(op, "buildRoleArn is not an IAM role ARN")
	case c.CodeArtifact == nil || c.CodeArtifact.URI == "":
		return invalid(op, "codeArtifact.uri is required")
	case !strings.HasPrefix(c.CodeArtifact.URI, microvmsapi.CodeArtifactS3Scheme):
		return invalid(op, "codeArtifact.uri must be an s3:// URI of a zip (ECR is rejected)")
	}
	if l := c.Logging; l != nil && (l.Disabled == nil) == (l.CloudWatch == nil) {
		return invalid(op, "logging needs exactly one of disabled and cloudWatch")
	}
	if n := len(c.EgressNetworkConnectors); n > microvmsapi.MaxConnectors {
		return invalid(op, fmt.Sprintf("%d egress network connectors, more than %d", n, microvmsapi.MaxConnectors))
	}
	for i, cpu := range c.CPUConfigurations {
		if cpu.Architecture != microvmsapi.ArchitectureARM64 {
			return invalid(op, fmt.Sprintf("cpuConfigurations[%d].architecture must be %s", i, microvmsapi.ArchitectureARM64))
		}
	}
	if n := len(c.Resources); n > microvmsapi.MaxResourcesEntries {
		return invalid(op, fmt.Sprintf("%d resources entries, more than %d", n, microvmsapi.MaxResourcesEntries))
	}
	for _, r := range c.Resources {
		if !slices.Contains(microvmsapi.MemorySizesMiB, r.MinimumMemoryInMiB) {
			return invalid(op, fmt.Sprintf("resources[0].minimumMemoryInMiB must be one of %v", microvmsapi.MemorySizesMiB))
		}
	}
	for i, capab := range c.AdditionalOsCapabilities {
		if capab != microvmsapi.CapabilityAll {
			return invalid(op, fmt.Sprintf("additionalOsCapabilities[%d] must be %s", i, microvmsapi.CapabilityAll))
		}
	}
	if n := len(c.EnvironmentVariables); n > microvmsapi.MaxEnvironmentVariables {
		return invalid(op, fmt.Sprintf("%d environment variables, more than %d", n, microvmsapi.MaxEnvironmentVariables))
	}
	if h := c.Hooks; h != nil {
		if h.Port != 0 && !validPort(h.Port) {
			return invalid(op, fmt.Sprintf("hooks.port %d is not between 1 and 65535", h.Port))
		}
		if m := h.MicrovmHooks; m != nil {
			for _, t := range []struct {
				name  string
				state microvmsapi.HookState
				secs  int
			}{
				{"run", m.Run, m.RunTimeoutInSeconds}, {"resume", m.Resume, m.ResumeTimeoutInSeconds},
				{"suspend", m.Suspend, m.SuspendTimeoutInSeconds}, {"terminate", m.Terminate, m.TerminateTimeoutInSeconds},
			} {
				if err := validateHook(op, "microvmHooks."+t.name, t.state, t.secs, microvmsapi.MinMicrovmHookTimeout, microvmsapi.MaxMicrovmHookTimeout); err != nil {
					return err
				}
			}
		}
		if m := h.MicrovmImageHooks; m != nil {
			for _, t := range []struct {
				name  string
				state microvmsapi.HookState
				secs  int
			}{
				{"ready", m.Ready, m.ReadyTimeoutInSeconds}, {"validate", m.Validate, m.ValidateTimeoutInSeconds},
			} {
				if err := validateHook(op, "microvmImageHooks."+t.name, t.state, t.secs, microvmsapi.MinImageHookTimeout, microvmsapi.MaxImageHookTimeout); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func validateHook(op Operation, name string, state microvmsapi.HookState, secs, lo, hi int) error {
	if state != "" && state != microvmsapi.HookEnabled && state != microvmsapi.HookDisabled {
		return invalid(op, fmt.Sprintf("hooks.%s must be %s or %s", name, microvmsapi.HookEnabled, microvmsapi.HookDisabled))
	}
	if secs != 0 && (secs < lo || secs > hi) {
		return invalid(op, fmt.Sprintf("hooks.%sTimeoutInSeconds must be between %d and %d", name, lo, hi))
	}
	return nil
}

// validateTaggable accepts the ARN of a taggable resource; microVMs cannot
// be tagged.
func validateTaggable(op Operation, arn string) error {
	if err := validateIdent(op, "resource ARN", arn); err != nil {
		return err
	}
	if !isARN(arn) {
		return invalid(op, "resource must be an ARN, not a name")
	}
	if strings.Contains(arn, ":microvm/") || strings.Contains(arn, ":microvm:") {
		return invalid(op, "microVMs cannot be tagged")
	}
	return nil
}

package cdk

import (
	"errors"
	"fmt"

	"github.com/rayito-dev/rayito/agenthost/agentcore"
)

// ErrInvalidProps matches every *PropsError: a construct's props that
// cannot be deployed. Nothing is added to the construct tree then.
var ErrInvalidProps = errors.New("rayito cdk: invalid props")

// The closed codes of a *PropsError besides agentcore's
// (agentcore.CodeNetworkPolicyUnsupported, CodeProviderUnsupported,
// CodeResourceInvalid), which keep their code.
const (
	// CodePropsInvalid is a missing or malformed prop.
	CodePropsInvalid = "props_invalid"
	// CodeProjectInvalid is an agent project that cannot be read or is
	// not valid (project.ErrInvalid, secretenv's codes).
	CodeProjectInvalid = "project_invalid"
	// CodeStackEnvRequired is a stack without an explicit account and
	// region: the plan's ARNs need both.
	CodeStackEnvRequired = "stack_env_required"
	// CodeBaseImageUnpinned is a base image not pinned by digest.
	CodeBaseImageUnpinned = "base_image_unpinned"
	// CodeHostBinary is an agent host binary that could not be read or
	// built.
	CodeHostBinary = "host_binary_unavailable"
	// CodeArtifactInvalid is a MicroVMs image zip that is not one.
	CodeArtifactInvalid = "artifact_invalid"
)

// PropsError is props refused with a closed code. Detail never holds a
// secret's name or a value.
type PropsError struct {
	Code   string
	Detail string
	// Err is the cause, when there is one (an *agentcore.Error, a
	// project.ErrInvalid, a *secretenv.Error).
	Err error
}

func (e *PropsError) Error() string { return "rayito cdk: " + e.Code + ": " + e.Detail }

// Is matches ErrInvalidProps.
func (e *PropsError) Is(target error) bool { return target == ErrInvalidProps }

// Unwrap is the cause.
func (e *PropsError) Unwrap() error { return e.Err }

func invalid(code, format string, a ...any) error {
	return &PropsError{Code: code, Detail: fmt.Sprintf(format, a...)}
}

// planError keeps agentcore's closed code.
func planError(err error) error {
	var ae *agentcore.Error
	if errors.As(err, &ae) {
		return &PropsError{Code: ae.Code, Detail: ae.Detail, Err: err}
	}
	return &PropsError{Code: CodeProjectInvalid, Detail: "the project's secret variables are not valid", Err: err}
}

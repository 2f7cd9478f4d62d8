package rayito

// This file is the SDK's extension point: the few exported hooks through
// which the packages built on the root package (sdk/secrets, sdk/git)
// take part in a sandbox's life without the root importing them. Programs
// use those packages' own API; they need none of this.

// NewError is an error of reason (matching its sentinel, e.g.
// ErrInvalidArgument, with errors.Is) with the message msg and causes
// reachable through errors.Is and errors.As. It is how the SDK's own
// packages build their errors; msg must hold no secret.
func NewError(reason Reason, msg string, causes ...error) error {
	return newError(reason, msg, causes...)
}

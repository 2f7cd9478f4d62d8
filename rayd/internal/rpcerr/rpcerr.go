// Package rpcerr maps Go errors to Connect errors in one place, so every
// service answers the same code for the same cause. Messages are fixed
// strings chosen by the caller: they never quote paths, commands, envs or
// other user data.
package rpcerr

import (
	"context"
	"errors"
	"io/fs"
	"syscall"

	"connectrpc.com/connect"
)

// Code returns the Connect code for err: context errors become Canceled or
// DeadlineExceeded, fs.ErrNotExist NotFound, fs.ErrPermission
// PermissionDenied, fs.ErrExist AlreadyExists, ELOOP FailedPrecondition,
// ENOSPC ResourceExhausted, and an existing *connect.Error keeps its code.
// Anything else is Internal.
func Code(err error) connect.Code {
	var ce *connect.Error
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ce):
		return ce.Code()
	case errors.Is(err, context.Canceled):
		return connect.CodeCanceled
	case errors.Is(err, context.DeadlineExceeded):
		return connect.CodeDeadlineExceeded
	case errors.Is(err, fs.ErrNotExist):
		return connect.CodeNotFound
	case errors.Is(err, fs.ErrPermission):
		return connect.CodePermissionDenied
	case errors.Is(err, fs.ErrExist):
		return connect.CodeAlreadyExists
	case errors.Is(err, syscall.ELOOP):
		return connect.CodeFailedPrecondition
	case errors.Is(err, syscall.ENOSPC):
		return connect.CodeResourceExhausted
	default:
		return connect.CodeInternal
	}
}

// New returns a Connect error with code and a fixed message. The cause is
// kept for errors.Is/As on the server side but is not sent to the client.
func New(code connect.Code, message string) *connect.Error {
	return connect.NewError(code, errors.New(message))
}

// Wrap maps err to a Connect error whose wire message is message. It
// returns nil for a nil err and err itself when it already is a
// *connect.Error.
func Wrap(err error, message string) error {
	if err == nil {
		return nil
	}
	var ce *connect.Error
	if errors.As(err, &ce) {
		return err
	}
	return New(Code(err), message)
}

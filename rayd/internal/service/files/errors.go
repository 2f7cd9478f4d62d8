package files

import (
	"context"
	"errors"

	"connectrpc.com/connect"

	"github.com/rayito-dev/rayito/rayd/internal/rpcerr"
	"github.com/rayito-dev/rayito/rayd/internal/safefs"
)

// fsErr maps a safefs error to a Connect error with a fixed message. The
// message never holds a path, content or metadata. A *connect.Error (for
// example from identity resolution) is returned as is.
func fsErr(err error) error {
	if err == nil {
		return nil
	}
	var ce *connect.Error
	if errors.As(err, &ce) {
		return ce
	}
	var pe *safefs.PathError
	if !errors.As(err, &pe) {
		switch {
		case errors.Is(err, context.Canceled):
			return rpcerr.New(connect.CodeCanceled, "canceled")
		case errors.Is(err, context.DeadlineExceeded):
			return rpcerr.New(connect.CodeDeadlineExceeded, "deadline exceeded")
		}
		return rpcerr.New(connect.CodeInternal, "file operation failed")
	}
	switch pe.Reason {
	case "denied", "fstype":
		return rpcerr.New(connect.CodePermissionDenied, "access denied by policy")
	case "permission":
		return rpcerr.New(connect.CodePermissionDenied, "permission denied")
	case "not_found":
		return rpcerr.New(connect.CodeNotFound, "no such file or directory")
	case "exists":
		return rpcerr.New(connect.CodeAlreadyExists, "already exists")
	case "dotdot":
		return rpcerr.New(connect.CodeInvalidArgument, "path contains '..'")
	case "nul", "empty", "too_long", "no_home":
		return rpcerr.New(connect.CodeInvalidArgument, "invalid path")
	case "metadata", "metadata_too_large":
		return rpcerr.New(connect.CodeInvalidArgument, "invalid metadata")
	case "not_dir":
		return rpcerr.New(connect.CodeInvalidArgument, "not a directory")
	case "is_dir":
		return rpcerr.New(connect.CodeInvalidArgument, "is a directory")
	case "not_regular":
		return rpcerr.New(connect.CodeInvalidArgument, "not a regular file")
	case "symlink":
		return rpcerr.New(connect.CodeFailedPrecondition, "symlink in path")
	case "not_empty":
		return rpcerr.New(connect.CodeFailedPrecondition, "directory not empty")
	case "metadata_unsupported":
		return rpcerr.New(connect.CodeFailedPrecondition, "metadata unsupported by the file system")
	case "too_many":
		return rpcerr.New(connect.CodeResourceExhausted, "too many entries")
	case "too_deep":
		return rpcerr.New(connect.CodeResourceExhausted, "directory tree too deep")
	case "disk_reserve":
		return rpcerr.New(connect.CodeResourceExhausted, "disk_reserve")
	case "disk_full":
		return rpcerr.New(connect.CodeResourceExhausted, "disk_full")
	case "canceled":
		return rpcerr.New(connect.CodeCanceled, "canceled")
	}
	return rpcerr.New(connect.CodeInternal, "file operation failed")
}

package safefs

import (
	"errors"
	"io/fs"
	"syscall"
)

// sentinel is an error value that also matches one more general error (such
// as fs.ErrPermission or an errno) under errors.Is.
type sentinel struct {
	msg  string
	kind error
}

func (s *sentinel) Error() string { return s.msg }

// Is reports whether target is the general error this sentinel belongs to.
func (s *sentinel) Is(target error) bool { return s.kind != nil && errors.Is(s.kind, target) }

// Sentinel errors. Each one also matches the general error named in its
// comment under errors.Is.
var (
	// ErrDenied: the path is refused by policy (deny list, "..", or a kernel
	// pseudo file system). Matches fs.ErrPermission.
	ErrDenied error = &sentinel{"access denied by policy", fs.ErrPermission}
	// ErrDotDot: the path has a ".." component. Matches ErrDenied (a
	// refusal by policy), and is answered as an invalid path.
	ErrDotDot error = &sentinel{"path contains '..'", ErrDenied}
	// ErrSymlink: a path component is a symbolic link. Matches syscall.ELOOP.
	ErrSymlink error = &sentinel{"symbolic link in path", syscall.ELOOP}
	// ErrSymlinkLoop: resolving a path for reading met more than
	// [MaxSymlinks] symbolic links (a loop, or too long a chain). Matches
	// ErrSymlink (and so syscall.ELOOP).
	ErrSymlinkLoop error = &sentinel{"too many levels of symbolic links", ErrSymlink}
	// ErrInvalidPath: the path is empty, too long, contains NUL, or is
	// relative while the user has no home. Matches fs.ErrInvalid.
	ErrInvalidPath error = &sentinel{"invalid path", fs.ErrInvalid}
	// ErrNotDir: a non-directory is in the way. Matches syscall.ENOTDIR.
	ErrNotDir error = &sentinel{"not a directory", syscall.ENOTDIR}
	// ErrIsDir: the operation needs a non-directory. Matches syscall.EISDIR.
	ErrIsDir error = &sentinel{"is a directory", syscall.EISDIR}
	// ErrNotRegular: the operation needs a regular file.
	ErrNotRegular error = &sentinel{"not a regular file", nil}
	// ErrExist: the target already exists. Matches fs.ErrExist.
	ErrExist error = &sentinel{"already exists", fs.ErrExist}
	// ErrNotEmpty: a directory to remove is not empty. Matches
	// syscall.ENOTEMPTY.
	ErrNotEmpty error = &sentinel{"directory not empty", syscall.ENOTEMPTY}
	// ErrTooMany: a listing exceeds Options.MaxListEntries (maps to
	// RESOURCE_EXHAUSTED).
	ErrTooMany error = &sentinel{"too many entries", nil}
	// ErrTooDeep: a recursive removal exceeds [MaxRemoveDepth] levels.
	ErrTooDeep error = &sentinel{"directory tree too deep", nil}
	// ErrDiskReserve: the write would leave less than Options.DiskReserve
	// free (maps to RESOURCE_EXHAUSTED "disk_reserve").
	ErrDiskReserve error = &sentinel{"disk reserve reached", nil}
	// ErrDiskFull: the file system is full (maps to RESOURCE_EXHAUSTED
	// "disk_full"). Matches syscall.ENOSPC.
	ErrDiskFull error = &sentinel{"disk full", syscall.ENOSPC}
	// ErrInvalidMetadata: the metadata map breaks the key, value or size
	// rules. Matches fs.ErrInvalid.
	ErrInvalidMetadata error = &sentinel{"invalid metadata", fs.ErrInvalid}
	// ErrMetadataUnsupported: the file system does not support user
	// extended attributes ("metadata_unsupported").
	ErrMetadataUnsupported error = &sentinel{"metadata unsupported by file system", nil}
	// ErrMetadataTooLarge: the file system refused the metadata's size
	// ("metadata_too_large").
	ErrMetadataTooLarge error = &sentinel{"metadata too large for file system", nil}
	// ErrCrossDevice: a move's source and destination are on different
	// file systems (rename(2)'s EXDEV: in a sandbox, /home/user, /tmp and
	// / are separate tmpfs mounts). Matches syscall.EXDEV.
	ErrCrossDevice error = &sentinel{"source and destination are on different file systems", syscall.EXDEV}
	// ErrIdentity: switching to or from the user's file system identity
	// failed; nothing was done.
	ErrIdentity error = &sentinel{"cannot switch file system identity", nil}
)

// PathError is the error returned by every [FS] method. Its message names
// the operation and the reason but never the path, so it is safe to log and
// to return to a client.
type PathError struct {
	// Op is the operation: "resolve", "stat", "read", "write", "list",
	// "mkdir", "move" or "remove".
	Op string
	// Reason is a stable, machine-readable token, for example "denied",
	// "dotdot", "nul", "empty", "too_long", "no_home", "fstype", "symlink",
	// "symlink_loop", "not_found", "permission", "not_dir", "is_dir",
	// "not_regular", "exists", "not_empty", "too_many", "too_deep",
	// "disk_reserve", "disk_full", "metadata", "metadata_unsupported",
	// "metadata_too_large", "identity", "source", "canceled" or "io".
	Reason string
	// Err is the underlying sentinel or errno.
	Err error
}

func (e *PathError) Error() string {
	return "safefs: " + e.Op + ": " + e.Reason + ": " + e.Err.Error()
}

// Unwrap returns the underlying error.
func (e *PathError) Unwrap() error { return e.Err }

func perr(op, reason string, err error) error { return &PathError{Op: op, Reason: reason, Err: err} }

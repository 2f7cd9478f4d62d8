// Package rpcerr is the one place where rayd turns errors into answers: a
// domain sentinel (matched with errors.Is, never by its text) becomes a
// Connect code, a closed ErrorInfo reason (sent as a Connect error detail)
// and a fixed message. The plain HTTP endpoints answer the same code
// through Connect's code↔HTTP table (HTTPStatus) with the same reason in a
// JSON body (WriteHTTP).
//
// Messages are fixed strings: they never quote paths, commands, envs or
// other user data. A domain error may offer a more precise fixed message
// through a PublicMessage() string method; nothing else of its text
// reaches the client.
package rpcerr

import (
	"context"
	"errors"
	"io/fs"
	"syscall"

	"connectrpc.com/connect"

	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
	"github.com/rayito-dev/rayito/rayd/internal/deadline"
	"github.com/rayito-dev/rayito/rayd/internal/jupyter"
	"github.com/rayito-dev/rayito/rayd/internal/launch"
	"github.com/rayito-dev/rayito/rayd/internal/persist"
	"github.com/rayito-dev/rayito/rayd/internal/persist/archive"
	"github.com/rayito-dev/rayito/rayd/internal/proc"
	"github.com/rayito-dev/rayito/rayd/internal/quiesce"
	"github.com/rayito-dev/rayito/rayd/internal/safefs"
	"github.com/rayito-dev/rayito/rayd/internal/streamlimit"
)

// Reason is the contract's closed reason enum.
type Reason = raydv1.ErrorReason

// codes gives each reason its one Connect code.
var codes = map[Reason]connect.Code{
	raydv1.ErrorReason_ERROR_REASON_UNSPECIFIED:           connect.CodeUnknown,
	raydv1.ErrorReason_ERROR_REASON_NOT_FOUND:             connect.CodeNotFound,
	raydv1.ErrorReason_ERROR_REASON_PERMISSION_DENIED:     connect.CodePermissionDenied,
	raydv1.ErrorReason_ERROR_REASON_POLICY_DENIED:         connect.CodePermissionDenied,
	raydv1.ErrorReason_ERROR_REASON_DISK_FULL:             connect.CodeResourceExhausted,
	raydv1.ErrorReason_ERROR_REASON_DISK_RESERVE:          connect.CodeResourceExhausted,
	raydv1.ErrorReason_ERROR_REASON_TIMEOUT:               connect.CodeDeadlineExceeded,
	raydv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT:      connect.CodeInvalidArgument,
	raydv1.ErrorReason_ERROR_REASON_INVALID_PATH:          connect.CodeInvalidArgument,
	raydv1.ErrorReason_ERROR_REASON_ALREADY_EXISTS:        connect.CodeAlreadyExists,
	raydv1.ErrorReason_ERROR_REASON_NOT_A_DIRECTORY:       connect.CodeInvalidArgument,
	raydv1.ErrorReason_ERROR_REASON_IS_A_DIRECTORY:        connect.CodeInvalidArgument,
	raydv1.ErrorReason_ERROR_REASON_NOT_A_REGULAR_FILE:    connect.CodeInvalidArgument,
	raydv1.ErrorReason_ERROR_REASON_SYMLINK:               connect.CodeFailedPrecondition,
	raydv1.ErrorReason_ERROR_REASON_DIRECTORY_NOT_EMPTY:   connect.CodeFailedPrecondition,
	raydv1.ErrorReason_ERROR_REASON_METADATA_UNSUPPORTED:  connect.CodeFailedPrecondition,
	raydv1.ErrorReason_ERROR_REASON_RESOURCE_EXHAUSTED:    connect.CodeResourceExhausted,
	raydv1.ErrorReason_ERROR_REASON_OUTPUT_TRUNCATED:      connect.CodeOutOfRange,
	raydv1.ErrorReason_ERROR_REASON_UNAUTHENTICATED:       connect.CodeUnauthenticated,
	raydv1.ErrorReason_ERROR_REASON_NOT_RUNNING:           connect.CodeFailedPrecondition,
	raydv1.ErrorReason_ERROR_REASON_WRONG_KIND:            connect.CodeFailedPrecondition,
	raydv1.ErrorReason_ERROR_REASON_EXECUTABLE_NOT_FOUND:  connect.CodeNotFound,
	raydv1.ErrorReason_ERROR_REASON_NOT_EXECUTABLE:        connect.CodePermissionDenied,
	raydv1.ErrorReason_ERROR_REASON_CWD_NOT_FOUND:         connect.CodeNotFound,
	raydv1.ErrorReason_ERROR_REASON_UNIMPLEMENTED:         connect.CodeUnimplemented,
	raydv1.ErrorReason_ERROR_REASON_SHUTTING_DOWN:         connect.CodeUnavailable,
	raydv1.ErrorReason_ERROR_REASON_CANCELED:              connect.CodeCanceled,
	raydv1.ErrorReason_ERROR_REASON_INTERNAL:              connect.CodeInternal,
	raydv1.ErrorReason_ERROR_REASON_SUSPENDING:            connect.CodeUnavailable,
	raydv1.ErrorReason_ERROR_REASON_SANDBOX_TIMEOUT:       connect.CodeFailedPrecondition,
	raydv1.ErrorReason_ERROR_REASON_LIFECYCLE_UNMANAGED:   connect.CodeFailedPrecondition,
	raydv1.ErrorReason_ERROR_REASON_EGRESS_UNAVAILABLE:    connect.CodeFailedPrecondition,
	raydv1.ErrorReason_ERROR_REASON_EGRESS_UPDATE_FAILED:  connect.CodeInternal,
	raydv1.ErrorReason_ERROR_REASON_OPERATION_IN_PROGRESS: connect.CodeFailedPrecondition,
	raydv1.ErrorReason_ERROR_REASON_CHECKSUM_MISMATCH:     connect.CodeDataLoss,
	raydv1.ErrorReason_ERROR_REASON_UNSUPPORTED_FORMAT:    connect.CodeFailedPrecondition,
	raydv1.ErrorReason_ERROR_REASON_UNSAFE_ARCHIVE:        connect.CodeInvalidArgument,
	raydv1.ErrorReason_ERROR_REASON_NO_CREDENTIALS:        connect.CodePermissionDenied,
	raydv1.ErrorReason_ERROR_REASON_STORAGE_DENIED:        connect.CodePermissionDenied,
	raydv1.ErrorReason_ERROR_REASON_STORAGE_UNAVAILABLE:   connect.CodeUnavailable,
}

// CodeOf returns the Connect code of reason (Internal for a value outside
// the table).
func CodeOf(r Reason) connect.Code {
	if c, ok := codes[r]; ok {
		return c
	}
	return connect.CodeInternal
}

// rule maps one sentinel to a reason and a default message.
type rule struct {
	target error
	reason Reason
	msg    string
}

// rules is the mapping table, most specific first: several sentinels also
// match a general error further down (safefs.ErrDenied matches
// fs.ErrPermission, proc's lookup errors match fs.ErrNotExist).
var rules = []rule{
	{context.Canceled, raydv1.ErrorReason_ERROR_REASON_CANCELED, "canceled"},
	{context.DeadlineExceeded, raydv1.ErrorReason_ERROR_REASON_TIMEOUT, "deadline exceeded"},

	// The lifecycle: the suspend gate and the sandbox's timeout.
	{quiesce.ErrSuspending, raydv1.ErrorReason_ERROR_REASON_SUSPENDING, "rayd is suspending: retry once the sandbox has resumed"},
	{deadline.ErrExpired, raydv1.ErrorReason_ERROR_REASON_SANDBOX_TIMEOUT, "the sandbox's timeout expired: only HealthService.Health and LifecycleService.SetTimeout answer"},
	{deadline.ErrUnmanaged, raydv1.ErrorReason_ERROR_REASON_LIFECYCLE_UNMANAGED, "the sandbox's lifetime is not managed: its run payload has no lifecycle block"},
	{deadline.ErrPastCap, raydv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT, "timeout_ms reaches past the sandbox's cap"},
	{deadline.ErrInvalid, raydv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT, "timeout_ms must be positive and mode EXACT or AT_LEAST"},

	// persist and archive: HOME checkpoints (before safefs: a spooled
	// archive's errors are theirs).
	{persist.ErrBusy, raydv1.ErrorReason_ERROR_REASON_OPERATION_IN_PROGRESS, "a checkpoint or restore is already running in this sandbox: one at a time"},
	{persist.ErrOutsideBinding, raydv1.ErrorReason_ERROR_REASON_POLICY_DENIED, "this sandbox is bound to another bucket or prefix (its persistence): checkpoints and restores stay inside it"},
	{persist.ErrNotBound, raydv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT, "give a location: this sandbox was created without persistence"},
	{persist.ErrNoCheckpoint, raydv1.ErrorReason_ERROR_REASON_NOT_FOUND, "no checkpoint at this location (no manifest.json)"},
	{persist.ErrObjectNotFound, raydv1.ErrorReason_ERROR_REASON_NOT_FOUND, "no such bucket or object"},
	{persist.ErrNoCredentials, raydv1.ErrorReason_ERROR_REASON_NO_CREDENTIALS, "rayd has no credentials for the object store: create the sandbox with an execution role"},
	{persist.ErrStorageDenied, raydv1.ErrorReason_ERROR_REASON_STORAGE_DENIED, "the object store refused rayd's credentials for this bucket or prefix (see the execution role's policy)"},
	{persist.ErrWrongRegion, raydv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT, "the bucket is in another region: give its region"},
	{persist.ErrStorageUnavailable, raydv1.ErrorReason_ERROR_REASON_STORAGE_UNAVAILABLE, "the object store could not be reached or failed"},
	{archive.ErrChecksum, raydv1.ErrorReason_ERROR_REASON_CHECKSUM_MISMATCH, "the checkpoint's archive does not match its manifest (sha256 or size): nothing was extracted"},
	{archive.ErrUnsupported, raydv1.ErrorReason_ERROR_REASON_UNSUPPORTED_FORMAT, "the checkpoint's manifest is not version 1 of the format (docs/persistence.md)"},
	{archive.ErrUnsafe, raydv1.ErrorReason_ERROR_REASON_UNSAFE_ARCHIVE, "the checkpoint's archive holds an entry that would leave HOME, breaks a limit, or is not a tar.gz: nothing was extracted"},
	{archive.ErrBadExclude, raydv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT, "invalid exclude pattern"},

	// streamlimit: streams open at once.
	{streamlimit.ErrTooMany, raydv1.ErrorReason_ERROR_REASON_RESOURCE_EXHAUSTED, "too many open streams: at most 256 at once (unary calls still answer); close a stream or follow fewer processes"},

	// launch: request policy.
	{launch.ErrInvalid, raydv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT, "invalid request"},
	{launch.ErrExecutableNotFound, raydv1.ErrorReason_ERROR_REASON_EXECUTABLE_NOT_FOUND, "executable not found"},
	{launch.ErrNotExecutable, raydv1.ErrorReason_ERROR_REASON_NOT_EXECUTABLE, "executable not permitted"},
	{launch.ErrCwdNotFound, raydv1.ErrorReason_ERROR_REASON_CWD_NOT_FOUND, "cwd is not an existing directory"},
	{launch.ErrUserDenied, raydv1.ErrorReason_ERROR_REASON_PERMISSION_DENIED, "user not allowed"},
	{launch.ErrAccounts, raydv1.ErrorReason_ERROR_REASON_INTERNAL, "cannot read the account database"},

	// kernel: code contexts and their Jupyter kernels.
	{jupyter.ErrTooManyContexts, raydv1.ErrorReason_ERROR_REASON_RESOURCE_EXHAUSTED, "too many code contexts: at most 8 kernels at once (default contexts included)"},
	{jupyter.ErrContextNotFound, raydv1.ErrorReason_ERROR_REASON_NOT_FOUND, "no such code context"},
	{jupyter.ErrDefaultContext, raydv1.ErrorReason_ERROR_REASON_NOT_RUNNING, "a default context cannot be destroyed (restart it instead)"},
	{jupyter.ErrExecutionNotFound, raydv1.ErrorReason_ERROR_REASON_NOT_FOUND, "no such execution (an ended one is kept 30 s)"},
	{jupyter.ErrTruncated, raydv1.ErrorReason_ERROR_REASON_OUTPUT_TRUNCATED, "events at from_seq are no longer held (or not produced yet)"},
	{jupyter.ErrUnavailable, raydv1.ErrorReason_ERROR_REASON_UNIMPLEMENTED, "the language's kernel is not installed in this image"},
	{jupyter.ErrDied, raydv1.ErrorReason_ERROR_REASON_INTERNAL, "the kernel died"},
	{jupyter.ErrNotStarted, raydv1.ErrorReason_ERROR_REASON_INTERNAL, "the kernel did not start"},
	{jupyter.ErrClosed, raydv1.ErrorReason_ERROR_REASON_NOT_RUNNING, "the context was restarted or destroyed"},
	{jupyter.ErrNotOwnChild, raydv1.ErrorReason_ERROR_REASON_INTERNAL, "the kernel's pid could not be confirmed"},

	// proc: supervision.
	{proc.ErrTooManyProcesses, raydv1.ErrorReason_ERROR_REASON_RESOURCE_EXHAUSTED, "too many processes: at most 256 processes and PTYs live at once"},
	{proc.ErrTooManySubscribers, raydv1.ErrorReason_ERROR_REASON_RESOURCE_EXHAUSTED, "too many streams follow this process: at most 8 at once"},
	{proc.ErrOutOfRange, raydv1.ErrorReason_ERROR_REASON_OUTPUT_TRUNCATED, "output at from_seq is no longer held (or not produced yet)"},
	{proc.ErrProcessEnded, raydv1.ErrorReason_ERROR_REASON_NOT_RUNNING, "the process has ended"},
	{proc.ErrStdinNotEnabled, raydv1.ErrorReason_ERROR_REASON_NOT_RUNNING, "the process was started without stdin=true"},
	{proc.ErrStdinClosed, raydv1.ErrorReason_ERROR_REASON_NOT_RUNNING, "stdin is closed"},
	{proc.ErrNotPTY, raydv1.ErrorReason_ERROR_REASON_WRONG_KIND, "the pid is a process, not a PTY: use ProcessService"},
	{proc.ErrInvalidSize, raydv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT, "size out of range: 1..4096 columns and rows"},
	{proc.ErrShuttingDown, raydv1.ErrorReason_ERROR_REASON_SHUTTING_DOWN, "rayd is shutting down"},
	{proc.ErrNotFound, raydv1.ErrorReason_ERROR_REASON_NOT_FOUND, "no such process"},

	// safefs: file operations.
	{safefs.ErrDotDot, raydv1.ErrorReason_ERROR_REASON_INVALID_PATH, "path contains '..'"},
	{safefs.ErrDenied, raydv1.ErrorReason_ERROR_REASON_POLICY_DENIED, "access denied by policy"},
	{safefs.ErrSymlinkLoop, raydv1.ErrorReason_ERROR_REASON_SYMLINK, "too many levels of symbolic links"},
	{safefs.ErrSymlink, raydv1.ErrorReason_ERROR_REASON_SYMLINK, "symlink in path"},
	{safefs.ErrInvalidPath, raydv1.ErrorReason_ERROR_REASON_INVALID_PATH, "invalid path"},
	{safefs.ErrInvalidMetadata, raydv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT, "invalid metadata"},
	{safefs.ErrMetadataTooLarge, raydv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT, "invalid metadata"},
	{safefs.ErrMetadataUnsupported, raydv1.ErrorReason_ERROR_REASON_METADATA_UNSUPPORTED, "metadata unsupported by the file system"},
	{safefs.ErrNotDir, raydv1.ErrorReason_ERROR_REASON_NOT_A_DIRECTORY, "not a directory"},
	{safefs.ErrIsDir, raydv1.ErrorReason_ERROR_REASON_IS_A_DIRECTORY, "is a directory"},
	{safefs.ErrNotRegular, raydv1.ErrorReason_ERROR_REASON_NOT_A_REGULAR_FILE, "not a regular file"},
	{safefs.ErrExist, raydv1.ErrorReason_ERROR_REASON_ALREADY_EXISTS, "already exists"},
	{safefs.ErrNotEmpty, raydv1.ErrorReason_ERROR_REASON_DIRECTORY_NOT_EMPTY, "directory not empty"},
	{safefs.ErrTooMany, raydv1.ErrorReason_ERROR_REASON_RESOURCE_EXHAUSTED, "too many entries"},
	{safefs.ErrTooDeep, raydv1.ErrorReason_ERROR_REASON_RESOURCE_EXHAUSTED, "directory tree too deep"},
	{safefs.ErrDiskReserve, raydv1.ErrorReason_ERROR_REASON_DISK_RESERVE, "disk reserve reached"},
	{safefs.ErrDiskFull, raydv1.ErrorReason_ERROR_REASON_DISK_FULL, "disk full"},
	{safefs.ErrIdentity, raydv1.ErrorReason_ERROR_REASON_INTERNAL, "file operation failed"},
	{safefs.ErrCrossDevice, raydv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT, "source and destination are on different file systems: copy the file, then remove the source"},

	// General errors from the standard library and the kernel.
	{fs.ErrNotExist, raydv1.ErrorReason_ERROR_REASON_NOT_FOUND, "no such file or directory"},
	{fs.ErrPermission, raydv1.ErrorReason_ERROR_REASON_PERMISSION_DENIED, "permission denied"},
	{fs.ErrExist, raydv1.ErrorReason_ERROR_REASON_ALREADY_EXISTS, "already exists"},
	{syscall.ELOOP, raydv1.ErrorReason_ERROR_REASON_SYMLINK, "symlink in path"},
	{syscall.ENOSPC, raydv1.ErrorReason_ERROR_REASON_DISK_FULL, "disk full"},
	{syscall.ENOTDIR, raydv1.ErrorReason_ERROR_REASON_NOT_A_DIRECTORY, "not a directory"},
	{syscall.EISDIR, raydv1.ErrorReason_ERROR_REASON_IS_A_DIRECTORY, "is a directory"},
}

// publicMessage is implemented by domain errors that carry a fixed message
// fit for the client.
type publicMessage interface{ PublicMessage() string }

// Classify returns err's reason and the fixed message to send: a
// *connect.Error keeps its reason (from its ErrorInfo detail, or none) and
// message; a domain sentinel takes its row of the table; anything else is
// Internal.
func Classify(err error) (Reason, string) {
	var ce *connect.Error
	if errors.As(err, &ce) {
		return ReasonOf(ce), ce.Message()
	}
	for _, r := range rules {
		if errors.Is(err, r.target) {
			msg := r.msg
			var pm publicMessage
			if errors.As(err, &pm) {
				msg = pm.PublicMessage()
			}
			return r.reason, msg
		}
	}
	return raydv1.ErrorReason_ERROR_REASON_INTERNAL, "internal error"
}

// New returns the Connect error for reason with a fixed message, carrying
// an ErrorInfo detail. The code comes from the reason (CodeOf).
func New(reason Reason, message string) *connect.Error {
	ce := connect.NewError(CodeOf(reason), errors.New(message))
	if d, err := connect.NewErrorDetail(&raydv1.ErrorInfo{Reason: reason}); err == nil {
		ce.AddDetail(d)
	}
	return ce
}

// Invalid is New with reason INVALID_ARGUMENT, for request validation in
// the services.
func Invalid(message string) *connect.Error {
	return New(raydv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT, message)
}

// From maps err to a Connect error (nil for nil). A *connect.Error is
// returned as is; anything else goes through the table (Classify). The
// cause is not sent to the client.
func From(err error) error {
	if err == nil {
		return nil
	}
	var ce *connect.Error
	if errors.As(err, &ce) {
		return ce
	}
	reason, msg := Classify(err)
	return New(reason, msg)
}

// ReasonOf returns the reason carried by a Connect error's ErrorInfo
// detail, or UNSPECIFIED.
func ReasonOf(ce *connect.Error) Reason {
	for _, d := range ce.Details() {
		v, err := d.Value()
		if err != nil {
			continue
		}
		if info, ok := v.(*raydv1.ErrorInfo); ok {
			return info.GetReason()
		}
	}
	return raydv1.ErrorReason_ERROR_REASON_UNSPECIFIED
}

// Interceptor maps every error a handler returns through From, so a
// domain error that a service passes on unchanged still reaches the client
// as its code, reason and fixed message (and never as its own text).
func Interceptor() connect.Interceptor { return interceptor{} }

type interceptor struct{}

func (interceptor) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		resp, err := next(ctx, req)
		if err != nil {
			return nil, From(err)
		}
		return resp, nil
	}
}

func (interceptor) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (interceptor) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		return From(next(ctx, conn))
	}
}

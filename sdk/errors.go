package rayito

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"connectrpc.com/connect"

	"github.com/rayito-dev/rayito/proto/compat"
	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
	"github.com/rayito-dev/rayito/proto/microvmsapi"
	"github.com/rayito-dev/rayito/sdk/microvms"
)

// APIError is a control-plane error (AWS Lambda MicroVMs or localvm). It
// never carries the service's raw message. The SDK's own errors wrap it:
// reach it with errors.As when the exception name or request id matters
// (for a support ticket, say); the messages users see never show it.
type APIError = microvms.APIError

// Sentinels for errors.Is. Every error of the SDK that has one of these
// causes matches it, whether it came from the control plane, from the
// sandbox's daemon (rayd, see ReasonOf) or from a check made here.
var (
	// ErrNotFound: the sandbox, file, process or PTY does not exist.
	ErrNotFound = errors.New("rayito: not found")
	// ErrPermissionDenied: the user may not do this, or rayd's policy
	// refuses the path or the account.
	ErrPermissionDenied = errors.New("rayito: permission denied")
	// ErrDiskFull: the sandbox's disk is full, or the write would eat its
	// reserve.
	ErrDiskFull = errors.New("rayito: disk full")
	// ErrSandboxEnded: the sandbox is terminating or terminated (see
	// *SandboxEndedError).
	ErrSandboxEnded = errors.New("rayito: sandbox ended")
	// ErrTimeout: a deadline passed (a call's, or the command's).
	ErrTimeout = errors.New("rayito: timeout")
	// ErrAlreadyExists: the file or directory already exists.
	ErrAlreadyExists = errors.New("rayito: already exists")
	// ErrInvalidArgument: an option or argument was refused, here or by
	// the sandbox.
	ErrInvalidArgument = errors.New("rayito: invalid argument")
	// ErrUnauthenticated: the access token, or the AWS credentials, were
	// refused.
	ErrUnauthenticated = errors.New("rayito: unauthenticated")
	// ErrResourceExhausted: a cap or quota was reached (processes, streams
	// following one process, watches, the account's microVM quota,
	// throttling, capacity).
	ErrResourceExhausted = errors.New("rayito: resource exhausted")
	// ErrNotExecutable: the command exists but the user may not run it.
	ErrNotExecutable = errors.New("rayito: not executable")
	// ErrExecutableNotFound: the command is not on the sandbox's PATH.
	ErrExecutableNotFound = errors.New("rayito: executable not found")
	// ErrNotReady: the sandbox did not become ready in time.
	ErrNotReady = errors.New("rayito: sandbox not ready")
	// ErrPlatformUnavailable: nothing answers at the local platform's
	// address (see WithEndpoint); start one with `rayito local up`.
	ErrPlatformUnavailable = errors.New("rayito: local platform unavailable")
	// ErrNotPlatformOwner: the local platform at the endpoint belongs to
	// another user of the machine, and serves only its owner. Start your
	// own (`rayito local up`, on another address when that one is taken)
	// and point WithEndpoint or RAYITO_ENDPOINT at it. It also matches
	// ErrPermissionDenied.
	ErrNotPlatformOwner = errors.New("rayito: the local platform belongs to another user")
	// ErrNoAccessToken: Connect got no token (WithAccessToken) and none is
	// stored for the sandbox on this machine. It also matches
	// ErrUnauthenticated.
	ErrNoAccessToken = errors.New("rayito: no access token for the sandbox")
	// ErrIncompatibleAgent: the sandbox's daemon (rayd) is a version this
	// SDK cannot drive (see *IncompatibleAgentError).
	ErrIncompatibleAgent = errors.New("rayito: incompatible sandbox agent")
	// ErrSandboxTimeout: the sandbox's deadline (WithOnTimeout,
	// SetTimeout) passed. rayd then answers only Health and SetTimeout,
	// and a command it ended has Status StatusSandboxTimeout; a sandbox
	// ended for it (a *SandboxEndedError with Reason EndTimeout) matches
	// too.
	ErrSandboxTimeout = errors.New("rayito: sandbox timeout")
	// ErrLifecycleUnmanaged: the sandbox has no deadline to change: it was
	// created without WithTimeout, WithOnTimeout or WithMaxLifetime, so
	// only the platform's maximum duration (DefaultTimeout) ends it.
	ErrLifecycleUnmanaged = errors.New("rayito: sandbox lifecycle not managed")
	// ErrUnimplemented: the sandbox (or its daemon's version) does not
	// support this, e.g. a network policy where the daemon cannot program
	// the network (ReasonEgressUnavailable).
	ErrUnimplemented = errors.New("rayito: not supported by this sandbox")
	// ErrSecretNotFound: the secret (or the version of it) does not exist
	// in the secret store (sdk/secrets). It also matches ErrNotFound.
	ErrSecretNotFound = errors.New("rayito: secret not found")
	// ErrSecretExists: CreateSecret of a name the secret store (sdk/secrets) holds. It
	// also matches ErrAlreadyExists.
	ErrSecretExists = errors.New("rayito: secret already exists")
	// ErrBusy: another checkpoint or restore of the sandbox is running
	// (one at a time).
	ErrBusy = errors.New("rayito: a checkpoint or restore is already running")
	// ErrChecksumMismatch: a checkpoint's archive does not match its
	// manifest (or a transfer's bytes their sha256): nothing was written.
	ErrChecksumMismatch = errors.New("rayito: checksum mismatch")
	// ErrUnsafeArchive: a checkpoint is not one the sandbox can trust: its
	// archive holds an entry that would leave HOME, or it is not the open
	// format (docs/persistence.md), or another version of it. Nothing was
	// extracted.
	ErrUnsafeArchive = errors.New("rayito: unsafe or unsupported checkpoint")
	// ErrStorage: the object store refused the sandbox's credentials, or
	// could not be reached (ReasonStorageDenied, ReasonNoCredentials,
	// ReasonStorageUnavailable).
	ErrStorage = errors.New("rayito: object store error")
)

// Reason is the machine-readable cause of an error, as ReasonOf returns
// it. The set is closed; new reasons may be added in later versions, so
// treat an unknown one like ReasonUnspecified.
type Reason string

// The reasons. Most come from the sandbox's daemon (rayd); the last block
// from the control plane or from this SDK.
const (
	ReasonUnspecified         Reason = ""
	ReasonNotFound            Reason = "not_found"
	ReasonPermissionDenied    Reason = "permission_denied"
	ReasonPolicyDenied        Reason = "policy_denied"
	ReasonDiskFull            Reason = "disk_full"
	ReasonDiskReserve         Reason = "disk_reserve"
	ReasonTimeout             Reason = "timeout"
	ReasonInvalidArgument     Reason = "invalid_argument"
	ReasonInvalidPath         Reason = "invalid_path"
	ReasonAlreadyExists       Reason = "already_exists"
	ReasonNotADirectory       Reason = "not_a_directory"
	ReasonIsADirectory        Reason = "is_a_directory"
	ReasonNotARegularFile     Reason = "not_a_regular_file"
	ReasonSymlink             Reason = "symlink"
	ReasonDirectoryNotEmpty   Reason = "directory_not_empty"
	ReasonMetadataUnsupported Reason = "metadata_unsupported"
	ReasonResourceExhausted   Reason = "resource_exhausted"
	ReasonOutputTruncated     Reason = "output_truncated"
	ReasonUnauthenticated     Reason = "unauthenticated"
	ReasonNotRunning          Reason = "not_running"
	ReasonWrongKind           Reason = "wrong_kind"
	ReasonExecutableNotFound  Reason = "executable_not_found"
	ReasonNotExecutable       Reason = "not_executable"
	ReasonCwdNotFound         Reason = "cwd_not_found"
	ReasonUnimplemented       Reason = "unimplemented"
	ReasonShuttingDown        Reason = "shutting_down"
	ReasonCanceled            Reason = "canceled"
	ReasonInternal            Reason = "internal"
	ReasonSuspending          Reason = "suspending"
	ReasonSandboxTimeout      Reason = "sandbox_timeout"
	ReasonLifecycleUnmanaged  Reason = "lifecycle_unmanaged"
	ReasonEgressUnavailable   Reason = "egress_unavailable"
	ReasonEgressUpdateFailed  Reason = "egress_update_failed"
	// Persistence (Checkpoint, Restore).
	ReasonOperationInProgress Reason = "operation_in_progress"
	ReasonChecksumMismatch    Reason = "checksum_mismatch"
	ReasonUnsupportedFormat   Reason = "unsupported_format"
	ReasonUnsafeArchive       Reason = "unsafe_archive"
	ReasonNoCredentials       Reason = "no_credentials"
	ReasonStorageDenied       Reason = "storage_denied"
	ReasonStorageUnavailable  Reason = "storage_unavailable"

	ReasonSandboxEnded        Reason = "sandbox_ended"
	ReasonNotReady            Reason = "not_ready"
	ReasonPlatformUnavailable Reason = "platform_unavailable"
	ReasonNotPlatformOwner    Reason = "not_platform_owner"
	ReasonIncompatibleAgent   Reason = "incompatible_agent"
	ReasonQuotaExceeded       Reason = "quota_exceeded"
	ReasonRateLimited         Reason = "rate_limited"
	ReasonCapacity            Reason = "capacity"
	ReasonConflict            Reason = "conflict"
	ReasonSecretNotFound      Reason = "secret_not_found"
	ReasonSecretExists        Reason = "secret_exists"
)

// reasonOfWire maps the contract's ErrorReason to the SDK's Reason.
var reasonOfWire = map[raydv1.ErrorReason]Reason{
	raydv1.ErrorReason_ERROR_REASON_NOT_FOUND:             ReasonNotFound,
	raydv1.ErrorReason_ERROR_REASON_PERMISSION_DENIED:     ReasonPermissionDenied,
	raydv1.ErrorReason_ERROR_REASON_POLICY_DENIED:         ReasonPolicyDenied,
	raydv1.ErrorReason_ERROR_REASON_DISK_FULL:             ReasonDiskFull,
	raydv1.ErrorReason_ERROR_REASON_DISK_RESERVE:          ReasonDiskReserve,
	raydv1.ErrorReason_ERROR_REASON_TIMEOUT:               ReasonTimeout,
	raydv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT:      ReasonInvalidArgument,
	raydv1.ErrorReason_ERROR_REASON_INVALID_PATH:          ReasonInvalidPath,
	raydv1.ErrorReason_ERROR_REASON_ALREADY_EXISTS:        ReasonAlreadyExists,
	raydv1.ErrorReason_ERROR_REASON_NOT_A_DIRECTORY:       ReasonNotADirectory,
	raydv1.ErrorReason_ERROR_REASON_IS_A_DIRECTORY:        ReasonIsADirectory,
	raydv1.ErrorReason_ERROR_REASON_NOT_A_REGULAR_FILE:    ReasonNotARegularFile,
	raydv1.ErrorReason_ERROR_REASON_SYMLINK:               ReasonSymlink,
	raydv1.ErrorReason_ERROR_REASON_DIRECTORY_NOT_EMPTY:   ReasonDirectoryNotEmpty,
	raydv1.ErrorReason_ERROR_REASON_METADATA_UNSUPPORTED:  ReasonMetadataUnsupported,
	raydv1.ErrorReason_ERROR_REASON_RESOURCE_EXHAUSTED:    ReasonResourceExhausted,
	raydv1.ErrorReason_ERROR_REASON_OUTPUT_TRUNCATED:      ReasonOutputTruncated,
	raydv1.ErrorReason_ERROR_REASON_UNAUTHENTICATED:       ReasonUnauthenticated,
	raydv1.ErrorReason_ERROR_REASON_NOT_RUNNING:           ReasonNotRunning,
	raydv1.ErrorReason_ERROR_REASON_WRONG_KIND:            ReasonWrongKind,
	raydv1.ErrorReason_ERROR_REASON_EXECUTABLE_NOT_FOUND:  ReasonExecutableNotFound,
	raydv1.ErrorReason_ERROR_REASON_NOT_EXECUTABLE:        ReasonNotExecutable,
	raydv1.ErrorReason_ERROR_REASON_CWD_NOT_FOUND:         ReasonCwdNotFound,
	raydv1.ErrorReason_ERROR_REASON_UNIMPLEMENTED:         ReasonUnimplemented,
	raydv1.ErrorReason_ERROR_REASON_SHUTTING_DOWN:         ReasonShuttingDown,
	raydv1.ErrorReason_ERROR_REASON_CANCELED:              ReasonCanceled,
	raydv1.ErrorReason_ERROR_REASON_INTERNAL:              ReasonInternal,
	raydv1.ErrorReason_ERROR_REASON_SUSPENDING:            ReasonSuspending,
	raydv1.ErrorReason_ERROR_REASON_SANDBOX_TIMEOUT:       ReasonSandboxTimeout,
	raydv1.ErrorReason_ERROR_REASON_LIFECYCLE_UNMANAGED:   ReasonLifecycleUnmanaged,
	raydv1.ErrorReason_ERROR_REASON_EGRESS_UNAVAILABLE:    ReasonEgressUnavailable,
	raydv1.ErrorReason_ERROR_REASON_EGRESS_UPDATE_FAILED:  ReasonEgressUpdateFailed,
	raydv1.ErrorReason_ERROR_REASON_OPERATION_IN_PROGRESS: ReasonOperationInProgress,
	raydv1.ErrorReason_ERROR_REASON_CHECKSUM_MISMATCH:     ReasonChecksumMismatch,
	raydv1.ErrorReason_ERROR_REASON_UNSUPPORTED_FORMAT:    ReasonUnsupportedFormat,
	raydv1.ErrorReason_ERROR_REASON_UNSAFE_ARCHIVE:        ReasonUnsafeArchive,
	raydv1.ErrorReason_ERROR_REASON_NO_CREDENTIALS:        ReasonNoCredentials,
	raydv1.ErrorReason_ERROR_REASON_STORAGE_DENIED:        ReasonStorageDenied,
	raydv1.ErrorReason_ERROR_REASON_STORAGE_UNAVAILABLE:   ReasonStorageUnavailable,
}

// sentinelOf gives each reason its sentinel (nil when none fits).
var sentinelOf = map[Reason]error{
	ReasonNotFound:            ErrNotFound,
	ReasonPermissionDenied:    ErrPermissionDenied,
	ReasonPolicyDenied:        ErrPermissionDenied,
	ReasonDiskFull:            ErrDiskFull,
	ReasonDiskReserve:         ErrDiskFull,
	ReasonTimeout:             ErrTimeout,
	ReasonInvalidArgument:     ErrInvalidArgument,
	ReasonInvalidPath:         ErrInvalidArgument,
	ReasonAlreadyExists:       ErrAlreadyExists,
	ReasonNotADirectory:       ErrInvalidArgument,
	ReasonIsADirectory:        ErrInvalidArgument,
	ReasonNotARegularFile:     ErrInvalidArgument,
	ReasonResourceExhausted:   ErrResourceExhausted,
	ReasonUnauthenticated:     ErrUnauthenticated,
	ReasonExecutableNotFound:  ErrExecutableNotFound,
	ReasonNotExecutable:       ErrNotExecutable,
	ReasonCwdNotFound:         ErrNotFound,
	ReasonSandboxEnded:        ErrSandboxEnded,
	ReasonNotReady:            ErrNotReady,
	ReasonPlatformUnavailable: ErrPlatformUnavailable,
	ReasonNotPlatformOwner:    ErrNotPlatformOwner,
	ReasonIncompatibleAgent:   ErrIncompatibleAgent,
	ReasonQuotaExceeded:       ErrResourceExhausted,
	ReasonRateLimited:         ErrResourceExhausted,
	ReasonCapacity:            ErrResourceExhausted,
	ReasonSandboxTimeout:      ErrSandboxTimeout,
	ReasonLifecycleUnmanaged:  ErrLifecycleUnmanaged,
	ReasonUnimplemented:       ErrUnimplemented,
	ReasonEgressUnavailable:   ErrUnimplemented,
	ReasonSecretNotFound:      ErrSecretNotFound,
	ReasonSecretExists:        ErrSecretExists,
	ReasonOperationInProgress: ErrBusy,
	ReasonChecksumMismatch:    ErrChecksumMismatch,
	ReasonUnsupportedFormat:   ErrUnsafeArchive,
	ReasonUnsafeArchive:       ErrUnsafeArchive,
	ReasonNoCredentials:       ErrStorage,
	ReasonStorageDenied:       ErrStorage,
	ReasonStorageUnavailable:  ErrStorage,
}

// ReasonOf returns the machine-readable cause of err: the reason rayd
// sent (an *RPCError), the reason of an SDK error (*SandboxEndedError,
// a control-plane error), or the reason of the sentinel err matches.
// ReasonUnspecified when none is known (including nil).
func ReasonOf(err error) Reason {
	if err == nil {
		return ReasonUnspecified
	}
	var re *RPCError
	if errors.As(err, &re) && re.Reason != ReasonUnspecified {
		return re.Reason
	}
	var se *sdkError
	if errors.As(err, &se) && se.reason != ReasonUnspecified {
		return se.reason
	}
	var ee *SandboxEndedError
	if errors.As(err, &ee) {
		return ReasonSandboxEnded
	}
	for _, r := range []Reason{ReasonSandboxEnded, ReasonNotReady, ReasonPlatformUnavailable, ReasonIncompatibleAgent,
		ReasonNotFound, ReasonPermissionDenied, ReasonDiskFull, ReasonTimeout, ReasonAlreadyExists, ReasonInvalidArgument,
		ReasonUnauthenticated, ReasonResourceExhausted, ReasonExecutableNotFound, ReasonNotExecutable,
		ReasonSandboxTimeout, ReasonLifecycleUnmanaged} {
		if errors.Is(err, sentinelOf[r]) {
			return r
		}
	}
	return ReasonUnspecified
}

// Code is the RPC status code of an *RPCError, named like gRPC's and
// Connect's codes ("not_found").
type Code string

// The codes.
const (
	CodeCanceled           Code = "canceled"
	CodeUnknown            Code = "unknown"
	CodeInvalidArgument    Code = "invalid_argument"
	CodeDeadlineExceeded   Code = "deadline_exceeded"
	CodeNotFound           Code = "not_found"
	CodeAlreadyExists      Code = "already_exists"
	CodePermissionDenied   Code = "permission_denied"
	CodeResourceExhausted  Code = "resource_exhausted"
	CodeFailedPrecondition Code = "failed_precondition"
	CodeAborted            Code = "aborted"
	CodeOutOfRange         Code = "out_of_range"
	CodeUnimplemented      Code = "unimplemented"
	CodeInternal           Code = "internal"
	CodeUnavailable        Code = "unavailable"
	CodeDataLoss           Code = "data_loss"
	CodeUnauthenticated    Code = "unauthenticated"
)

// codeOf converts a Connect code.
func codeOf(c connect.Code) Code {
	if c == 0 {
		return CodeUnknown
	}
	return Code(c.String())
}

// reasonOfCode is the fallback reason of an error without ErrorInfo (an
// older rayd, or an error made by the transport).
func reasonOfCode(c Code) Reason {
	switch c {
	case CodeNotFound:
		return ReasonNotFound
	case CodePermissionDenied:
		return ReasonPermissionDenied
	case CodeInvalidArgument:
		return ReasonInvalidArgument
	case CodeAlreadyExists:
		return ReasonAlreadyExists
	case CodeDeadlineExceeded:
		return ReasonTimeout
	case CodeUnauthenticated:
		return ReasonUnauthenticated
	case CodeResourceExhausted:
		return ReasonResourceExhausted
	case CodeUnimplemented:
		return ReasonUnimplemented
	case CodeCanceled:
		return ReasonCanceled
	case CodeOutOfRange:
		return ReasonOutputTruncated
	}
	return ReasonUnspecified
}

// IncompatibleAgentError is returned by Create and Connect when the
// sandbox's daemon reports a version (Health's agent_version) this SDK
// cannot drive, according to the table of proto/compat. AgentVersion is
// as rayd reported it ("" for none), cut to 128 bytes. errors.Is(err,
// ErrIncompatibleAgent) matches it; Err is the cause from proto/compat
// (a *compat.IncompatibleError, or an error wrapping
// compat.ErrInvalidVersion when the version does not parse).
type IncompatibleAgentError struct {
	SDKVersion   string
	AgentVersion string
	Err          error
}

func (e *IncompatibleAgentError) Error() string {
	var ie *compat.IncompatibleError
	switch {
	case e.AgentVersion == "":
		return fmt.Sprintf("rayito: SDK %s cannot drive this sandbox: its agent reports no version", e.SDKVersion)
	case errors.As(e.Err, &ie):
		return fmt.Sprintf("rayito: SDK %s cannot drive this sandbox's agent %s: %s", e.SDKVersion, e.AgentVersion, ie.Reason)
	case errors.Is(e.Err, compat.ErrInvalidVersion):
		return fmt.Sprintf("rayito: SDK %s cannot drive this sandbox: its agent reports a malformed version %q", e.SDKVersion, e.AgentVersion)
	default:
		return fmt.Sprintf("rayito: SDK %s cannot check this sandbox's agent %q: %v", e.SDKVersion, e.AgentVersion, e.Err)
	}
}

// Is lets errors.Is(err, ErrIncompatibleAgent) match.
func (e *IncompatibleAgentError) Is(target error) bool { return target == ErrIncompatibleAgent }

// Unwrap returns the cause from proto/compat.
func (e *IncompatibleAgentError) Unwrap() error { return e.Err }

// SandboxEndedError says the sandbox is terminating or terminated.
// errors.Is(err, ErrSandboxEnded) matches it, and so does
// errors.Is(err, ErrSandboxTimeout) when its deadline ended it. EndedAt is
// zero when the platform did not say. Reason is why it ended (EndUnknown
// when the platform's words are not known, see Info.EndReason) and Detail
// what the platform added ("exit status 3"; for EndUnknown its own text),
// cut to 240 bytes.
//
// Create and Connect return it for a sandbox that ended, and so do the
// handles of commands, terminals and watches whose stream the end cut.
type SandboxEndedError struct {
	ID      string
	EndedAt time.Time
	Reason  EndReason
	Detail  string
}

// Error reads "sandbox X ended at T (reason: detail)".
func (e *SandboxEndedError) Error() string {
	var b strings.Builder
	b.WriteString("sandbox " + e.ID + " ended")
	if !e.EndedAt.IsZero() {
		b.WriteString(" at " + e.EndedAt.UTC().Format(time.RFC3339))
	}
	if why := describeEnd(e.Reason, e.Detail); why != "" {
		b.WriteString(" (" + why + ")")
	}
	return b.String()
}

// Is lets errors.Is(err, ErrSandboxEnded) match, and ErrSandboxTimeout
// when Reason is EndTimeout.
func (e *SandboxEndedError) Is(target error) bool {
	return target == ErrSandboxEnded || target == ErrSandboxTimeout && e.Reason == EndTimeout
}

// CapExceededError is SetTimeout's refusal of a deadline past the
// sandbox's cap (WithMaxLifetime): Cap is that cap, zero when rayd did not
// say. errors.Is(err, ErrInvalidArgument) matches it; the *RPCError of
// rayd's answer is its cause.
type CapExceededError struct {
	Cap time.Time
	Err error
}

func (e *CapExceededError) Error() string {
	if e.Cap.IsZero() {
		return "rayito: set timeout: the deadline would pass the sandbox's lifetime cap"
	}
	return "rayito: set timeout: the deadline would pass the sandbox's lifetime cap (" + e.Cap.UTC().Format(time.RFC3339) + ")"
}

// Is lets errors.Is(err, ErrInvalidArgument) match.
func (e *CapExceededError) Is(target error) bool { return target == ErrInvalidArgument }

// Unwrap returns rayd's answer.
func (e *CapExceededError) Unwrap() error { return e.Err }

// RPCError is an error from the sandbox's daemon (rayd). Code is the RPC
// status code, Reason the machine-readable cause rayd sent (or, from an
// older rayd, the one the code implies), Message rayd's fixed message.
// errors.Is matches the sentinel of its reason (ErrNotFound, ErrDiskFull,
// ...).
type RPCError struct {
	Op      string
	Code    Code
	Reason  Reason
	Message string
}

func (e *RPCError) Error() string {
	return fmt.Sprintf("rayito: %s: %s", e.Op, e.Message)
}

// Is lets errors.Is match the sentinel of the error's reason.
func (e *RPCError) Is(target error) bool {
	s, ok := sentinelOf[e.Reason]
	return ok && s == target
}

// rpcErr wraps an error of a call to rayd.
func rpcErr(op string, err error) error {
	if err == nil {
		return nil
	}
	var ce *connect.Error
	if errors.As(err, &ce) && (ce.Code() != connect.CodeUnavailable || connect.IsWireError(ce)) {
		code := codeOf(ce.Code())
		reason := ReasonUnspecified
		for _, d := range ce.Details() {
			if v, derr := d.Value(); derr == nil {
				if info, ok := v.(*raydv1.ErrorInfo); ok {
					reason = reasonOfWire[info.GetReason()]
				}
			}
		}
		if reason == ReasonUnspecified {
			reason = reasonOfCode(code)
		}
		msg := ce.Message()
		if msg == "" {
			msg = string(code)
		}
		return &RPCError{Op: op, Code: code, Reason: reason, Message: msg}
	}
	return fmt.Errorf("rayito: %s: %w", op, err)
}

// sdkError is an error made here: a fixed message for users (never an
// AWS exception name, an option name or a Go type), a reason, and the
// causes for errors.Is and errors.As (a sentinel, often an *APIError).
type sdkError struct {
	msg    string
	reason Reason
	errs   []error
}

func (e *sdkError) Error() string   { return e.msg }
func (e *sdkError) Unwrap() []error { return e.errs }

func newError(reason Reason, msg string, causes ...error) error {
	errs := causes
	if s := sentinelOf[reason]; s != nil {
		errs = append([]error{s}, causes...)
	}
	return &sdkError{msg: msg, reason: reason, errs: errs}
}

// controlPlaneErr turns an error of the control plane about sandbox id
// (id "" for calls about no sandbox, like List) into an error users can
// read: "sandbox X not found", "... rate limited" and so on. The
// *APIError stays reachable with errors.As.
func controlPlaneErr(cfg *config, id string, err error) error {
	if err == nil {
		return nil
	}
	what := "the sandbox platform"
	if id != "" {
		what = "sandbox " + id
	}
	var ae *APIError
	if errors.As(err, &ae) {
		if ae.Exception == microvmsapi.NotOwnerException {
			return newError(ReasonNotPlatformOwner, "the local platform at "+cfg.endpoint+
				" belongs to another user; start your own with `rayito local up` (on another address) and point RAYITO_ENDPOINT at it", err, ErrPermissionDenied)
		}
		switch ae.Kind {
		case microvms.KindNotFound:
			return newError(ReasonNotFound, what+" not found", err)
		case microvms.KindInvalidArgument:
			return newError(ReasonInvalidArgument, what+": invalid request", err)
		case microvms.KindAuthentication:
			return newError(ReasonUnauthenticated, what+": the AWS credentials were refused or are missing", err)
		case microvms.KindRateLimit:
			return newError(ReasonRateLimited, what+": rate limited by the platform; retry later", err)
		case microvms.KindConflict:
			return newError(ReasonConflict, what+": its state does not allow this now", err)
		case microvms.KindQuotaExceeded:
			return newError(ReasonQuotaExceeded, what+": the account's sandbox quota is used up", err)
		case microvms.KindCapacity:
			return newError(ReasonCapacity, what+": the platform has no capacity right now; retry later", err)
		default:
			return newError(ReasonInternal, what+": the platform failed", err)
		}
	}
	var oe *net.OpError
	if cfg.backend == BackendLocal && errors.As(err, &oe) && oe.Op == "dial" {
		return newError(ReasonPlatformUnavailable,
			"no local platform at "+cfg.endpoint+"; start one with `rayito local up`", err)
	}
	return err
}

// CommandExitError is returned by Commands.Run and CommandHandle.Wait when
// the command ended with a non-zero exit code, by a signal, or by a
// deadline; the full result is attached. errors.Is(err, ErrSandboxTimeout)
// matches it when the sandbox's deadline ended the command
// (StatusSandboxTimeout).
type CommandExitError struct {
	Result *CommandResult
}

func (e *CommandExitError) Error() string {
	switch e.Result.Status {
	case "", StatusExited:
		return fmt.Sprintf("rayito: command exited with code %d", e.Result.ExitCode)
	case StatusOOMKilled:
		return fmt.Sprintf("rayito: command killed by the OOM killer (exit code %d)", e.Result.ExitCode)
	case StatusSandboxTimeout:
		return "rayito: command ended by the sandbox's timeout"
	case StatusTimeout:
		return fmt.Sprintf("rayito: command timed out (exit code %d)", e.Result.ExitCode)
	}
	return fmt.Sprintf("rayito: command ended (%s) with exit code %d", e.Result.Status, e.Result.ExitCode)
}

// Is lets errors.Is(err, ErrSandboxTimeout) match a command the sandbox's
// deadline ended.
func (e *CommandExitError) Is(target error) bool {
	return target == ErrSandboxTimeout && e.Result.Status == StatusSandboxTimeout
}

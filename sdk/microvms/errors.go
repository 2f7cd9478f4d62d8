package microvms

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/rayito-dev/rayito/proto/microvmsapi"
)

// ErrorKind classifies an [*APIError].
type ErrorKind string

// The kinds of [*APIError].
const (
	// KindNotFound: the microVM does not exist (ResourceNotFoundException).
	KindNotFound ErrorKind = "not_found"
	// KindInvalidArgument: the request was refused as invalid, by this
	// package before sending it or by the service (ValidationException).
	KindInvalidArgument ErrorKind = "invalid_argument"
	// KindAuthentication: credentials are missing, wrong, expired or not
	// allowed (AccessDenied, UnrecognizedClient, InvalidSignature,
	// ExpiredToken and similar).
	KindAuthentication ErrorKind = "authentication"
	// KindRateLimit: the service throttled the call (ThrottlingException or
	// HTTP 429). See [APIError.RetryAfter].
	KindRateLimit ErrorKind = "rate_limit"
	// KindConflict: the microVM's state does not allow the operation
	// (ConflictException); Rayito's SDK calls this a sandbox-state error.
	KindConflict ErrorKind = "conflict"
	// KindQuotaExceeded: an account quota is used up
	// (ServiceQuotaExceededException, sent with HTTP 402).
	KindQuotaExceeded ErrorKind = "quota_exceeded"
	// KindCapacity: the service has no capacity for the request right now
	// (InsufficientCapacityException).
	KindCapacity ErrorKind = "capacity"
	// KindInternal: anything else, including server errors.
	KindInternal ErrorKind = "internal"
)

// String returns a short human description of the kind, as used in
// [APIError.Error].
func (k ErrorKind) String() string {
	switch k {
	case KindNotFound:
		return "not found"
	case KindInvalidArgument:
		return "invalid argument"
	case KindAuthentication:
		return "authentication failed"
	case KindRateLimit:
		return "rate limited"
	case KindConflict:
		return "conflict with the microVM's state"
	case KindQuotaExceeded:
		return "quota exceeded"
	case KindCapacity:
		return "insufficient capacity"
	default:
		return "internal error"
	}
}

// APIError is an error answered by the service, or a request this package
// refused to send.
//
// It never contains the service's error message: only the exception name
// (a short identifier such as "ResourceNotFoundException") is kept, because
// AWS messages can echo request material, session token included.
type APIError struct {
	// Kind classifies the error.
	Kind ErrorKind
	// Operation is the API operation, such as "GetMicrovm".
	Operation string
	// StatusCode is the HTTP status of the response, or 0 when no response
	// was involved (a client-side refusal).
	StatusCode int
	// Exception is the service's exception name, without namespace or
	// URL ("ResourceNotFoundException"), or "" when the response named
	// none (or named it in a form that is not a plain identifier).
	Exception string
	// RequestID is the service's request id (x-amzn-RequestId), if any.
	RequestID string
	// RetryAfter is the delay the service asked for in a Retry-After
	// header, or 0.
	RetryAfter time.Duration
	// Reason is set only on errors this package made up (a client-side
	// refusal, an unusable response). It is written by this package and
	// never copied from the service.
	Reason string

	cause error
}

// Error returns, for a service error,
//
//	microvms: GetMicrovm: not found (ResourceNotFoundException, 404)
//
// and for a client-side refusal,
//
//	microvms: RunMicrovm: invalid argument: runHookPayload has 5000 characters, more than 4096
func (e *APIError) Error() string {
	var b strings.Builder
	b.WriteString("microvms: ")
	if e.Operation != "" {
		b.WriteString(e.Operation)
		b.WriteString(": ")
	}
	b.WriteString(e.Kind.String())
	switch {
	case e.Exception != "" && e.StatusCode != 0:
		b.WriteString(" (" + e.Exception + ", " + strconv.Itoa(e.StatusCode) + ")")
	case e.Exception != "":
		b.WriteString(" (" + e.Exception + ")")
	case e.StatusCode != 0:
		b.WriteString(" (HTTP " + strconv.Itoa(e.StatusCode) + ")")
	}
	if e.Reason != "" {
		b.WriteString(": " + e.Reason)
	}
	if e.cause != nil {
		b.WriteString(": " + e.cause.Error())
	}
	return b.String()
}

// Is reports whether target is the sentinel of e's kind, so that
// errors.Is(err, ErrNotFound) works.
func (e *APIError) Is(target error) bool {
	s, ok := target.(*sentinel)
	return ok && s.kind == e.Kind
}

// Unwrap returns the underlying cause of an error this package made up
// (such as a credentials failure), or nil.
func (e *APIError) Unwrap() error { return e.cause }

// Retryable reports whether the same call may succeed later: throttling,
// insufficient capacity and server errors. The client has already retried
// these up to its attempt limit.
func (e *APIError) Retryable() bool {
	return e.Kind == KindRateLimit || e.Kind == KindCapacity || retryableStatus(e.StatusCode)
}

type sentinel struct{ kind ErrorKind }

func (s *sentinel) Error() string { return "microvms: " + s.kind.String() }

// Sentinels for errors.Is; each matches every [*APIError] of its kind.
var (
	ErrNotFound        error = &sentinel{KindNotFound}
	ErrInvalidArgument error = &sentinel{KindInvalidArgument}
	ErrAuthentication  error = &sentinel{KindAuthentication}
	ErrRateLimit       error = &sentinel{KindRateLimit}
	ErrConflict        error = &sentinel{KindConflict}
	ErrQuotaExceeded   error = &sentinel{KindQuotaExceeded}
	ErrCapacity        error = &sentinel{KindCapacity}
	ErrInternal        error = &sentinel{KindInternal}
)

// KindOf returns the kind of the [*APIError] in err's chain, and false when
// there is none (transport and context errors).
func KindOf(err error) (ErrorKind, bool) {
	var ae *APIError
	if !errors.As(err, &ae) {
		return "", false
	}
	return ae.Kind, true
}

// kindByException maps exception names, without their "Exception" suffix,
// to kinds.
var kindByException = map[string]ErrorKind{
	"ResourceNotFound": KindNotFound,

	"Validation":    KindInvalidArgument,
	"Serialization": KindInvalidArgument,

	"AccessDenied":               KindAuthentication,
	"UnrecognizedClient":         KindAuthentication,
	"InvalidSignature":           KindAuthentication,
	"IncompleteSignature":        KindAuthentication,
	"SignatureDoesNotMatch":      KindAuthentication,
	"MissingAuthenticationToken": KindAuthentication,
	"InvalidClientTokenId":       KindAuthentication,
	"ExpiredToken":               KindAuthentication,

	"Throttling":           KindRateLimit,
	"TooManyRequests":      KindRateLimit,
	"RequestLimitExceeded": KindRateLimit,

	"Conflict": KindConflict,

	"ServiceQuotaExceeded": KindQuotaExceeded,

	"InsufficientCapacity": KindCapacity,

	"InternalServer":     KindInternal,
	"InternalFailure":    KindInternal,
	"ServiceUnavailable": KindInternal,
}

// kindOf classifies a response by exception name, and by HTTP status when
// the name is absent or unknown.
func kindOf(exception string, status int) ErrorKind {
	if k, ok := kindByException[strings.TrimSuffix(exception, "Exception")]; ok {
		return k
	}
	switch status {
	case http.StatusNotFound:
		return KindNotFound
	case http.StatusBadRequest:
		return KindInvalidArgument
	case http.StatusUnauthorized, http.StatusForbidden:
		return KindAuthentication
	case http.StatusTooManyRequests:
		return KindRateLimit
	case http.StatusConflict:
		return KindConflict
	case http.StatusPaymentRequired:
		return KindQuotaExceeded
	}
	return KindInternal
}

// exceptionName extracts the exception name from the X-Amzn-ErrorType
// header ("Name:http://…") or else from the body's __type
// ("namespace#Name"). Anything that does not look like an identifier is
// dropped, so no free text from the response reaches an error.
func exceptionName(h http.Header, body []byte) string {
	name := h.Get(microvmsapi.ErrorTypeHeader)
	if name == "" && len(body) > 0 {
		var e microvmsapi.Error
		if json.Unmarshal(body, &e) == nil {
			name = e.Type
		}
	}
	if i := strings.IndexByte(name, ':'); i >= 0 {
		name = name[:i]
	}
	if i := strings.LastIndexByte(name, '#'); i >= 0 {
		name = name[i+1:]
	}
	name = strings.TrimSpace(name)
	if !isIdentifier(name, 128) {
		return ""
	}
	return name
}

// requestID returns the response's request id if it looks like one.
func requestID(h http.Header) string {
	id := h.Get("X-Amzn-Requestid")
	if id == "" {
		id = h.Get("X-Amz-Request-Id")
	}
	if !isIdentifier(id, 128) {
		return ""
	}
	return id
}

func isIdentifier(s string, maxLen int) bool {
	if s == "" || len(s) > maxLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

// parseRetryAfter reads a Retry-After header: delay-seconds or an HTTP date.
func parseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		if n <= 0 {
			return 0
		}
		if n > 24*3600 {
			n = 24 * 3600
		}
		return time.Duration(n) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := t.Sub(now); d > 0 {
			return min(d, 24*time.Hour)
		}
	}
	return 0
}

// responseError builds the error for a non-2xx response.
func responseError(op Operation, status int, h http.Header, body []byte, now time.Time) *APIError {
	exc := exceptionName(h, body)
	return &APIError{
		Kind:       kindOf(exc, status),
		Operation:  string(op),
		StatusCode: status,
		Exception:  exc,
		RequestID:  requestID(h),
		RetryAfter: parseRetryAfter(h.Get("Retry-After"), now),
	}
}

func retryableStatus(status int) bool {
	switch status {
	case http.StatusTooManyRequests, http.StatusInternalServerError, http.StatusBadGateway,
		http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	}
	return false
}

// retryable reports whether a service error is worth another attempt:
// throttling (by status or by name) and 500/502/503/504.
func retryable(e *APIError) bool {
	return e.Kind == KindRateLimit || retryableStatus(e.StatusCode)
}

// invalid returns a client-side refusal.
func invalid(op Operation, reason string) *APIError {
	return &APIError{Kind: KindInvalidArgument, Operation: string(op), Reason: reason}
}

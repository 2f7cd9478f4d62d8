package rpcerr

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"

	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
	"github.com/rayito-dev/rayito/rayd/internal/deadline"
	"github.com/rayito-dev/rayito/rayd/internal/launch"
	"github.com/rayito-dev/rayito/rayd/internal/proc"
	"github.com/rayito-dev/rayito/rayd/internal/quiesce"
	"github.com/rayito-dev/rayito/rayd/internal/safefs"
)

func TestFrom(t *testing.T) {
	t.Parallel()
	cases := []struct {
		err    error
		code   connect.Code
		reason raydv1.ErrorReason
	}{
		{context.Canceled, connect.CodeCanceled, raydv1.ErrorReason_ERROR_REASON_CANCELED},
		{fmt.Errorf("x: %w", context.DeadlineExceeded), connect.CodeDeadlineExceeded, raydv1.ErrorReason_ERROR_REASON_TIMEOUT},
		{&fs.PathError{Op: "open", Path: "/x", Err: syscall.ENOENT}, connect.CodeNotFound, raydv1.ErrorReason_ERROR_REASON_NOT_FOUND},
		{&fs.PathError{Op: "open", Path: "/x", Err: syscall.EACCES}, connect.CodePermissionDenied, raydv1.ErrorReason_ERROR_REASON_PERMISSION_DENIED},
		{syscall.EEXIST, connect.CodeAlreadyExists, raydv1.ErrorReason_ERROR_REASON_ALREADY_EXISTS},
		{syscall.ELOOP, connect.CodeFailedPrecondition, raydv1.ErrorReason_ERROR_REASON_SYMLINK},
		{syscall.ENOSPC, connect.CodeResourceExhausted, raydv1.ErrorReason_ERROR_REASON_DISK_FULL},
		{fmt.Errorf("wrapped: %w", safefs.ErrDiskReserve), connect.CodeResourceExhausted, raydv1.ErrorReason_ERROR_REASON_DISK_RESERVE},
		{safefs.ErrDotDot, connect.CodeInvalidArgument, raydv1.ErrorReason_ERROR_REASON_INVALID_PATH},
		{safefs.ErrDenied, connect.CodePermissionDenied, raydv1.ErrorReason_ERROR_REASON_POLICY_DENIED},
		{safefs.ErrIsDir, connect.CodeInvalidArgument, raydv1.ErrorReason_ERROR_REASON_IS_A_DIRECTORY},
		{&safefs.PathError{Op: "move", Reason: "cross_device", Err: safefs.ErrCrossDevice}, connect.CodeInvalidArgument, raydv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT},
		{proc.ErrNotFound, connect.CodeNotFound, raydv1.ErrorReason_ERROR_REASON_NOT_FOUND},
		{proc.ErrTooManySubscribers, connect.CodeResourceExhausted, raydv1.ErrorReason_ERROR_REASON_RESOURCE_EXHAUSTED},
		{proc.ErrOutOfRange, connect.CodeOutOfRange, raydv1.ErrorReason_ERROR_REASON_OUTPUT_TRUNCATED},
		{proc.ErrProcessEnded, connect.CodeFailedPrecondition, raydv1.ErrorReason_ERROR_REASON_NOT_RUNNING},
		{proc.ErrShuttingDown, connect.CodeUnavailable, raydv1.ErrorReason_ERROR_REASON_SHUTTING_DOWN},
		{&launch.Error{Err: launch.ErrExecutableNotFound, Msg: "shell not found"}, connect.CodeNotFound, raydv1.ErrorReason_ERROR_REASON_EXECUTABLE_NOT_FOUND},
		{&launch.Error{Err: launch.ErrNotExecutable, Msg: "x"}, connect.CodePermissionDenied, raydv1.ErrorReason_ERROR_REASON_NOT_EXECUTABLE},
		{New(raydv1.ErrorReason_ERROR_REASON_OUTPUT_TRUNCATED, "x"), connect.CodeOutOfRange, raydv1.ErrorReason_ERROR_REASON_OUTPUT_TRUNCATED},
		{errors.New("boom"), connect.CodeInternal, raydv1.ErrorReason_ERROR_REASON_INTERNAL},
		{quiesce.ErrSuspending, connect.CodeUnavailable, raydv1.ErrorReason_ERROR_REASON_SUSPENDING},
		{deadline.ErrExpired, connect.CodeFailedPrecondition, raydv1.ErrorReason_ERROR_REASON_SANDBOX_TIMEOUT},
		{deadline.ErrKilled, connect.CodeFailedPrecondition, raydv1.ErrorReason_ERROR_REASON_SANDBOX_TIMEOUT},
		{deadline.ErrUnmanaged, connect.CodeFailedPrecondition, raydv1.ErrorReason_ERROR_REASON_LIFECYCLE_UNMANAGED},
		{&deadline.CapError{}, connect.CodeInvalidArgument, raydv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT},
		{deadline.ErrInvalid, connect.CodeInvalidArgument, raydv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT},
	}
	for _, c := range cases {
		var ce *connect.Error
		if !errors.As(From(c.err), &ce) {
			t.Fatalf("From(%v) is not a *connect.Error", c.err)
		}
		if ce.Code() != c.code || ReasonOf(ce) != c.reason {
			t.Errorf("From(%v) = %v %v, want %v %v", c.err, ce.Code(), ReasonOf(ce), c.code, c.reason)
		}
	}
	if From(nil) != nil {
		t.Fatal("From(nil) != nil")
	}
}

// Every reason of the contract has a code, and no reason maps to OK.
func TestEveryReasonHasACode(t *testing.T) {
	t.Parallel()
	for v, name := range raydv1.ErrorReason_name {
		if _, ok := codes[raydv1.ErrorReason(v)]; !ok {
			t.Errorf("reason %s has no code", name)
		}
	}
	for _, r := range rules {
		if _, ok := codes[r.reason]; !ok || r.reason == raydv1.ErrorReason_ERROR_REASON_UNSPECIFIED {
			t.Errorf("rule %v has reason %v", r.target, r.reason)
		}
	}
}

func TestFromHidesCauseKeepsPublicMessage(t *testing.T) {
	t.Parallel()
	var ce *connect.Error
	if !errors.As(From(&fs.PathError{Op: "open", Path: "/secret/path", Err: syscall.ENOENT}), &ce) || ce.Message() != "no such file or directory" {
		t.Fatalf("From = %v", ce)
	}
	if !errors.As(From(&launch.Error{Err: launch.ErrInvalid, Msg: "cmd is empty"}), &ce) || ce.Message() != "cmd is empty" {
		t.Fatalf("From = %v", ce)
	}
}

func TestWriteHTTP(t *testing.T) {
	t.Parallel()
	cases := []struct {
		err    error
		status int
		body   HTTPError
	}{
		{safefs.ErrDiskFull, http.StatusTooManyRequests, HTTPError{"resource_exhausted", "disk full", "ERROR_REASON_DISK_FULL"}},
		{New(raydv1.ErrorReason_ERROR_REASON_UNAUTHENTICATED, "missing or invalid access token"), http.StatusUnauthorized,
			HTTPError{"unauthenticated", "missing or invalid access token", "ERROR_REASON_UNAUTHENTICATED"}},
		{fs.ErrNotExist, http.StatusNotFound, HTTPError{"not_found", "no such file or directory", "ERROR_REASON_NOT_FOUND"}},
		{context.Canceled, 499, HTTPError{"canceled", "canceled", "ERROR_REASON_CANCELED"}},
	}
	for _, c := range cases {
		rec := httptest.NewRecorder()
		WriteHTTP(rec, c.err)
		var got HTTPError
		if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
			t.Fatal(err)
		}
		if rec.Code != c.status || got != c.body {
			t.Errorf("WriteHTTP(%v) = %d %+v, want %d %+v", c.err, rec.Code, got, c.status, c.body)
		}
	}
}

// The code↔HTTP table agrees with connect-go's own client mapping: a status
// from HTTPStatus read back by a Connect client yields the same code for
// the codes whose HTTP status is unique.
func TestHTTPStatusTable(t *testing.T) {
	t.Parallel()
	want := map[connect.Code]int{
		connect.CodeCanceled: 499, connect.CodeUnknown: 500, connect.CodeInvalidArgument: 400,
		connect.CodeDeadlineExceeded: 504, connect.CodeNotFound: 404, connect.CodeAlreadyExists: 409,
		connect.CodePermissionDenied: 403, connect.CodeResourceExhausted: 429, connect.CodeFailedPrecondition: 400,
		connect.CodeAborted: 409, connect.CodeOutOfRange: 400, connect.CodeUnimplemented: 501,
		connect.CodeInternal: 500, connect.CodeUnavailable: 503, connect.CodeDataLoss: 500, connect.CodeUnauthenticated: 401,
	}
	for c, s := range want {
		if got := HTTPStatus(c); got != s {
			t.Errorf("HTTPStatus(%v) = %d, want %d", c, got, s)
		}
	}
}

// The cap error's message names the cap; the kill-mode expiry has its own.
func TestLifecycleMessages(t *testing.T) {
	t.Parallel()
	capAt := time.UnixMilli(1_700_000_123_456)
	if _, msg := Classify(&deadline.CapError{Cap: capAt}); msg != "timeout_ms reaches past the sandbox's cap: cap_unix_ms=1700000123456" {
		t.Errorf("cap message %q", msg)
	}
	if _, msg := Classify(deadline.ErrKilled); !strings.Contains(msg, "kill") {
		t.Errorf("killed message %q", msg)
	}
}

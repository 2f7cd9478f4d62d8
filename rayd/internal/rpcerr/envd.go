package rpcerr

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"strconv"

	"connectrpc.com/connect"

	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
	"github.com/rayito-dev/rayito/rayd/internal/launch"
	"github.com/rayito-dev/rayito/rayd/internal/proc"
)

// E2B's envd protocol (the E2B shim's services on the envd port) answers a
// few causes with other codes than Rayito's API, because the official e2b
// SDKs branch on them: a kill of an ended process is not_found (the SDK
// returns false), a missing cwd invalid_argument (InvalidArgumentError),
// and its messages name the client's own pid or path, which the SDK
// shows. These functions are those exceptions; everything else maps as
// From does.

// EnvdProcess maps err of an operation on the process pid: an unknown or
// ended process is NotFound "process with pid N not found".
func EnvdProcess(err error, pid uint32) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, proc.ErrNotFound) || errors.Is(err, proc.ErrProcessEnded) {
		return New(raydv1.ErrorReason_ERROR_REASON_NOT_FOUND, fmt.Sprintf("process with pid %d not found", pid))
	}
	return From(err)
}

// EnvdStart maps err of a Start whose requested working directory was cwd
// ("" when none): a missing cwd is InvalidArgument naming it.
func EnvdStart(err error, cwd string) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, launch.ErrCwdNotFound) && cwd != "" {
		return Invalid(fmt.Sprintf("cwd '%s' does not exist", cwd))
	}
	return From(err)
}

// EnvdPath maps err of a file operation on the path p (as the client gave
// it): a missing entry is NotFound "path 'p' does not exist".
func EnvdPath(err error, p string) error {
	if err == nil {
		return nil
	}
	var ce *connect.Error
	if errors.As(err, &ce) && ce.Code() == connect.CodeNotFound || errors.Is(err, fs.ErrNotExist) {
		return New(raydv1.ErrorReason_ERROR_REASON_NOT_FOUND, fmt.Sprintf("path '%s' does not exist", p))
	}
	return From(err)
}

// EnvdHTTPError is the JSON error body of envd's plain HTTP endpoints:
// the HTTP status as a number and the message.
type EnvdHTTPError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

// WriteEnvdHTTP answers err (mapped like From) as an EnvdHTTPError with
// the HTTP status of its Connect code (HTTPStatus), or status when not 0.
func WriteEnvdHTTP(w http.ResponseWriter, status int, err error) {
	reason, msg := Classify(err)
	code := CodeOf(reason)
	var ce *connect.Error
	if errors.As(err, &ce) {
		code = ce.Code()
	}
	if status == 0 {
		status = HTTPStatus(code)
	}
	b, _ := json.Marshal(EnvdHTTPError{Code: status, Message: msg})
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(b)))
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

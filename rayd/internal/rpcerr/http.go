package rpcerr

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"

	"connectrpc.com/connect"
)

// HTTPStatus is the Connect protocol's code → HTTP status table
// (connectrpc.com/docs/protocol, "Error codes"), used by rayd's plain HTTP
// endpoints so that one cause gets one status on every path.
func HTTPStatus(c connect.Code) int {
	switch c {
	case connect.CodeCanceled:
		return 499
	case connect.CodeInvalidArgument, connect.CodeFailedPrecondition, connect.CodeOutOfRange:
		return http.StatusBadRequest
	case connect.CodeDeadlineExceeded:
		return http.StatusGatewayTimeout
	case connect.CodeNotFound:
		return http.StatusNotFound
	case connect.CodeAlreadyExists, connect.CodeAborted:
		return http.StatusConflict
	case connect.CodePermissionDenied:
		return http.StatusForbidden
	case connect.CodeResourceExhausted:
		return http.StatusTooManyRequests
	case connect.CodeUnimplemented:
		return http.StatusNotImplemented
	case connect.CodeUnavailable:
		return http.StatusServiceUnavailable
	case connect.CodeUnauthenticated:
		return http.StatusUnauthorized
	default:
		return http.StatusInternalServerError
	}
}

// HTTPError is the JSON body of an error answer of the plain HTTP
// endpoints: the Connect code ("not_found"), the fixed message, and the
// ErrorInfo reason by its enum name ("ERROR_REASON_NOT_FOUND").
type HTTPError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Reason  string `json:"reason"`
}

// WriteHTTP answers err (mapped like From) as an HTTPError with the
// status of its code.
func WriteHTTP(w http.ResponseWriter, err error) { WriteHTTPStatus(w, 0, err) }

// WriteHTTPStatus is WriteHTTP with an explicit status (0 = the code's),
// for answers HTTP has its own status for (405 Method Not Allowed).
func WriteHTTPStatus(w http.ResponseWriter, status int, err error) {
	reason, msg := Classify(err)
	code := CodeOf(reason)
	var ce *connect.Error
	if errors.As(err, &ce) {
		code = ce.Code()
	}
	b, _ := json.Marshal(HTTPError{Code: code.String(), Message: msg, Reason: reason.String()})
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(b)))
	h.Set("X-Content-Type-Options", "nosniff")
	if status == 0 {
		status = HTTPStatus(code)
	}
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

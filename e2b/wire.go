package e2b

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	rayito "github.com/rayito-dev/rayito/sdk"
)

// E2B's JSON shapes (the camelCase names its SDKs read).

type sandboxOut struct {
	SandboxID          string `json:"sandboxID"`
	TemplateID         string `json:"templateID"`
	ClientID           string `json:"clientID"`
	EnvdVersion        string `json:"envdVersion"`
	EnvdAccessToken    string `json:"envdAccessToken,omitempty"`
	TrafficAccessToken string `json:"trafficAccessToken,omitempty"`
	Domain             string `json:"domain,omitempty"`
}

type listedOut struct {
	SandboxID   string            `json:"sandboxID"`
	TemplateID  string            `json:"templateID"`
	ClientID    string            `json:"clientID"`
	Metadata    map[string]string `json:"metadata"`
	StartedAt   string            `json:"startedAt"`
	EndAt       string            `json:"endAt"`
	State       string            `json:"state"`
	CPUCount    int               `json:"cpuCount"`
	MemoryMB    int               `json:"memoryMB"`
	DiskSizeMB  int               `json:"diskSizeMB"`
	EnvdVersion string            `json:"envdVersion"`
}

type detailOut struct {
	listedOut
	AllowInternetAccess *bool        `json:"allowInternetAccess,omitempty"`
	EnvdAccessToken     string       `json:"envdAccessToken,omitempty"`
	Domain              string       `json:"domain,omitempty"`
	Lifecycle           lifecycleOut `json:"lifecycle"`
	Network             *networkOut  `json:"network,omitempty"`
}

type lifecycleOut struct {
	OnTimeout  string `json:"onTimeout"`
	AutoResume bool   `json:"autoResume"`
}

type networkOut struct {
	AllowOut           []string        `json:"allowOut,omitempty"`
	DenyOut            []string        `json:"denyOut,omitempty"`
	AllowPublicTraffic *bool           `json:"allowPublicTraffic,omitempty"`
	EgressProxy        *egressProxyOut `json:"egressProxy,omitempty"`
}

type egressProxyOut struct {
	Address  string `json:"address"`
	Username string `json:"username,omitempty"`
}

type metricOut struct {
	Timestamp     string  `json:"timestamp"`
	TimestampUnix int64   `json:"timestampUnix"`
	CPUCount      int     `json:"cpuCount"`
	CPUUsedPct    float64 `json:"cpuUsedPct"`
	MemUsed       uint64  `json:"memUsed"`
	MemTotal      uint64  `json:"memTotal"`
	MemCache      uint64  `json:"memCache"`
	DiskUsed      uint64  `json:"diskUsed"`
	DiskTotal     uint64  `json:"diskTotal"`
}

// Requests.

type createReq struct {
	TemplateID          *string           `json:"templateID"`
	Timeout             *int64            `json:"timeout"`
	Secure              *bool             `json:"secure"`
	AllowInternetAccess *bool             `json:"allow_internet_access"`
	Metadata            map[string]string `json:"metadata"`
	EnvVars             map[string]string `json:"envVars"`
	Network             *networkReq       `json:"network"`
	AutoPause           *bool             `json:"autoPause"`
	AutoPauseMemory     *bool             `json:"autoPauseMemory"`
	AutoResume          *autoResumeReq    `json:"autoResume"`
	IAM                 json.RawMessage   `json:"iam"`
	MCP                 json.RawMessage   `json:"mcp"`
	VolumeMounts        json.RawMessage   `json:"volumeMounts"`
}

type autoResumeReq struct {
	Enabled bool `json:"enabled"`
}

type networkReq struct {
	AllowOut           []string        `json:"allowOut"`
	DenyOut            []string        `json:"denyOut"`
	Rules              json.RawMessage `json:"rules"`
	EgressProxy        *egressProxyReq `json:"egressProxy"`
	AllowPublicTraffic *bool           `json:"allowPublicTraffic"`
	MaskRequestHost    *string         `json:"maskRequestHost"`
	HTTPSPorts         json.RawMessage `json:"httpsPorts"`
}

type egressProxyReq struct {
	Address  string `json:"address"`
	Username string `json:"username"`
	Password string `json:"password"`
}

type connectReq struct {
	Timeout *int64 `json:"timeout"`
	Memory  *bool  `json:"memory"`
}

type timeoutReq struct {
	Timeout *int64 `json:"timeout"`
}

type refreshReq struct {
	Duration *int64 `json:"duration"`
}

type pauseReq struct {
	Memory *bool `json:"memory"`
}

type updateNetworkReq struct {
	AllowInternetAccess *bool           `json:"allow_internet_access"`
	AllowOut            []string        `json:"allowOut"`
	DenyOut             []string        `json:"denyOut"`
	Rules               json.RawMessage `json:"rules"`
	EgressProxy         *egressProxyReq `json:"egressProxy"`
}

// present says a raw field was given with a value that asks for
// something (null, {}, [] and false ask for nothing).
func present(raw json.RawMessage) bool {
	switch strings.TrimSpace(string(raw)) {
	case "", "null", "{}", "[]", "false":
		return false
	}
	return true
}

// errorBody is E2B's error shape.
type errorBody struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

func writeError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, errorBody{Code: code, Message: msg})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		code, b = http.StatusInternalServerError, []byte(`{"code":500,"message":"internal error"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", fmt.Sprint(len(b)))
	w.WriteHeader(code)
	_, _ = w.Write(b)
}

// noContent is a bodyless success (the SDKs parse JSON otherwise).
func noContent(w http.ResponseWriter) { w.WriteHeader(http.StatusNoContent) }

// decode reads a JSON body into v: an empty body is {}; unknown fields,
// bad JSON, trailing data and bodies past MaxBodyBytes are refused.
func decode(r *http.Request, v any) (int, string) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return http.StatusRequestEntityTooLarge, fmt.Sprintf("request body larger than %d bytes", MaxBodyBytes)
		}
		return http.StatusBadRequest, "cannot read the request body"
	}
	if strings.TrimSpace(string(body)) == "" {
		body = []byte("{}")
	}
	dec := json.NewDecoder(strings.NewReader(string(body)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		msg := err.Error()
		if f, ok := strings.CutPrefix(msg, "json: unknown field "); ok {
			return http.StatusBadRequest, "field " + f + " is not supported by Rayito's E2B gateway"
		}
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return http.StatusBadRequest, fmt.Sprintf("invalid request body: field %q must be %s", te.Field, te.Type)
		}
		return http.StatusBadRequest, "invalid JSON request body"
	}
	if dec.More() {
		return http.StatusBadRequest, "invalid JSON request body: trailing data"
	}
	return 0, ""
}

func rfc3339(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}

// e2bState is E2B's state of a Rayito state ("" for one E2B has no name
// for: pending, ended).
func e2bState(st string) string {
	switch st {
	case "RUNNING", "PENDING":
		return "running"
	case "SUSPENDING", "SUSPENDED":
		return "paused"
	}
	return ""
}

func isPaused(st string) bool { return st == "SUSPENDING" || st == "SUSPENDED" }
func isEnded(st string) bool  { return st == "TERMINATING" || st == "TERMINATED" }

// statusOf maps an error of the rayito SDK onto an HTTP status and a
// message for E2B's error body. Rayito's messages never carry tokens,
// envs or payloads.
func statusOf(id string, err error) (int, string) {
	var ended *rayito.SandboxEndedError
	var capErr *rayito.CapExceededError
	switch {
	case errors.As(err, &ended), errors.Is(err, rayito.ErrNotFound), errors.Is(err, errNotRunning):
		return http.StatusNotFound, fmt.Sprintf("sandbox %q not found", id)
	case errors.As(err, &capErr):
		return http.StatusBadRequest, fmt.Sprintf("timeout too long: at most %d seconds for this sandbox", int(MaxTimeout/time.Second))
	case errors.Is(err, rayito.ErrLifecycleUnmanaged):
		return http.StatusBadRequest, fmt.Sprintf("sandbox %q has no managed timeout (it was not created through the E2B gateway)", id)
	case errors.Is(err, rayito.ErrNoAccessToken):
		return http.StatusForbidden, fmt.Sprintf("the gateway holds no access token for sandbox %q (it was created elsewhere)", id)
	case errors.Is(err, rayito.ErrInvalidArgument):
		return http.StatusBadRequest, err.Error()
	case errors.Is(err, rayito.ErrUnimplemented):
		return http.StatusBadRequest, err.Error()
	case errors.Is(err, rayito.ErrResourceExhausted):
		return http.StatusTooManyRequests, "rate limit or quota reached; retry later"
	case errors.Is(err, rayito.ErrPlatformUnavailable):
		return http.StatusServiceUnavailable, "the Rayito platform is unavailable"
	case errors.Is(err, rayito.ErrNotReady), errors.Is(err, rayito.ErrTimeout):
		return http.StatusGatewayTimeout, "the sandbox did not become ready in time"
	case errors.Is(err, rayito.ErrUnauthenticated):
		return http.StatusInternalServerError, "the platform refused the gateway's credentials"
	}
	return http.StatusInternalServerError, "platform error"
}

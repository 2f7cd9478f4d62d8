// Package stackapi is the dashboard stack's Lambda (infra/dashboard.yaml):
// the HTTP handler behind a Function URL with AuthType NONE, and the
// scheduled quota alert.
//
// Every request is answered by Handle in this order, before routing or any
// AWS call: the method and path are checked against the few routes; the
// static page and /config.json are the only answers without a token; every
// other route needs "Authorization: Bearer <Cognito access token>",
// verified offline against the pool's JWKS (no token or a bad one: 401;
// JWKS unreachable: 503, never a pass). A POST must come from the Function
// URL's own Origin with Content-Type application/json. No CORS header is
// ever sent.
//
// Routes: GET /api/v1/sandboxes (ListMicrovms with the function's
// read-only role); POST /api/v1/actions only with AllowActions: the user is
// re-checked in Cognito (enabled, in the group, same sub), one audit row
// per sandbox and action is written with a conditional PutItem before
// acting (a failed write stops the action), then the actions role is
// assumed with the user's sub in the session name; GET /api/v1/cost only
// with EnableCostExplorer: whole months in the last 13, known regions, a
// stack-wide budget of paid queries per UTC day kept with a conditional
// counter (exhausted or unreadable: refused), answers cached 24 h.
//
// Nothing is logged: not the token, headers, bodies, ids or AWS messages.
package stackapi

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"mime"
	"net/http"
	"regexp"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/smithy-go"

	"github.com/rayito-dev/rayito/dashboard/internal/jwt"
	"github.com/rayito-dev/rayito/dashboard/internal/theme"
	"github.com/rayito-dev/rayito/dashboard/internal/web"
	"github.com/rayito-dev/rayito/proto/microvmsapi"
	"github.com/rayito-dev/rayito/sdk/microvms"
)

// Limits.
const (
	MaxBodyBytes = 64 << 10
	MaxIDs       = 20
)

// CSP is the policy of every answer: the page is one module and one sheet
// of the same origin; it talks to the Hosted UI only by navigation and its
// token endpoint.
const CSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self' https://*.amazoncognito.com; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// Verifier verifies an access token ([jwt.Verifier]).
type Verifier interface {
	Verify(ctx context.Context, token string) (*jwt.Claims, error)
}

// Lister lists microVMs with the function's read-only role.
type Lister interface {
	ListMicrovms(ctx context.Context, in microvms.ListInput) (*microvmsapi.ListMicrovmsOutput, error)
}

// Actor acts on microVMs with the actions role.
type Actor interface {
	TerminateMicrovm(ctx context.Context, id string) error
	SuspendMicrovm(ctx context.Context, id string) error
	ResumeMicrovm(ctx context.Context, id string) error
}

// AssumeActions assumes the actions role with sessionName and returns a
// client acting with it.
type AssumeActions func(ctx context.Context, sessionName string) (Actor, error)

// Config is the handler's configuration (the stack's parameters).
type Config struct {
	// Origin is the Function URL's own origin (https://<id>.lambda-url.<region>.on.aws);
	// "" takes it from the request context's domain name (the template
	// cannot pass the URL to its own function without a cycle).
	Origin string
	// HostedUIDomain and ClientID are served in /config.json (both public).
	HostedUIDomain string
	ClientID       string
	Region         string
	PoolID         string

	AllowActions       bool
	EnableCostExplorer bool
	// Group is the Cognito group whose members may act.
	Group string
	// Theme is a validated theme (the zero value serves the factory one).
	Theme theme.Theme
	// Logo is a validated SVG (LoadLogo), or nil: none.
	Logo []byte
}

// Handler answers Function URL requests.
type Handler struct {
	Config    Config
	Verifier  Verifier
	Lister    Lister
	Directory Directory     // Cognito, re-checked before actions
	Audit     *Audit        // the audit table
	Assume    AssumeActions // nil without AllowActions
	Cost      *Cost         // nil without EnableCostExplorer
	Now       func() time.Time
}

// Error codes, each with a fixed message.
var messages = map[string]string{
	"unauthenticated":       "a valid Cognito access token is required",
	"identity_unavailable":  "the identity provider cannot be reached; try again",
	"forbidden_origin":      "requests from other origins are refused",
	"unsupported_media":     "a POST needs Content-Type: application/json",
	"payload_too_large":     "the request body is larger than 64 KiB",
	"method_not_allowed":    "method not allowed",
	"not_found":             "not found",
	"invalid_request":       "the request is not valid JSON of the expected shape",
	"invalid_id":            "a sandbox id is not valid",
	"too_many_ids":          "too many sandbox ids in one request",
	"confirm_required":      "an action needs \"confirm\": true",
	"actions_disabled":      "actions are off in this stack (AllowActions=false)",
	"not_allowed":           "this user is not enabled or not in the dashboard's group",
	"directory_unavailable": "the user could not be checked in Cognito: no action was taken",
	"audit_failed":          "the audit row could not be written: no action was taken",
	"cost_disabled":         "billed cost is off in this stack (EnableCostExplorer=false)",
	"invalid_window":        "the window must be whole months (YYYY-MM) within the last 13 months",
	"invalid_region":        "unknown region",
	"budget_exhausted":      "today's budget of paid cost queries is spent (or could not be checked)",
	"upstream_error":        "AWS refused or failed the request",
	"unimplemented":         "not built yet",
}

// Handle answers one Function URL request.
func (h *Handler) Handle(ctx context.Context, req events.LambdaFunctionURLRequest) (events.LambdaFunctionURLResponse, error) {
	method := req.RequestContext.HTTP.Method
	path := req.RequestContext.HTTP.Path
	if path == "" {
		path = req.RawPath
	}
	// Public answers: the page, its assets and /config.json.
	if a, ok := assets[path]; ok {
		if method != http.MethodGet && method != http.MethodHead {
			return h.fail(http.StatusMethodNotAllowed, "method_not_allowed"), nil
		}
		return answer(http.StatusOK, a.ctype, a.body), nil
	}
	if path == "/theme.css" {
		if method != http.MethodGet && method != http.MethodHead {
			return h.fail(http.StatusMethodNotAllowed, "method_not_allowed"), nil
		}
		return answer(http.StatusOK, "text/css; charset=utf-8", string(h.theme().CSS())), nil
	}
	if path == "/logo.svg" && h.Config.Logo != nil {
		if method != http.MethodGet && method != http.MethodHead {
			return h.fail(http.StatusMethodNotAllowed, "method_not_allowed"), nil
		}
		r := answer(http.StatusOK, "image/svg+xml", string(h.Config.Logo))
		r.Headers["Content-Security-Policy"] = LogoCSP
		return r, nil
	}
	if path == "/config.json" {
		if method != http.MethodGet {
			return h.fail(http.StatusMethodNotAllowed, "method_not_allowed"), nil
		}
		return h.json(http.StatusOK, map[string]any{
			"hostedUiDomain": h.Config.HostedUIDomain, "clientId": h.Config.ClientID, "region": h.Config.Region,
			"title": h.theme().Title, "logo": h.Config.Logo != nil,
		}), nil
	}
	if !strings.HasPrefix(path, "/api/v1/") {
		return h.fail(http.StatusNotFound, "not_found"), nil
	}
	// Identity before anything else.
	token, ok := bearer(req.Headers)
	if !ok {
		return h.fail(http.StatusUnauthorized, "unauthenticated"), nil
	}
	claims, err := h.Verifier.Verify(ctx, token)
	switch {
	case errors.Is(err, jwt.ErrJWKSUnavailable):
		return h.fail(http.StatusServiceUnavailable, "identity_unavailable"), nil
	case err != nil:
		return h.fail(http.StatusUnauthorized, "unauthenticated"), nil
	}
	if method == http.MethodPost {
		if o := h.origin(req); o == "" || header(req.Headers, "origin") != o {
			return h.fail(http.StatusForbidden, "forbidden_origin"), nil
		}
		mt, _, err := mime.ParseMediaType(header(req.Headers, "content-type"))
		if err != nil || mt != "application/json" {
			return h.fail(http.StatusUnsupportedMediaType, "unsupported_media"), nil
		}
	}
	switch path {
	case "/api/v1/me":
		if method != http.MethodGet {
			return h.fail(http.StatusMethodNotAllowed, "method_not_allowed"), nil
		}
		// What this stack lets a signed-in user do (not public).
		return h.json(http.StatusOK, map[string]any{"username": claims.Username, "allowActions": h.Config.AllowActions, "costExplorer": h.Config.EnableCostExplorer}), nil
	case "/api/v1/sandboxes":
		if method != http.MethodGet {
			return h.fail(http.StatusMethodNotAllowed, "method_not_allowed"), nil
		}
		return h.sandboxes(ctx), nil
	case "/api/v1/actions":
		if method != http.MethodPost {
			return h.fail(http.StatusMethodNotAllowed, "method_not_allowed"), nil
		}
		body, ok := requestBody(req)
		if !ok {
			return h.fail(http.StatusRequestEntityTooLarge, "payload_too_large"), nil
		}
		return h.actions(ctx, claims, req, body), nil
	case "/api/v1/cost":
		if method != http.MethodGet {
			return h.fail(http.StatusMethodNotAllowed, "method_not_allowed"), nil
		}
		return h.cost(ctx, req.QueryStringParameters), nil
	}
	return h.fail(http.StatusNotFound, "not_found"), nil
}

// origin is the Function URL's own origin: Config.Origin when set, else
// the domain Lambda puts in the request context (not the caller's Host),
// when it is a Function URL's.
func (h *Handler) origin(req events.LambdaFunctionURLRequest) string {
	if h.Config.Origin != "" {
		return h.Config.Origin
	}
	o := "https://" + req.RequestContext.DomainName
	if !originRE.MatchString(o) {
		return ""
	}
	return o
}

// theme is the configured theme if it validates, else the factory one.
func (h *Handler) theme() theme.Theme {
	if h.Config.Theme.Validate() == nil {
		return h.Config.Theme
	}
	return theme.Default()
}

// bearer reads "Authorization: Bearer <token>".
func bearer(hs map[string]string) (string, bool) {
	v := header(hs, "authorization")
	scheme, tok, ok := strings.Cut(v, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || tok == "" || len(tok) > jwt.MaxTokenBytes {
		return "", false
	}
	return tok, true
}

// header reads a header case-insensitively (Function URLs lower-case them).
func header(hs map[string]string, name string) string {
	if v, ok := hs[name]; ok {
		return v
	}
	for k, v := range hs {
		if strings.EqualFold(k, name) {
			return v
		}
	}
	return ""
}

func requestBody(req events.LambdaFunctionURLRequest) ([]byte, bool) {
	if !req.IsBase64Encoded {
		return []byte(req.Body), len(req.Body) <= MaxBodyBytes
	}
	if base64.StdEncoding.DecodedLen(len(req.Body)) > MaxBodyBytes+3 {
		return nil, false
	}
	b, err := base64.StdEncoding.DecodeString(req.Body)
	if err != nil {
		return []byte{0}, true // not JSON: invalid_request
	}
	return b, len(b) <= MaxBodyBytes
}

func securityHeaders() map[string]string {
	h := web.SecurityHeaders(CSP)
	h["Strict-Transport-Security"] = "max-age=31536000" // a Function URL is https only
	return h
}

func answer(status int, ctype, body string) events.LambdaFunctionURLResponse {
	h := securityHeaders()
	h["Content-Type"] = ctype
	return events.LambdaFunctionURLResponse{StatusCode: status, Headers: h, Body: body}
}

func (h *Handler) json(status int, v any) events.LambdaFunctionURLResponse {
	b, err := json.Marshal(v)
	if err != nil {
		return h.fail(http.StatusInternalServerError, "upstream_error")
	}
	return answer(status, "application/json", string(b))
}

func (h *Handler) fail(status int, code string) events.LambdaFunctionURLResponse {
	b, _ := json.Marshal(map[string]string{"code": code, "message": messages[code]})
	return answer(status, "application/json", string(b))
}

// awsCode is the AWS error code, never its message.
func awsCode(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	var me *microvms.APIError
	if errors.As(err, &me) {
		return me.Exception
	}
	return ""
}

func (h *Handler) upstream(err error) events.LambdaFunctionURLResponse {
	body := map[string]string{"code": "upstream_error", "message": messages["upstream_error"]}
	if c := awsCode(err); c != "" && len(c) <= 64 && codeRE.MatchString(c) {
		body["awsCode"] = c
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return h.json(http.StatusGatewayTimeout, body)
	}
	return h.json(http.StatusBadGateway, body)
}

var codeRE = regexp.MustCompile(`^[A-Za-z0-9.]+$`)

func (h *Handler) now() time.Time {
	if h.Now != nil {
		return h.Now()
	}
	return time.Now()
}

// sandboxes lists the account's microVMs in the region (up to 10 pages).
func (h *Handler) sandboxes(ctx context.Context) events.LambdaFunctionURLResponse {
	type row struct {
		ID           string     `json:"id"`
		State        string     `json:"state"`
		ImageArn     string     `json:"imageArn,omitempty"`
		ImageVersion string     `json:"imageVersion,omitempty"`
		StartedAt    *time.Time `json:"startedAt,omitempty"`
	}
	out := []row{}
	in := microvms.ListInput{MaxResults: microvmsapi.MaxListResults}
	for range 10 {
		page, err := h.Lister.ListMicrovms(ctx, in)
		if err != nil {
			return h.upstream(err)
		}
		for _, m := range page.Items {
			out = append(out, row{ID: m.MicrovmID, State: string(m.State), ImageArn: m.ImageArn, ImageVersion: m.ImageVersion, StartedAt: m.StartedAt})
		}
		if page.NextToken == "" {
			break
		}
		in.NextToken = page.NextToken
	}
	return h.json(http.StatusOK, map[string]any{"sandboxes": out})
}

// validID: a sandbox id as the SDK accepts one.
func validID(id string) bool { return microvmsapi.ValidSandboxID(id) }

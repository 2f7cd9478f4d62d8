package stackapi

import (
	"context"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	cip "github.com/aws/aws-sdk-go-v2/service/cognitoidentityprovider"
	ciptypes "github.com/aws/aws-sdk-go-v2/service/cognitoidentityprovider/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/rayito-dev/rayito/dashboard/internal/jwt"
	"github.com/rayito-dev/rayito/proto/microvmsapi"
	"github.com/rayito-dev/rayito/sdk/microvms"
)

const (
	tRegion = "eu-west-1"
	tPool   = "eu-west-1_TestPool1"
	tClient = "3n4b5urk1ft4fl3mg5e62d9ado"
	tOrigin = "https://abcdefghijklmnop.lambda-url.eu-west-1.on.aws"
	tSub    = "8c1f0f0e-0000-4000-8000-000000000001"
	tGroup  = "rayito-dashboard"
)

var (
	keyOnce sync.Once
	tKey    *rsa.PrivateKey
	tNow    = time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
)

func b64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

// jwksOnLoopback serves the test key's JWKS; down makes it answer 503.
func jwksOnLoopback(t *testing.T) (*httptest.Server, *atomic.Bool) {
	keyOnce.Do(func() {
		var err error
		if tKey, err = rsa.GenerateKey(rand.Reader, 2048); err != nil {
			panic(err)
		}
	})
	var down atomic.Bool
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if down.Load() {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		json.NewEncoder(w).Encode(map[string]any{"keys": []map[string]string{{
			"kty": "RSA", "kid": "k1", "use": "sig", "alg": "RS256", "n": b64(tKey.N.Bytes()), "e": b64(big.NewInt(int64(tKey.E)).Bytes()),
		}}})
	}))
	t.Cleanup(s.Close)
	return s, &down
}

func token(t *testing.T, mod func(map[string]any)) string {
	t.Helper()
	c := map[string]any{
		"sub": tSub, "iss": "https://cognito-idp." + tRegion + ".amazonaws.com/" + tPool, "token_use": "access",
		"client_id": tClient, "username": "ana", "exp": tNow.Add(time.Hour).Unix(), "iat": tNow.Unix(),
	}
	if mod != nil {
		mod(c)
	}
	h, _ := json.Marshal(map[string]string{"alg": "RS256", "kid": "k1"})
	p, _ := json.Marshal(c)
	in := b64(h) + "." + b64(p)
	sum := sha256.Sum256([]byte(in))
	sig, err := rsa.SignPKCS1v15(rand.Reader, tKey, crypto.SHA256, sum[:])
	if err != nil {
		t.Fatal(err)
	}
	return in + "." + b64(sig)
}

// fakeCP is the MicroVMs control plane (AWS, unreachable here), counting calls.
type fakeCP struct {
	lists, acts atomic.Int64
	mu          sync.Mutex
	acted       []string
}

func (f *fakeCP) ListMicrovms(ctx context.Context, in microvms.ListInput) (*microvmsapi.ListMicrovmsOutput, error) {
	f.lists.Add(1)
	return &microvmsapi.ListMicrovmsOutput{Items: []microvmsapi.MicrovmSummary{{MicrovmID: "mvm-1", State: microvmsapi.StateRunning}, {MicrovmID: "mvm-2", State: microvmsapi.StateSuspended}}}, nil
}

func (f *fakeCP) act(op, id string) error {
	f.acts.Add(1)
	f.mu.Lock()
	f.acted = append(f.acted, op+" "+id)
	f.mu.Unlock()
	return nil
}
func (f *fakeCP) TerminateMicrovm(_ context.Context, id string) error { return f.act("terminate", id) }
func (f *fakeCP) SuspendMicrovm(_ context.Context, id string) error   { return f.act("suspend", id) }
func (f *fakeCP) ResumeMicrovm(_ context.Context, id string) error    { return f.act("resume", id) }

// fakeCognito answers AdminGetUser and AdminListGroupsForUser.
type fakeCognito struct {
	calls    atomic.Int64
	fail     bool
	disabled bool
	groups   []string
	sub      string
}

func (f *fakeCognito) AdminGetUser(ctx context.Context, in *cip.AdminGetUserInput, _ ...func(*cip.Options)) (*cip.AdminGetUserOutput, error) {
	f.calls.Add(1)
	if f.fail {
		return nil, &smithy.OperationError{ServiceID: "Cognito", OperationName: "AdminGetUser", Err: errors.New("dial tcp: i/o timeout")}
	}
	if aws.ToString(in.UserPoolId) != tPool || aws.ToString(in.Username) != "ana" {
		return nil, &smithy.GenericAPIError{Code: "UserNotFoundException"}
	}
	sub := f.sub
	if sub == "" {
		sub = tSub
	}
	return &cip.AdminGetUserOutput{Enabled: !f.disabled, Username: in.Username, UserAttributes: []ciptypes.AttributeType{{Name: aws.String("sub"), Value: aws.String(sub)}}}, nil
}

func (f *fakeCognito) AdminListGroupsForUser(ctx context.Context, in *cip.AdminListGroupsForUserInput, _ ...func(*cip.Options)) (*cip.AdminListGroupsForUserOutput, error) {
	f.calls.Add(1)
	out := &cip.AdminListGroupsForUserOutput{}
	for _, g := range f.groups {
		out.Groups = append(out.Groups, ciptypes.GroupType{GroupName: aws.String(g)})
	}
	return out, nil
}

// countingPut counts PutItem calls and passes them on.
type countingPut struct {
	PutItemAPI
	n atomic.Int64
}

func (c *countingPut) PutItem(ctx context.Context, in *dynamodb.PutItemInput, o ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	c.n.Add(1)
	return c.PutItemAPI.PutItem(ctx, in, o...)
}

type rig struct {
	h       *Handler
	cp      *fakeCP
	cog     *fakeCognito
	assumed []string
	down    *atomic.Bool
}

func newRig(t *testing.T, allow bool, audit *Audit) *rig {
	t.Helper()
	s, down := jwksOnLoopback(t)
	v, err := jwt.New(jwt.Config{Region: tRegion, PoolID: tPool, ClientID: tClient, JWKSURL: s.URL, Now: func() time.Time { return tNow }})
	if err != nil {
		t.Fatal(err)
	}
	r := &rig{cp: &fakeCP{}, cog: &fakeCognito{groups: []string{"other", tGroup}}, down: down}
	r.h = &Handler{
		Config:    Config{Origin: tOrigin, HostedUIDomain: "rayito-x.auth.eu-west-1.amazoncognito.com", ClientID: tClient, Region: tRegion, PoolID: tPool, Group: tGroup, AllowActions: allow},
		Verifier:  v,
		Lister:    r.cp,
		Directory: r.cog,
		Audit:     audit,
		Now:       func() time.Time { return tNow },
	}
	if allow {
		r.h.Assume = func(ctx context.Context, session string) (Actor, error) {
			r.assumed = append(r.assumed, session)
			return r.cp, nil
		}
	}
	return r
}

func request(method, path, tok string, hdr map[string]string, body string) events.LambdaFunctionURLRequest {
	h := map[string]string{}
	if tok != "" {
		h["authorization"] = "Bearer " + tok
	}
	for k, v := range hdr {
		h[k] = v
	}
	var r events.LambdaFunctionURLRequest
	r.RawPath = path
	r.Headers = h
	r.Body = body
	r.RequestContext.RequestID = "req-0001"
	r.RequestContext.HTTP.Method = method
	r.RequestContext.HTTP.Path = path
	r.RequestContext.HTTP.SourceIP = "203.0.113.7"
	return r
}

func post(path, tok, body string) events.LambdaFunctionURLRequest {
	return request(http.MethodPost, path, tok, map[string]string{"origin": tOrigin, "content-type": "application/json"}, body)
}

func do(t *testing.T, h *Handler, r events.LambdaFunctionURLRequest) (int, map[string]any) {
	t.Helper()
	resp, err := h.Handle(context.Background(), r)
	if err != nil {
		t.Fatalf("Handle: %v", err)
	}
	for k := range resp.Headers {
		if strings.HasPrefix(strings.ToLower(k), "access-control-") {
			t.Fatalf("CORS header %s sent", k)
		}
	}
	if resp.Headers["Content-Security-Policy"] != CSP || resp.Headers["X-Content-Type-Options"] != "nosniff" || resp.Headers["Cache-Control"] != "no-store" {
		t.Fatalf("security headers missing: %v", resp.Headers)
	}
	var m map[string]any
	if strings.HasPrefix(resp.Headers["Content-Type"], "application/json") {
		if err := json.Unmarshal([]byte(resp.Body), &m); err != nil {
			t.Fatalf("body %q: %v", resp.Body, err)
		}
	}
	return resp.StatusCode, m
}

func TestIdentityBeforeAnything(t *testing.T) {
	r := newRig(t, true, &Audit{API: failingPut{}, Table: "x"})
	good := token(t, nil)
	cases := []struct {
		name string
		req  events.LambdaFunctionURLRequest
		want int
		code string
	}{
		{"no token", request("GET", "/api/v1/sandboxes", "", nil, ""), 401, "unauthenticated"},
		{"no token on an unknown api path", request("GET", "/api/v1/nope", "", nil, ""), 401, "unauthenticated"},
		{"no token on actions", post("/api/v1/actions", "", `{"action":"kill","ids":["mvm-1"],"confirm":true}`), 401, "unauthenticated"},
		{"basic auth", request("GET", "/api/v1/sandboxes", "", map[string]string{"authorization": "Basic YTpi"}, ""), 401, "unauthenticated"},
		{"garbage token", request("GET", "/api/v1/sandboxes", "abc", nil, ""), 401, "unauthenticated"},
		{"id token", request("GET", "/api/v1/sandboxes", token(t, func(c map[string]any) { c["token_use"] = "id" }), nil, ""), 401, "unauthenticated"},
		{"expired", request("GET", "/api/v1/sandboxes", token(t, func(c map[string]any) { c["exp"] = tNow.Add(-time.Hour).Unix() }), nil, ""), 401, "unauthenticated"},
		{"alg none", request("GET", "/api/v1/sandboxes", b64([]byte(`{"alg":"none","kid":"k1"}`))+"."+strings.Split(good, ".")[1]+".", nil, ""), 401, "unauthenticated"},
		{"POST from another origin", request("POST", "/api/v1/actions", good, map[string]string{"origin": "https://evil.example", "content-type": "application/json"}, `{}`), 403, "forbidden_origin"},
		{"POST without origin", request("POST", "/api/v1/actions", good, map[string]string{"content-type": "application/json"}, `{}`), 403, "forbidden_origin"},
		{"POST as a form", request("POST", "/api/v1/actions", good, map[string]string{"origin": tOrigin, "content-type": "text/plain"}, `{}`), 415, "unsupported_media"},
		{"POST too large", post("/api/v1/actions", good, strings.Repeat(" ", MaxBodyBytes+1)), 413, "payload_too_large"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st, m := do(t, r.h, tc.req)
			if st != tc.want || m["code"] != tc.code {
				t.Fatalf("= %d %v, want %d %s", st, m, tc.want, tc.code)
			}
		})
	}
	if r.cp.lists.Load()+r.cp.acts.Load()+r.cog.calls.Load() != 0 || len(r.assumed) != 0 {
		t.Fatalf("AWS called without identity: lists %d acts %d cognito %d assumed %d", r.cp.lists.Load(), r.cp.acts.Load(), r.cog.calls.Load(), len(r.assumed))
	}
	// Public answers need no token.
	st, m := do(t, r.h, request("GET", "/config.json", "", nil, ""))
	if st != 200 || m["clientId"] != tClient || m["hostedUiDomain"] == "" {
		t.Fatalf("/config.json = %d %v", st, m)
	}
	for k := range m {
		if k != "clientId" && k != "hostedUiDomain" && k != "region" && k != "title" && k != "logo" {
			t.Fatalf("/config.json publishes %q", k)
		}
	}
	if st, m := do(t, r.h, request("GET", "/api/v1/me", "", nil, "")); st != 401 {
		t.Fatalf("/api/v1/me without a token = %d %v", st, m)
	}
	if st, m := do(t, r.h, request("GET", "/api/v1/me", good, nil, "")); st != 200 || m["allowActions"] != true || m["username"] != "ana" {
		t.Fatalf("/api/v1/me = %d %v", st, m)
	}
	if st, _ := do(t, r.h, request("GET", "/", "", nil, "")); st != 200 {
		t.Fatalf("/ = %d", st)
	}
	// The valid token lists.
	st, m = do(t, r.h, request("GET", "/api/v1/sandboxes", good, nil, ""))
	if st != 200 || len(m["sandboxes"].([]any)) != 2 || r.cp.lists.Load() != 1 {
		t.Fatalf("list = %d %v (lists %d)", st, m, r.cp.lists.Load())
	}
	// JWKS unreachable: 503, never a pass, no AWS call.
	r2 := newRig(t, true, nil)
	r2.down.Store(true)
	// Without a configured origin, the request context's Function URL
	// domain is the only origin accepted (never the caller's Host).
	r.h.Config.Origin = ""
	noCtx := post("/api/v1/actions", good, `{"action":"kill","ids":["mvm-1"]}`)
	if st, m := do(t, r.h, noCtx); st != 403 || m["code"] != "forbidden_origin" {
		t.Fatalf("no domain in the context = %d %v", st, m)
	}
	withCtx := noCtx
	withCtx.RequestContext.DomainName = strings.TrimPrefix(tOrigin, "https://")
	if st, m := do(t, r.h, withCtx); st != 400 || m["code"] != "confirm_required" {
		t.Fatalf("the context's domain = %d %v", st, m)
	}
	withCtx.RequestContext.DomainName = "evil.example"
	withCtx.Headers = map[string]string{"authorization": "Bearer " + good, "origin": "https://evil.example", "content-type": "application/json"}
	if st, m := do(t, r.h, withCtx); st != 403 || m["code"] != "forbidden_origin" {
		t.Fatalf("a non Function URL domain = %d %v", st, m)
	}
	if st, m := do(t, r2.h, request("GET", "/api/v1/sandboxes", good, nil, "")); st != 503 || m["code"] != "identity_unavailable" {
		t.Fatalf("JWKS down = %d %v", st, m)
	}
	if r2.cp.lists.Load() != 0 {
		t.Fatal("listed with the JWKS down")
	}
}

type failingPut struct{}

func (failingPut) PutItem(context.Context, *dynamodb.PutItemInput, ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	return nil, errors.New("unreachable")
}

func TestActionsRefused(t *testing.T) {
	body := `{"action":"kill","ids":["mvm-1"],"confirm":true}`
	t.Run("AllowActions off", func(t *testing.T) {
		r := newRig(t, false, &Audit{API: failingPut{}, Table: "x"})
		if st, m := do(t, r.h, post("/api/v1/actions", token(t, nil), body)); st != 403 || m["code"] != "actions_disabled" {
			t.Fatalf("= %d %v", st, m)
		}
		if r.cog.calls.Load() != 0 || r.cp.acts.Load() != 0 {
			t.Fatal("Cognito or the control plane called with actions off")
		}
	})
	for _, tc := range []struct {
		name   string
		mod    func(*fakeCognito)
		status int
		code   string
	}{
		{"Cognito not answering", func(c *fakeCognito) { c.fail = true }, 503, "directory_unavailable"},
		{"user disabled", func(c *fakeCognito) { c.disabled = true }, 403, "not_allowed"},
		{"not in the group", func(c *fakeCognito) { c.groups = []string{"other"} }, 403, "not_allowed"},
		{"username reused by another sub", func(c *fakeCognito) { c.sub = "another-sub" }, 403, "not_allowed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			audit := &countingPut{PutItemAPI: failingPut{}}
			r := newRig(t, true, &Audit{API: audit, Table: "x"})
			tc.mod(r.cog)
			if st, m := do(t, r.h, post("/api/v1/actions", token(t, nil), body)); st != tc.status || m["code"] != tc.code {
				t.Fatalf("= %d %v", st, m)
			}
			if r.cp.acts.Load() != 0 || len(r.assumed) != 0 || audit.n.Load() != 0 {
				t.Fatalf("acted %d, assumed %d, audited %d after a failed re-check", r.cp.acts.Load(), len(r.assumed), audit.n.Load())
			}
		})
	}
	for _, tc := range []struct{ name, body, code string }{
		{"no confirm", `{"action":"kill","ids":["mvm-1"]}`, "confirm_required"},
		{"unknown action", `{"action":"delete","ids":["mvm-1"],"confirm":true}`, "invalid_request"},
		{"unknown field", `{"action":"kill","ids":["mvm-1"],"confirm":true,"x":1}`, "invalid_request"},
		{"bad id", `{"action":"kill","ids":["../x"],"confirm":true}`, "invalid_id"},
		{"duplicate id", `{"action":"kill","ids":["a","a"],"confirm":true}`, "invalid_id"},
		{"too many", `{"action":"kill","ids":[` + strings.Repeat(`"a",`, MaxIDs) + `"b"],"confirm":true}`, "too_many_ids"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, true, &Audit{API: failingPut{}, Table: "x"})
			if st, m := do(t, r.h, post("/api/v1/actions", token(t, nil), tc.body)); st != 400 || m["code"] != tc.code {
				t.Fatalf("= %d %v", st, m)
			}
			if r.cp.acts.Load() != 0 || r.cog.calls.Load() != 0 {
				t.Fatal("acted or asked Cognito on a bad request")
			}
		})
	}
}

// TestAuditBeforeAction runs against dynalite: with the audit table
// missing the action never runs; with it, one row per sandbox is written
// before acting, with who, what, when, request id and source IP, and a
// replayed request id cannot overwrite a row.
func TestAuditBeforeAction(t *testing.T) {
	db := startDynalite(t)
	body := `{"action":"pause","ids":["mvm-1","mvm-2"],"confirm":true}`

	failing := newRig(t, true, &Audit{API: db, Table: "rayito-dashboard-audit-missing"})
	if st, m := do(t, failing.h, post("/api/v1/actions", token(t, nil), body)); st != 503 || m["code"] != "audit_failed" {
		t.Fatalf("failing table = %d %v", st, m)
	}
	if failing.cp.acts.Load() != 0 || len(failing.assumed) != 0 {
		t.Fatalf("acted %d times (assumed %d) although the audit row was not written", failing.cp.acts.Load(), len(failing.assumed))
	}

	createTable(t, db, "rayito-dashboard-audit")
	r := newRig(t, true, &Audit{API: db, Table: "rayito-dashboard-audit"})
	var auditedBeforeAct atomic.Bool
	r.h.Assume = func(ctx context.Context, session string) (Actor, error) {
		r.assumed = append(r.assumed, session)
		out, err := db.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String("rayito-dashboard-audit")})
		auditedBeforeAct.Store(err == nil && out.Count == 2)
		return r.cp, nil
	}
	st, m := do(t, r.h, post("/api/v1/actions", token(t, nil), body))
	if st != 200 {
		t.Fatalf("= %d %v", st, m)
	}
	if !auditedBeforeAct.Load() {
		t.Fatal("the rows were not in the table when the role was assumed")
	}
	if len(r.assumed) != 1 || r.assumed[0] != "rayito-dash-"+tSub {
		t.Fatalf("session names %v", r.assumed)
	}
	if got := strings.Join(r.cp.acted, ","); got != "suspend mvm-1,suspend mvm-2" {
		t.Fatalf("acted %q", got)
	}
	out, err := db.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: aws.String("rayito-dashboard-audit"), Key: map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: "req-0001#mvm-2#pause"}}})
	if err != nil || out.Item == nil {
		t.Fatalf("row: %v %v", out, err)
	}
	want := map[string]string{"sub": tSub, "action": "pause", "sandbox_id": "mvm-2", "request_id": "req-0001", "source_ip": "203.0.113.7", "at": tNow.Format(time.RFC3339Nano)}
	for k, v := range want {
		if s, _ := out.Item[k].(*types.AttributeValueMemberS); s == nil || s.Value != v {
			t.Errorf("row %s = %v, want %s", k, out.Item[k], v)
		}
	}
	// The same request id again: the conditional write refuses, nothing runs.
	before := r.cp.acts.Load()
	if st, m := do(t, r.h, post("/api/v1/actions", token(t, nil), body)); st != 503 || m["code"] != "audit_failed" {
		t.Fatalf("replay = %d %v", st, m)
	}
	if r.cp.acts.Load() != before {
		t.Fatal("a replayed request acted")
	}
}

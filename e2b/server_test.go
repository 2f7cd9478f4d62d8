package e2b

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

const testKey = "e2b_0123456789abcdef0123456789abcdef01234567"

type env struct {
	t    *testing.T
	f    *fakePlatform
	srv  *Server
	http *httptest.Server
}

func newEnv(t *testing.T, mod ...func(*Options)) *env {
	t.Helper()
	f := newFake(t)
	opts := Options{APIKeyHashes: [][32]byte{HashAPIKey(testKey)}}
	for _, m := range mod {
		m(&opts)
	}
	srv, err := newServer(context.Background(), opts, f)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(func() { hs.Close(); srv.Close() })
	return &env{t: t, f: f, srv: srv, http: hs}
}

type resp struct {
	code   int
	header http.Header
	body   []byte
}

func (r resp) json(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("body %q: %v", r.body, err)
	}
}

// errBody checks an E2B error body with code and a message containing
// want.
func (r resp) errBody(t *testing.T, code int, want string) {
	t.Helper()
	if r.code != code {
		t.Fatalf("status %d, want %d (%s)", r.code, code, r.body)
	}
	var e errorBody
	r.json(t, &e)
	if e.Code != code || !strings.Contains(e.Message, want) {
		t.Fatalf("error body %+v, want code %d and %q", e, code, want)
	}
}

// goneBody checks the router's 502 for a sandbox that does not run:
// E2B's proxy body (its fixed message, the sandbox id, the code) and the
// gateway's reason containing why.
func (r resp) goneBody(t *testing.T, id, why string) {
	t.Helper()
	if r.code != http.StatusBadGateway {
		t.Fatalf("status %d, want 502 (%s)", r.code, r.body)
	}
	var e routeErrorBody
	r.json(t, &e)
	if e.Code != 502 || e.Message != "The sandbox was not found" || e.SandboxID != id || !strings.Contains(e.Reason, why) {
		t.Fatalf("error body %+v, want E2B's not-found body for %q and a reason with %q", e, id, why)
	}
}

func (e *env) do(method, path string, body any, hdr ...string) resp {
	e.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		j, _ := json.Marshal(b)
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, e.http.URL+path, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("X-API-KEY", testKey)
	for i := 0; i+1 < len(hdr); i += 2 {
		if hdr[i] == "Host" {
			req.Host = hdr[i+1]
			continue
		}
		if hdr[i+1] == "" {
			req.Header.Del(hdr[i])
			continue
		}
		req.Header.Set(hdr[i], hdr[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return resp{res.StatusCode, res.Header, b}
}

func (e *env) create(body any) sandboxOut {
	e.t.Helper()
	r := e.do("POST", "/v2/sandboxes", body)
	if r.code != http.StatusCreated {
		e.t.Fatalf("create: %d %s", r.code, r.body)
	}
	var out sandboxOut
	r.json(e.t, &out)
	return out
}

func TestNewRefusesNoKeys(t *testing.T) {
	if _, err := New(context.Background(), Options{}); err == nil {
		t.Fatal("New accepted no keys")
	}
}

func TestNewAPIKey(t *testing.T) {
	k, err := NewAPIKey()
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^e2b_[0-9a-f]{40}$`).MatchString(k) {
		t.Fatalf("key %q", k)
	}
	if HashAPIKey(k) == HashAPIKey(testKey) {
		t.Fatal("hash collision")
	}
}

func TestAuth(t *testing.T) {
	e := newEnv(t)
	for _, key := range []string{"", "e2b_wrong", strings.ToUpper(testKey)} {
		r := e.do("GET", "/v2/sandboxes", nil, "X-API-KEY", key)
		r.errBody(t, http.StatusUnauthorized, "X-API-KEY")
	}
	// Unsupported and unknown routes are behind the key too.
	e.do("POST", "/sandboxes/x/fork", nil, "X-API-KEY", "").errBody(t, http.StatusUnauthorized, "X-API-KEY")
	e.do("GET", "/nope", nil, "X-API-KEY", "").errBody(t, http.StatusUnauthorized, "X-API-KEY")
	if r := e.do("GET", "/v2/sandboxes", nil); r.code != http.StatusOK {
		t.Fatalf("valid key: %d %s", r.code, r.body)
	}
	if r := e.do("GET", "/health", nil, "X-API-KEY", ""); r.code != http.StatusOK {
		t.Fatalf("health: %d", r.code)
	}
}

func TestLifecycle(t *testing.T) {
	e := newEnv(t)
	sb := e.create(map[string]any{"templateID": "base", "timeout": 120, "metadata": map[string]string{"a": "b c", "k": "1"},
		"envVars": map[string]string{"E": "v"}, "secure": true, "allow_internet_access": true})
	if sb.SandboxID == "" || sb.TemplateID != "base" || sb.ClientID != "rayito" || sb.EnvdVersion != EnvdVersion || sb.EnvdAccessToken == "" || sb.TrafficAccessToken == "" {
		t.Fatalf("create: %+v", sb)
	}
	spec := e.f.specs[0]
	if spec.Timeout != 120*time.Second || spec.OnTimeout != "kill" || spec.Envs["E"] != "v" || spec.Metadata["a"] != "b c" || spec.Metadata[labelKey] == "" || spec.Network != nil || spec.DenyInternet {
		t.Fatalf("spec: %+v", spec)
	}
	if sb.TrafficAccessToken == sb.EnvdAccessToken {
		t.Fatal("traffic token is the access token")
	}
	second := e.create(map[string]any{"metadata": map[string]string{"a": "other"}})
	if second.TemplateID != "base" || e.f.specs[1].Timeout != DefaultTimeout {
		t.Fatalf("defaults: %+v %+v", second, e.f.specs[1])
	}

	// getInfo
	var d map[string]any
	r := e.do("GET", "/sandboxes/"+sb.SandboxID, nil)
	r.json(t, &d)
	if r.code != 200 || d["state"] != "running" || d["templateID"] != "base" || d["cpuCount"].(float64) != 2 || d["memoryMB"].(float64) != 512 ||
		d["diskSizeMB"].(float64) != 1024 || d["metadata"].(map[string]any)["a"] != "b c" || d["metadata"].(map[string]any)[labelKey] != nil ||
		d["lifecycle"].(map[string]any)["onTimeout"] != "kill" || d["envdAccessToken"] != sb.EnvdAccessToken {
		t.Fatalf("getInfo: %d %s", r.code, r.body)
	}
	if _, err := time.Parse(time.RFC3339, d["startedAt"].(string)); err != nil {
		t.Fatal(err)
	}

	// list: metadata filter in E2B's double encoding, state, paging
	filter := url.Values{}
	filter.Set(url.QueryEscape("a"), url.QueryEscape("b c"))
	var ls []listedOut
	r = e.do("GET", "/v2/sandboxes?metadata="+url.QueryEscape(filter.Encode()), nil)
	r.json(t, &ls)
	if len(ls) != 1 || ls[0].SandboxID != sb.SandboxID || r.header.Get("X-Next-Token") != "" {
		t.Fatalf("filtered list: %s", r.body)
	}
	r = e.do("GET", "/v2/sandboxes?limit=1", nil)
	r.json(t, &ls)
	next := r.header.Get("X-Next-Token")
	if len(ls) != 1 || ls[0].SandboxID != second.SandboxID || next == "" {
		t.Fatalf("page 1: %s %q", r.body, next)
	}
	r = e.do("GET", "/v2/sandboxes?limit=1&nextToken="+url.QueryEscape(next), nil)
	r.json(t, &ls)
	if len(ls) != 1 || ls[0].SandboxID != sb.SandboxID || r.header.Get("X-Next-Token") != "" {
		t.Fatalf("page 2: %s %q", r.body, r.header.Get("X-Next-Token"))
	}
	e.do("GET", "/v2/sandboxes?limit=0", nil).errBody(t, 400, "limit")
	e.do("GET", "/v2/sandboxes?nextToken=!!!", nil).errBody(t, 400, "")
	e.do("GET", "/v2/sandboxes?state=dead", nil).errBody(t, 400, "state")

	// setTimeout
	if r := e.do("POST", "/sandboxes/"+sb.SandboxID+"/timeout", map[string]int{"timeout": 600}); r.code != 204 || len(r.body) != 0 {
		t.Fatalf("timeout: %d %s", r.code, r.body)
	}
	e.do("POST", "/sandboxes/"+sb.SandboxID+"/timeout", map[string]int{"timeout": 999999}).errBody(t, 400, "timeout")
	e.do("POST", "/sandboxes/"+sb.SandboxID+"/timeout", `{}`).errBody(t, 400, "timeout")

	// metrics
	var ms []metricOut
	r = e.do("GET", "/sandboxes/"+sb.SandboxID+"/metrics?start=1&end=2000000000", nil)
	r.json(t, &ms)
	if r.code != 200 || len(ms) != 1 || ms[0].CPUUsedPct != 12.5 || ms[0].TimestampUnix != 1700000000 {
		t.Fatalf("metrics: %s", r.body)
	}

	// pause, 409, listed as paused, connect resumes (201), connect again 200
	if r := e.do("POST", "/sandboxes/"+sb.SandboxID+"/pause", `{}`); r.code != 204 {
		t.Fatalf("pause: %d %s", r.code, r.body)
	}
	e.do("POST", "/sandboxes/"+sb.SandboxID+"/pause", nil).errBody(t, 409, "already paused")
	r = e.do("GET", "/v2/sandboxes?state=paused", nil)
	r.json(t, &ls)
	if len(ls) != 1 || ls[0].State != "paused" || ls[0].Metadata["a"] != "b c" {
		t.Fatalf("paused list: %s", r.body)
	}
	e.do("POST", "/sandboxes/"+sb.SandboxID+"/timeout", map[string]int{"timeout": 60}).errBody(t, 409, "paused")
	r = e.do("POST", "/v2/sandboxes/"+sb.SandboxID+"/connect", map[string]int{"timeout": 300})
	var c sandboxOut
	r.json(t, &c)
	if r.code != 201 || c.SandboxID != sb.SandboxID || c.EnvdAccessToken != sb.EnvdAccessToken || c.TrafficAccessToken != sb.TrafficAccessToken {
		t.Fatalf("connect resume: %d %s", r.code, r.body)
	}
	if r := e.do("POST", "/v2/sandboxes/"+sb.SandboxID+"/connect", `{}`); r.code != 200 {
		t.Fatalf("connect running: %d %s", r.code, r.body)
	}
	e.do("POST", "/sandboxes/"+sb.SandboxID+"/resume", `{}`).errBody(t, 409, "already running")

	// network
	if r := e.do("PUT", "/sandboxes/"+sb.SandboxID+"/network", map[string]any{"allow_internet_access": false, "allowOut": []string{"1.1.1.1"}}); r.code != 204 {
		t.Fatalf("network: %d %s", r.code, r.body)
	}
	if p := e.f.boxes[sb.SandboxID].policy; p == nil || len(p.AllowOut) != 1 || !strings.Contains(strings.Join(p.DenyOut, ","), "0.0.0.0/0") {
		t.Fatalf("policy: %+v", p)
	}

	// kill, then 404 everywhere with the body code
	if r := e.do("DELETE", "/sandboxes/"+sb.SandboxID, nil); r.code != 204 {
		t.Fatalf("kill: %d %s", r.code, r.body)
	}
	e.do("DELETE", "/sandboxes/"+sb.SandboxID, nil).errBody(t, 404, "not found")
	e.do("GET", "/sandboxes/"+sb.SandboxID, nil).errBody(t, 404, "not found")
	e.do("POST", "/v2/sandboxes/"+sb.SandboxID+"/connect", `{}`).errBody(t, 404, "not found")
	e.do("POST", "/sandboxes/"+sb.SandboxID+"/timeout", `{"timeout":5}`).errBody(t, 404, "not found")
	e.do("POST", "/sandboxes/"+sb.SandboxID+"/pause", nil).errBody(t, 404, "not found")
	e.do("GET", "/sandboxes/nosuch", nil).errBody(t, 404, "not found")
}

func TestCreateMappings(t *testing.T) {
	e := newEnv(t, func(o *Options) {
		o.Templates = map[string]string{"base": "rayito-base", "code-interpreter-v1": "rayito-code"}
	})
	e.create(map[string]any{"templateID": "code-interpreter-v1", "autoPause": true, "autoResume": map[string]bool{"enabled": true}, "autoPauseMemory": true,
		"allow_internet_access": false})
	s := e.f.specs[0]
	if s.Template != "rayito-code" || s.OnTimeout != "pause" || !s.AutoResume || !s.DenyInternet || s.Network != nil {
		t.Fatalf("spec: %+v", s)
	}
	e.create(map[string]any{"network": map[string]any{"allowOut": []string{"example.com"}, "denyOut": []string{"0.0.0.0/0"},
		"egressProxy": map[string]string{"address": "10.0.0.1:1080", "username": "u", "password": "secret-pw"}, "allowPublicTraffic": false}})
	s = e.f.specs[1]
	if s.Template != "rayito-base" || s.Network == nil || s.Network.AllowOut[0] != "example.com" || s.Network.EgressProxy.Password != "secret-pw" {
		t.Fatalf("spec: %+v", s)
	}
	e.create(map[string]any{"allow_internet_access": false, "network": map[string]any{"allowOut": []string{"1.1.1.1"}}})
	s = e.f.specs[2]
	if s.DenyInternet || s.Network == nil || s.Network.DenyOut[0] != "0.0.0.0/0" {
		t.Fatalf("spec: %+v", s)
	}
	// getInfo echoes the network without the password.
	var ls []listedOut
	e.do("GET", "/v2/sandboxes", nil).json(t, &ls)
	r := e.do("GET", "/sandboxes/sbx-002", nil)
	if r.code != 200 || strings.Contains(string(r.body), "secret-pw") || !strings.Contains(string(r.body), `"allowPublicTraffic":false`) || !strings.Contains(string(r.body), `"address":"10.0.0.1:1080"`) {
		t.Fatalf("getInfo: %s", r.body)
	}
	e.do("POST", "/v2/sandboxes", map[string]any{"templateID": "desktop"}).errBody(t, 400, `template "desktop"`)
	if r := e.do("GET", "/sandboxes/sbx-001", nil); !strings.Contains(string(r.body), `"onTimeout":"pause","autoResume":true`) {
		t.Fatalf("lifecycle: %s", r.body)
	}
}

func TestUnsupported(t *testing.T) {
	e := newEnv(t)
	for _, c := range []struct {
		body any
		want string
	}{
		{map[string]any{"iam": map[string]string{"role": "x"}}, "iam"},
		{map[string]any{"mcp": map[string]any{"x": 1}}, "mcp"},
		{map[string]any{"volumeMounts": []map[string]string{{"name": "v", "path": "/v"}}}, "volumeMounts"},
		{map[string]any{"autoPauseMemory": false}, "autoPauseMemory:false"},
		{map[string]any{"network": map[string]any{"maskRequestHost": "x-${PORT}"}}, "network.maskRequestHost"},
		{map[string]any{"network": map[string]any{"httpsPorts": []int{443}}}, "network.httpsPorts"},
		{map[string]any{"someNewField": 1}, `"someNewField"`},
		{map[string]any{"autoResume": map[string]bool{"enabled": true}}, "autoResume needs autoPause"},
		{map[string]any{"timeout": 0}, "timeout"},
		{map[string]any{"metadata": map[string]string{labelKey: "x"}}, "reserved"},
		{`{"templateID":`, "invalid JSON"},
		{`{"timeout":"x"}`, "timeout"},
		{`[]`, "invalid"},
	} {
		r := e.do("POST", "/sandboxes", c.body)
		r.errBody(t, 400, c.want)
		if strings.Contains(string(r.body), "s3cret") {
			t.Fatal("a secret came back")
		}
	}
	if len(e.f.specs) != 0 {
		t.Fatalf("a refused create created %d sandboxes", len(e.f.specs))
	}
	sb := e.create(nil)
	for _, u := range Unsupported {
		method, path, ok := strings.Cut(u.Pattern, " ")
		if !ok {
			method, path = "GET", u.Pattern
		}
		path = strings.ReplaceAll(path, "{id}", sb.SandboxID)
		e.do(method, path, nil).errBody(t, 501, u.Feature+" is not supported by Rayito's E2B gateway")
	}
	e.do("POST", "/sandboxes/"+sb.SandboxID+"/pause", `{"memory":false}`).errBody(t, 400, "memory:false")
	e.do("POST", "/v2/sandboxes/"+sb.SandboxID+"/connect", `{"memory":false}`).errBody(t, 400, "memory:false")
	e.do("PUT", "/sandboxes/"+sb.SandboxID+"/network", `{"rules":{"*":[{}]}}`).errBody(t, 400, "network.rules")
	e.do("GET", "/nope", nil).errBody(t, 404, "no route")
	e.do("PATCH", "/sandboxes/"+sb.SandboxID, nil).errBody(t, 404, "no route")
	big := `{"metadata":{"a":"` + strings.Repeat("x", MaxBodyBytes) + `"}}`
	e.do("POST", "/sandboxes", big).errBody(t, 413, "larger")
}

// routed sends a data-plane request the way E2B's SDKs do.
func (e *env) routed(method, path, id, port string, hdr ...string) resp {
	e.t.Helper()
	return e.do(method, path, nil, append([]string{"X-API-KEY", "", headerSandboxID, id, headerSandboxPort, port}, hdr...)...)
}

// TestRouterEarlyAnswer: a sandbox that answers before it has read the
// whole request body (a streaming RPC does) gets the rest of the body,
// and the client the whole answer. Without full duplex the gateway's
// HTTP/1.1 server closed the body as the answer began, the proxy's
// transport failed to send the rest and dropped the upstream connection,
// and the client's answer was cut ("terminated" in E2B's SDKs).
func TestRouterEarlyAnswer(t *testing.T) {
	e := newEnv(t)
	id := e.create(nil).SandboxID
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	pr, pw := io.Pipe()
	// The client's transport waits for its body writer: end the body too
	// when the deadline passes.
	stop := context.AfterFunc(ctx, func() { pw.CloseWithError(ctx.Err()) })
	defer stop()
	req, _ := http.NewRequestWithContext(ctx, "POST", e.http.URL+"/early", pr)
	req.ContentLength = int64(len("first second"))
	req.Header.Set(headerSandboxID, id)
	req.Header.Set(headerSandboxPort, "49983")
	// One writer, in order: "first " goes at once, "second" only once the
	// answer has begun. (A gateway that dropped the body would leave that
	// write blocked: the deadline then ends the request.)
	answered := make(chan struct{})
	go func() {
		if _, err := io.WriteString(pw, "first "); err != nil {
			return
		}
		select {
		case <-answered:
		case <-ctx.Done():
			return
		}
		if _, err := io.WriteString(pw, "second"); err == nil {
			pw.Close()
		}
	}()
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	close(answered)
	body, err := io.ReadAll(res.Body)
	if err != nil || string(body) != "first second" {
		t.Fatalf("answer %q, %v: want the whole echo", body, err)
	}
}

func TestRouter(t *testing.T) {
	e := newEnv(t)
	sb := e.create(nil)
	id := sb.SandboxID
	// envd: forwarded to its port with the SDK's own token, routing
	// headers and the traffic token stripped.
	r := e.routed("GET", "/health", id, "49983", "X-Access-Token", sb.EnvdAccessToken)
	if r.code != 204 || r.header.Get("X-Seen-Port") != "49983" || r.header.Get("X-Seen-Access-Token") != sb.EnvdAccessToken || r.header.Get("X-Seen-Sandbox-Id") != "" {
		t.Fatalf("health: %d %v", r.code, r.header)
	}
	// No token is added on envd for a secure sandbox.
	if r := e.routed("GET", "/files?path=a", id, "49983"); r.header.Get("X-Seen-Access-Token") != "" || r.header.Get("X-Seen-Path") != "/files?path=a" {
		t.Fatalf("envd without token: %v", r.header)
	}
	// /contexts: only the traffic token; the router adds the access token.
	r = e.routed("GET", "/contexts", id, "49999", headerTraffic, sb.TrafficAccessToken)
	if r.header.Get("X-Seen-Access-Token") != sb.EnvdAccessToken || r.header.Get("X-Seen-Traffic") != "" || r.header.Get("X-Seen-Port") != "49999" {
		t.Fatalf("contexts: %v", r.header)
	}
	if r := e.routed("GET", "/contexts", id, "49999", headerTraffic, "wrong"); r.header.Get("X-Seen-Access-Token") != "" {
		t.Fatal("a wrong traffic token got the access token")
	}
	// A user port is forwarded as it is; the host form works too; the API
	// key never reaches the sandbox.
	r = e.do("GET", "/app", nil, "Host", "8000-"+id+".e2b.local:3000")
	if r.code != 200 || r.header.Get("X-Seen-Port") != "8000" || r.header.Get("X-Seen-Api-Key") != "" || r.header.Get("X-Seen-Access-Token") != "" {
		t.Fatalf("host form: %d %v", r.code, r.header)
	}
	// 9000 is refused; a bad port is a 400.
	e.routed("GET", "/", id, "9000").errBody(t, 403, "9000")
	// 8080 is rayd's own API port: a program cannot serve it, and the
	// router says so rather than reach rayd's API.
	e.routed("GET", "/", id, "8080").errBody(t, 403, "port 8080 is the sandbox daemon's own API port")
	e.routed("GET", "/", id, "x").errBody(t, 400, "port")
	// A stream is not buffered: the first chunk arrives while it is open.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", e.http.URL+"/stream", nil)
	req.Header.Set(headerSandboxID, id)
	req.Header.Set(headerSandboxPort, "49983")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(res.Body).ReadString('\n')
	if err != nil || line != "first\n" {
		t.Fatalf("stream: %q %v", line, err)
	}
	cancel()
	res.Body.Close()
	// Paused without autoResume, then killed: 502.
	if err := e.f.pause(context.Background(), id); err != nil {
		t.Fatal(err)
	}
	e.routed("GET", "/health", id, "49983").goneBody(t, id, "paused")
	if err := e.f.kill(context.Background(), id); err != nil {
		t.Fatal(err)
	}
	e.routed("GET", "/health", id, "49983").goneBody(t, id, "not running")
	e.routed("GET", "/health", "nosuch", "49983").goneBody(t, "nosuch", "not running")
	// The host form gets the same body.
	e.do("GET", "/", nil, "Host", "3000-"+id+".e2b.local:3000").goneBody(t, id, "not running")
}

func TestRouterInsecurePrivateDebug(t *testing.T) {
	var e *env
	e = newEnv(t, func(o *Options) { o.DebugSandboxID = "sbx-001" })
	sb := e.create(map[string]any{"secure": false, "network": map[string]any{"allowPublicTraffic": false}})
	if sb.EnvdAccessToken != "" {
		t.Fatal("secure:false returned a token")
	}
	token := e.f.boxes[sb.SandboxID].token
	if r := e.routed("GET", "/health", sb.SandboxID, "49983"); r.header.Get("X-Seen-Access-Token") != token {
		t.Fatalf("secure:false: %v", r.header)
	}
	e.routed("GET", "/", sb.SandboxID, "8000").errBody(t, 403, "Token header 'e2b-traffic-access-token' is missing")
	e.routed("GET", "/", sb.SandboxID, "8000", headerTraffic, "wrong").errBody(t, 403, "Provided token in header 'e2b-traffic-access-token' is invalid")
	if r := e.routed("GET", "/", sb.SandboxID, "8000", headerTraffic, sb.TrafficAccessToken); r.code != 200 || r.header.Get("X-Seen-Traffic") != "" {
		t.Fatalf("private port with token: %d %v", r.code, r.header)
	}
	// Debug mode: the fixed id reaches the configured sandbox, with its
	// token added.
	if r := e.routed("GET", "/health", DebugSandboxID, "49983"); r.code != 204 || r.header.Get("X-Seen-Access-Token") != token {
		t.Fatalf("debug: %d %v", r.code, r.header)
	}
	if r := e.do("GET", "/sandboxes/"+DebugSandboxID, nil); r.code != 200 {
		t.Fatalf("debug getInfo: %d %s", r.code, r.body)
	}
}

func TestAutoResumeOnTraffic(t *testing.T) {
	e := newEnv(t)
	sb := e.create(map[string]any{"autoPause": true, "autoResume": map[string]bool{"enabled": true}})
	if err := e.f.pause(context.Background(), sb.SandboxID); err != nil {
		t.Fatal(err)
	}
	e.srv.dropConn(sb.SandboxID)
	if r := e.routed("GET", "/health", sb.SandboxID, "49983"); r.code != 204 {
		t.Fatalf("auto-resume: %d %s", r.code, r.body)
	}
	if e.f.boxes[sb.SandboxID].state != "RUNNING" {
		t.Fatal("not resumed")
	}
}

func TestRestartReadsLabels(t *testing.T) {
	e := newEnv(t)
	sb := e.create(map[string]any{"templateID": "mine", "secure": false, "metadata": map[string]string{"x": "y"}})
	// A new gateway over the same platform knows the sandbox from its
	// label.
	srv2, err := newServer(context.Background(), Options{APIKeyHashes: [][32]byte{HashAPIKey(testKey)}}, e.f)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv2.Handler())
	defer hs.Close()
	e2 := &env{t: t, f: e.f, srv: srv2, http: hs}
	var ls []listedOut
	e2.do("GET", "/v2/sandboxes", nil).json(t, &ls)
	if len(ls) != 1 || ls[0].TemplateID != "mine" || ls[0].Metadata["x"] != "y" || len(ls[0].Metadata) != 1 {
		t.Fatalf("after restart: %+v", ls)
	}
	if r := e2.routed("GET", "/health", sb.SandboxID, "49983"); r.header.Get("X-Seen-Access-Token") == "" {
		t.Fatal("secure:false forgotten across a restart")
	}
}

func TestMetadataFilterParse(t *testing.T) {
	// {a:"b c"} on the wire: metadata=a%3Db%252520c
	q, _ := url.ParseQuery("metadata=a%3Db%252520c")
	m, err := parseMetadataFilter(q.Get("metadata"))
	if err != nil || m["a"] != "b c" || len(m) != 1 {
		t.Fatalf("%v %v", m, err)
	}
}

func TestSandboxTarget(t *testing.T) {
	for host, want := range map[string]string{
		"49983-sbx1.rayito.local":      "sbx1/49983",
		"8080-abc-def.example.com:443": "abc-def/8080",
		"127.0.0.1:3000":               "",
		"localhost:3000":               "",
		"api.example.com":              "",
		"my-host.example.com":          "",
	} {
		r := httptest.NewRequest("GET", "/", nil)
		r.Host = host
		id, port, ok := sandboxTarget(r)
		got := ""
		if ok {
			got = id + "/" + port
		}
		if got != want {
			t.Errorf("%s: %q, want %q", host, got, want)
		}
	}
}

// TestNetworkRules: E2B Secrets' network.rules reach the platform as
// header rules (headers merged in order, hosts lower-cased, a host
// without headers dropped) on create, on PUT …/network (which replaces
// them, and clears them when absent) and in a fork; bad rules are 400
// without quoting a value.
func TestNetworkRules(t *testing.T) {
	e := newEnv(t)
	rules := map[string]any{
		"API.example.com": []any{
			map[string]any{"transform": map[string]any{"headers": map[string]string{"Authorization": "Bearer one", "X-A": "a"}}},
			map[string]any{"transform": map[string]any{"headers": map[string]string{"Authorization": "Bearer two"}}},
		},
		"*.internal.test": []any{map[string]any{"transform": map[string]any{"headers": map[string]string{"X-Team": "t"}}}},
		"empty.test":      []any{map[string]any{}},
	}
	sb := e.create(map[string]any{"network": map[string]any{"rules": rules}})
	want := []headerRule{
		{Host: "*.internal.test", Headers: map[string]string{"X-Team": "t"}},
		{Host: "api.example.com", Headers: map[string]string{"Authorization": "Bearer two", "X-A": "a"}},
	}
	box := func() *fakeBox {
		e.f.mu.Lock()
		defer e.f.mu.Unlock()
		return e.f.boxes[sb.SandboxID]
	}
	sameRules := func(got, want []headerRule) bool {
		return slices.EqualFunc(got, want, func(a, b headerRule) bool { return a.Host == b.Host && maps.Equal(a.Headers, b.Headers) })
	}
	if got := box().rules; !sameRules(got, want) {
		t.Fatalf("create: rules %v, want %v", got, want)
	}
	// A fork keeps them.
	r := e.do("POST", "/sandboxes/"+sb.SandboxID+"/fork", `{"count":1}`)
	if r.code != 201 {
		t.Fatalf("fork: %d %s", r.code, r.body)
	}
	e.f.mu.Lock()
	forked := e.f.specs[len(e.f.specs)-1].HeaderRules
	e.f.mu.Unlock()
	if !sameRules(forked, want) {
		t.Fatalf("fork: rules %v", forked)
	}
	// PUT replaces them; without rules, they go.
	if r := e.do("PUT", "/sandboxes/"+sb.SandboxID+"/network", `{"rules":{"b.test":[{"transform":{"headers":{"X-B":"b"}}}]}}`); r.code != 204 {
		t.Fatalf("PUT: %d %s", r.code, r.body)
	}
	if got := box().rules; !sameRules(got, []headerRule{{Host: "b.test", Headers: map[string]string{"X-B": "b"}}}) {
		t.Fatalf("PUT: rules %v", got)
	}
	if r := e.do("PUT", "/sandboxes/"+sb.SandboxID+"/network", `{}`); r.code != 204 || box().rules != nil {
		t.Fatalf("PUT without rules: %d, rules %v", r.code, box().rules)
	}
	// Bad rules: 400, no value quoted.
	for _, bad := range []string{`{"rules":{"*":[]}}`, `{"rules":{"a.*.test":[]}}`, `{"rules":["x"]}`, `{"rules":{"h.test":"Bearer s3cret"}}`} {
		r := e.do("PUT", "/sandboxes/"+sb.SandboxID+"/network", bad)
		r.errBody(t, 400, "network.rules")
		if strings.Contains(string(r.body), "s3cret") {
			t.Fatalf("%s: the error quotes a value: %s", bad, r.body)
		}
	}
}

// TestLogs: E2B's v1 and v2 sandbox logs from the daemon's records, with
// v2's cursor, direction, level, search and limit; a paused sandbox 409.
func TestLogs(t *testing.T) {
	e := newEnv(t)
	id := e.create(nil).SandboxID
	t0 := e.f.clock.UnixMilli()
	var v1 struct {
		Logs []struct {
			Timestamp string `json:"timestamp"`
			Line      string `json:"line"`
		} `json:"logs"`
		LogEntries []struct {
			Level   string            `json:"level"`
			Message string            `json:"message"`
			Fields  map[string]string `json:"fields"`
		} `json:"logEntries"`
	}
	r := e.do("GET", "/sandboxes/"+id+"/logs?limit=2&start="+strconv.FormatInt(t0+1000, 10), nil)
	r.json(t, &v1)
	if r.code != 200 || len(v1.Logs) != 2 || v1.Logs[0].Line != `hook hook="run"` || v1.LogEntries[1].Level != "warn" || v1.LogEntries[0].Fields["hook"] != "run" {
		t.Fatalf("v1: %d %s", r.code, r.body)
	}
	type v2 struct {
		Logs []struct {
			Level   string `json:"level"`
			Message string `json:"message"`
		} `json:"logs"`
	}
	msgs := func(q string) []string {
		t.Helper()
		var out v2
		r := e.do("GET", "/v2/sandboxes/"+id+"/logs"+q, nil)
		if r.code != 200 {
			t.Fatalf("%s: %d %s", q, r.code, r.body)
		}
		r.json(t, &out)
		var m []string
		for _, l := range out.Logs {
			m = append(m, l.Message)
		}
		return m
	}
	for q, want := range map[string][]string{
		"":                            {"rayd started", "hook", "network policy: install failed", "kernel died"},
		"?level=warn":                 {"network policy: install failed", "kernel died"},
		"?direction=backward&limit=2": {"kernel died", "network policy: install failed"},
		"?direction=backward&cursor=" + strconv.FormatInt(t0+1000, 10): {"hook", "rayd started"},
		"?cursor=" + strconv.FormatInt(t0+2000, 10):                    {"network policy: install failed", "kernel died"},
		"?search=policy": {"network policy: install failed"},
	} {
		if got := msgs(q); !slices.Equal(got, want) {
			t.Errorf("%q: %q, want %q", q, got, want)
		}
	}
	e.do("GET", "/v2/sandboxes/"+id+"/logs?direction=up", nil).errBody(t, 400, "direction")
	e.do("GET", "/v2/sandboxes/"+id+"/logs?level=trace", nil).errBody(t, 400, "level")
	e.do("GET", "/sandboxes/"+id+"/logs?limit=0", nil).errBody(t, 400, "limit")
	if err := e.f.pause(context.Background(), id); err != nil {
		t.Fatal(err)
	}
	e.do("GET", "/sandboxes/"+id+"/logs", nil).errBody(t, 409, "paused")
	e.do("GET", "/v2/sandboxes/nosuch/logs", nil).errBody(t, 404, "")
}

// Options.Domain is E2B's `domain` of every sandbox (create, connect,
// getInfo), which E2B's SDKs build getHost(port) and file links from; no
// domain, no field.
func TestDomain(t *testing.T) {
	for _, d := range []string{"e2b.localhost:3443", "sandboxes.example.com", "localhost"} {
		if !ValidDomain(d) {
			t.Errorf("ValidDomain(%q) is false", d)
		}
	}
	for _, d := range []string{"", "E2B.localhost", "a..b", "-a.b", "a-.b", "a.b:0", "a.b:65536", "a.b:01", "a.b:", "a_b.c", "a.b/c", "https://a.b", strings.Repeat("a", 64) + ".b"} {
		if ValidDomain(d) {
			t.Errorf("ValidDomain(%q) is true", d)
		}
		if d != "" {
			if _, err := New(context.Background(), Options{APIKeyHashes: [][32]byte{HashAPIKey(testKey)}, Domain: d}); err == nil {
				t.Errorf("New accepted the domain %q", d)
			}
		}
	}
	e := newEnv(t, func(o *Options) { o.Domain = "e2b.localhost:3443" })
	sb := e.create(nil)
	if sb.Domain != "e2b.localhost:3443" {
		t.Fatalf("create: domain %q", sb.Domain)
	}
	var info detailOut
	e.do("GET", "/sandboxes/"+sb.SandboxID, nil).json(t, &info)
	if info.Domain != "e2b.localhost:3443" {
		t.Fatalf("getInfo: domain %q", info.Domain)
	}
	var conn sandboxOut
	e.do("POST", "/sandboxes/"+sb.SandboxID+"/connect", map[string]any{"timeout": 60}).json(t, &conn)
	if conn.Domain != "e2b.localhost:3443" {
		t.Fatalf("connect: domain %q", conn.Domain)
	}
	if r := e.do("GET", "/app", nil, "X-API-KEY", "", "Host", "8000-"+sb.SandboxID+".e2b.localhost:3443"); r.code != 200 || r.header.Get("X-Seen-Port") != "8000" {
		t.Fatalf("getHost(8000): %d %v", r.code, r.header)
	}
	plain := newEnv(t)
	if r := plain.do("POST", "/v2/sandboxes", nil); strings.Contains(string(r.body), `"domain"`) {
		t.Fatalf("no domain configured, yet the create says one: %s", r.body)
	}
}

// E2B's debug mode links a sandbox's port as localhost:port: a listener
// there with DebugPortHandler reaches that port of the debug sandbox
// (without a traffic token: debug mode's sandbox is open to whoever
// reaches the gateway), and the router's debug id reaches its user ports
// too.
func TestDebugPort(t *testing.T) {
	if _, err := newEnv(t).srv.DebugPortHandler(8000); err == nil {
		t.Fatal("a debug port without a debug sandbox")
	}
	var e *env
	e = newEnv(t, func(o *Options) { o.DebugSandboxID = "sbx-001" })
	e.create(map[string]any{"network": map[string]any{"allowPublicTraffic": false}})
	for _, bad := range []int{0, 9000, 65536} {
		if _, err := e.srv.DebugPortHandler(bad); err == nil {
			t.Errorf("debug port %d accepted", bad)
		}
	}
	h, err := e.srv.DebugPortHandler(8000)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(h)
	defer hs.Close()
	res, err := http.Get(hs.URL + "/index.html?x=1")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 200 || res.Header.Get("X-Seen-Port") != "8000" || res.Header.Get("X-Seen-Path") != "/index.html?x=1" || res.Header.Get("X-Seen-Access-Token") != "" {
		t.Fatalf("debug port: %d %v", res.StatusCode, res.Header)
	}
	if r := e.routed("GET", "/", DebugSandboxID, "3000"); r.code != 200 || r.header.Get("X-Seen-Port") != "3000" {
		t.Fatalf("debug id, user port: %d %v", r.code, r.header)
	}
}

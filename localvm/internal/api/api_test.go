package api_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/rayito-dev/rayito/localvm/internal/api"
	"github.com/rayito-dev/rayito/localvm/internal/registry"
	"github.com/rayito-dev/rayito/localvm/internal/registry/registrytest"
	"github.com/rayito-dev/rayito/proto/microvmsapi"
)

func TestMain(m *testing.M) { os.Exit(registrytest.RunWithLeakCheck(m)) }

const base = "/2025-09-09/microvms"

type tenv struct {
	srv   *httptest.Server
	reg   *registry.Registry
	l     *registrytest.Launcher
	hooks *registrytest.Hooks
	m     *registrytest.Minter
}

// newAPI serves the API over a real registry with a fake launcher, hooks
// and minter. mod may change the options before use.
func newAPI(t *testing.T, mod func(*registry.Options, *api.Options)) *tenv {
	t.Helper()
	e := &tenv{hooks: registrytest.NewHooks(t), m: &registrytest.Minter{}}
	e.l = &registrytest.Launcher{HooksAddr: e.hooks.Addr(), APIAddr: "127.0.0.1:18080"}
	ropts := registry.Options{StateDir: t.TempDir(), Launcher: e.l, Minter: e.m}
	aopts := api.Options{Rates: map[string]float64{}}
	for op := range api.DefaultRates() {
		aopts.Rates[op] = 0 // throttling off unless a test turns it on
	}
	if mod != nil {
		mod(&ropts, &aopts)
	}
	reg, err := registry.Open(t.Context(), ropts)
	if err != nil {
		t.Fatal(err)
	}
	e.reg = reg
	if aopts.Backend == nil {
		aopts.Backend = reg
	}
	h, err := api.New(aopts)
	if err != nil {
		t.Fatal(err)
	}
	e.srv = httptest.NewServer(h)
	t.Cleanup(func() {
		e.srv.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = reg.Close(ctx)
	})
	return e
}

type resp struct {
	status int
	hdr    http.Header
	body   []byte
}

func (e *tenv) do(t *testing.T, method, path, body string, hdr ...string) resp {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, e.srv.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(hdr); i += 2 {
		if strings.EqualFold(hdr[i], "Host") {
			req.Host = hdr[i+1]
		} else {
			req.Header.Set(hdr[i], hdr[i+1])
		}
	}
	res, err := e.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp{res.StatusCode, res.Header, b}
}

// checkErr checks the whole rest-json error shape.
func checkErr(t *testing.T, r resp, status int, typ, msg string) {
	t.Helper()
	if r.status != status {
		t.Errorf("status %d, want %d (%s)", r.status, status, r.body)
	}
	if got := r.hdr.Get("X-Amzn-ErrorType"); got != typ {
		t.Errorf("X-Amzn-ErrorType %q, want %q", got, typ)
	}
	if ct := r.hdr.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q", ct)
	}
	var e map[string]any
	if err := json.Unmarshal(r.body, &e); err != nil {
		t.Fatalf("error body %q: %v", r.body, err)
	}
	if len(e) != 2 || e["__type"] != typ || e["message"] != msg {
		t.Errorf("error body %s, want __type %q message %q", r.body, typ, msg)
	}
}

func decode[T any](t *testing.T, r resp) T {
	t.Helper()
	if r.status != http.StatusOK {
		t.Fatalf("status %d: %s", r.status, r.body)
	}
	if ct := r.hdr.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("Content-Type %q", ct)
	}
	var v T
	if err := json.Unmarshal(r.body, &v); err != nil {
		t.Fatalf("body %q: %v", r.body, err)
	}
	return v
}

func (e *tenv) run(t *testing.T, body string) microvmsapi.Microvm {
	t.Helper()
	return decode[microvmsapi.Microvm](t, e.do(t, "POST", base, body))
}

func (e *tenv) waitState(t *testing.T, id string, state microvmsapi.State) microvmsapi.Microvm {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		m := decode[microvmsapi.Microvm](t, e.do(t, "GET", base+"/"+id, ""))
		if m.State == state {
			return m
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s is %s, want %s", id, m.State, state)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestErrors(t *testing.T) {
	t.Parallel()
	e := newAPI(t, nil)
	const (
		v   = microvmsapi.ValidationException
		nf  = microvmsapi.ResourceNotFoundException
		uo  = api.UnknownOperationException
		dur = "maximumDurationInSeconds must be between 1 and 28800."
	)
	goodARN := microvmsapi.ConnectorARN("us-east-1", "ALL_INGRESS")
	cases := []struct {
		name, method, path, body string
		status                   int
		typ, msg                 string
	}{
		{"get unknown", "GET", base + "/microvm-nope", "", 404, nf, "The microVM does not exist."},
		{"delete unknown", "DELETE", base + "/microvm-nope", "", 404, nf, "The microVM does not exist."},
		{"suspend unknown", "POST", base + "/microvm-nope/suspend", "", 404, nf, "The microVM does not exist."},
		{"resume unknown", "POST", base + "/microvm-nope/resume", "{}", 404, nf, "The microVM does not exist."},
		{"token unknown", "POST", base + "/microvm-nope/auth-token", `{"expirationInMinutes":5,"allowedPorts":[{"port":8080}]}`, 404, nf, "The microVM does not exist."},
		{"escaped slash", "GET", base + "/a%2Fb", "", 404, nf, "The microVM does not exist."},
		{"unknown path", "GET", "/nope", "", 404, uo, "No operation matches the request."},
		{"old version", "GET", "/2017-03-31/microvms", "", 404, uo, "No operation matches the request."},
		{"trailing slash", "GET", base + "/", "", 404, uo, "No operation matches the request."},
		{"too deep", "GET", base + "/x/suspend/y", "", 404, uo, "No operation matches the request."},
		{"unknown verb", "POST", base + "/x/reboot", "", 404, uo, "No operation matches the request."},
		{"shell token", "POST", base + "/x/shell-auth-token", "", 404, uo, "No operation matches the request."},
		{"prefix only", "GET", base + "x", "", 404, uo, "No operation matches the request."},
		{"put collection", "PUT", base, "", 405, uo, "The method is not allowed for this path."},
		{"post item", "POST", base + "/x", "", 405, uo, "The method is not allowed for this path."},
		{"get suspend", "GET", base + "/x/suspend", "", 405, uo, "The method is not allowed for this path."},
		{"delete token", "DELETE", base + "/x/auth-token", "", 405, uo, "The method is not allowed for this path."},
		{"run empty", "POST", base, "", 400, v, "imageIdentifier is required."},
		{"run no image", "POST", base, `{"runHookPayload":"x"}`, 400, v, "imageIdentifier is required."},
		{"run duration 0", "POST", base, `{"imageIdentifier":"local","maximumDurationInSeconds":0}`, 400, v, dur},
		{"run duration big", "POST", base, `{"imageIdentifier":"local","maximumDurationInSeconds":28801}`, 400, v, dur},
		{"run duration neg", "POST", base, `{"imageIdentifier":"local","maximumDurationInSeconds":-5}`, 400, v, dur},
		{"run duration type", "POST", base, `{"imageIdentifier":"local","maximumDurationInSeconds":"60"}`, 400, v, "The field maximumDurationInSeconds has the wrong type."},
		{"run duration float", "POST", base, `{"imageIdentifier":"local","maximumDurationInSeconds":1.5}`, 400, v, "The field maximumDurationInSeconds has the wrong type."},
		{"run payload", "POST", base, `{"imageIdentifier":"local","runHookPayload":"` + strings.Repeat("x", 4097) + `"}`, 400, v, "runHookPayload must be at most 4096 characters."},
		{"run body big", "POST", base, `{"imageIdentifier":"local","runHookPayload":"` + strings.Repeat("x", 70000) + `"}`, 400, v, "The request body exceeds 65536 bytes."},
		{"run bad arn", "POST", base, `{"imageIdentifier":"local","ingressNetworkConnectors":["` + goodARN + `","arn:nope"]}`, 400, v, "ingressNetworkConnectors[1] is not a valid network connector ARN for this list."},
		{"run no egress", "POST", base, `{"imageIdentifier":"local","egressNetworkConnectors":["` + microvmsapi.ConnectorARN("us-east-1", "NO_EGRESS") + `"]}`, 400, v, "egressNetworkConnectors[0] is not a valid network connector ARN for this list."},
		{"run unknown field", "POST", base, `{"imageIdentifier":"local","memory":2048}`, 400, v, "The request body has a field this operation does not accept."},
		{"run nested unknown", "POST", base, `{"imageIdentifier":"local","logging":{"disabled":{},"s3":{}}}`, 400, v, "The request body has a field this operation does not accept."},
		{"run bad json", "POST", base, `{"imageIdentifier":`, 400, v, "The request body is not valid JSON."},
		{"run syntax", "POST", base, `{"imageIdentifier" "x"}`, 400, v, "The request body is not valid JSON."},
		{"run array", "POST", base, `[]`, 400, v, "The request body must be a JSON object."},
		{"run two objects", "POST", base, `{"imageIdentifier":"local"} {}`, 400, v, "The request body must hold exactly one JSON object."},
		{"run idle partial", "POST", base, `{"imageIdentifier":"local","idlePolicy":{"maxIdleDurationSeconds":60}}`, 400, v, "idlePolicy must set maxIdleDurationSeconds, suspendedDurationSeconds and autoResumeEnabled."},
		{"run idle short", "POST", base, `{"imageIdentifier":"local","idlePolicy":{"maxIdleDurationSeconds":59,"suspendedDurationSeconds":0,"autoResumeEnabled":false}}`, 400, v, "idlePolicy.maxIdleDurationSeconds must be between 60 and 28800."},
		{"run token long", "POST", base, `{"imageIdentifier":"local","clientToken":"` + strings.Repeat("c", 129) + `"}`, 400, v, "clientToken must be at most 128 characters."},
		{"list max 0", "GET", base + "?maxResults=0", "", 400, v, "maxResults must be between 1 and 50."},
		{"list max 51", "GET", base + "?maxResults=51", "", 400, v, "maxResults must be between 1 and 50."},
		{"list max x", "GET", base + "?maxResults=ten", "", 400, v, "maxResults must be between 1 and 50."},
		{"list max empty", "GET", base + "?maxResults=", "", 400, v, "maxResults must be between 1 and 50."},
		{"list token", "GET", base + "?nextToken=bogus", "", 400, v, "nextToken is not valid."},
		{"list token empty", "GET", base + "?nextToken=", "", 400, v, "nextToken is not valid."},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			checkErr(t, e.do(t, c.method, c.path, c.body), c.status, c.typ, c.msg)
		})
	}
	if r := e.do(t, "PATCH", base, ""); r.hdr.Get("Allow") != "GET, POST" {
		t.Errorf("Allow %q", r.hdr.Get("Allow"))
	}
	if r := e.do(t, "PUT", base+"/x", ""); r.hdr.Get("Allow") != "DELETE, GET" {
		t.Errorf("Allow %q", r.hdr.Get("Allow"))
	}
}

func TestLifecycle(t *testing.T) {
	t.Parallel()
	e := newAPI(t, nil)
	m := e.run(t, `{"imageIdentifier":"local","runHookPayload":"{\"v\":1}","maximumDurationInSeconds":600,
		"egressNetworkConnectors":["`+microvmsapi.ConnectorARN("us-east-1", "INTERNET_EGRESS")+`"],
		"idlePolicy":{"maxIdleDurationSeconds":60,"suspendedDurationSeconds":0,"autoResumeEnabled":true},
		"logging":{"disabled":{}}}`)
	if m.State != microvmsapi.StatePending || m.Endpoint == "" || m.MaximumDurationInSeconds != 600 ||
		m.IdlePolicy == nil || !m.IdlePolicy.AutoResumeEnabled || m.Logging == nil || len(m.EgressNetworkConnectors) != 1 {
		t.Fatalf("Run answered %+v", m)
	}
	e.waitState(t, m.MicrovmID, microvmsapi.StateRunning)
	if runs := e.hooks.Runs(); len(runs) != 1 || runs[0].RunHookPayload != `{"v":1}` {
		t.Fatalf("run hook got %+v", runs)
	}

	r := e.do(t, "GET", base, "")
	list := decode[microvmsapi.ListMicrovmsOutput](t, r)
	if len(list.Items) != 1 || list.Items[0].MicrovmID != m.MicrovmID || list.NextToken != "" {
		t.Fatalf("list %s", r.body)
	}
	if strings.Contains(string(r.body), "endpoint") || strings.Contains(string(r.body), "nextToken") {
		t.Fatalf("list items carry an endpoint or an empty token: %s", r.body)
	}

	for range 2 { // terminate is idempotent
		r = e.do(t, "DELETE", base+"/"+m.MicrovmID, "")
		if r.status != 200 || string(r.body) != "{}" {
			t.Fatalf("DELETE: %d %s", r.status, r.body)
		}
	}
	got := e.waitState(t, m.MicrovmID, microvmsapi.StateTerminated)
	if got.StateReason != "killed_by_user" || got.TerminatedAt == nil {
		t.Fatalf("terminated %+v", got)
	}
	if r := e.do(t, "DELETE", base+"/"+m.MicrovmID, ""); r.status != 200 {
		t.Fatalf("DELETE of a TERMINATED one: %d", r.status)
	}
}

func TestSuspendResume(t *testing.T) {
	t.Parallel()
	e := newAPI(t, func(o *registry.Options, _ *api.Options) { o.RunWait = 10 * time.Second })
	m := e.run(t, `{"imageIdentifier":"local"}`)
	for _, verb := range []string{"suspend", "resume"} {
		want := microvmsapi.StateSuspended
		if verb == "resume" {
			want = microvmsapi.StateRunning
		}
		for _, body := range []string{"", "{}"} { // and again: idempotent
			if r := e.do(t, "POST", base+"/"+m.MicrovmID+"/"+verb, body); r.status != 200 || string(r.body) != "{}" {
				t.Fatalf("%s: %d %s", verb, r.status, r.body)
			}
			if got := decode[microvmsapi.Microvm](t, e.do(t, "GET", base+"/"+m.MicrovmID, "")); got.State != want {
				t.Fatalf("after %s: %s", verb, got.State)
			}
		}
		checkErr(t, e.do(t, "POST", base+"/"+m.MicrovmID+"/"+verb, `{"force":true}`), 400,
			microvmsapi.ValidationException, "The request body has a field this operation does not accept.")
	}
	e.do(t, "DELETE", base+"/"+m.MicrovmID, "")
	for _, verb := range []string{"suspend", "resume"} {
		checkErr(t, e.do(t, "POST", base+"/"+m.MicrovmID+"/"+verb, ""), 409,
			microvmsapi.ConflictException, "The microVM is terminated.")
	}
}

// TestSuspendUnsupported: a platform without a cgroup freezer answers
// ValidationException naming why.
func TestSuspendUnsupported(t *testing.T) {
	t.Parallel()
	e := newAPI(t, nil)
	e.l.NoSuspend = errors.New("launcher: suspend needs the root platform's cgroup freezer: this platform runs rootless (no cgroups)")
	m := e.run(t, `{"imageIdentifier":"local"}`)
	for _, verb := range []string{"suspend", "resume"} {
		checkErr(t, e.do(t, "POST", base+"/"+m.MicrovmID+"/"+verb, ""), 400, microvmsapi.ValidationException,
			"Suspend needs the root platform's cgroup freezer: this platform runs rootless (no cgroups).")
	}
}

func TestQuotaAndClientToken(t *testing.T) {
	t.Parallel()
	e := newAPI(t, func(o *registry.Options, _ *api.Options) { o.MaxSandboxes = 1 })
	a := e.run(t, `{"imageIdentifier":"local","clientToken":"ct-1","runHookPayload":"one"}`)
	b := e.run(t, `{"imageIdentifier":"local","clientToken":"ct-1","runHookPayload":"one"}`)
	if a.MicrovmID != b.MicrovmID {
		t.Fatal("replay made a new microVM")
	}
	checkErr(t, e.do(t, "POST", base, `{"imageIdentifier":"local","clientToken":"ct-1","runHookPayload":"two"}`),
		409, microvmsapi.ConflictException, "The clientToken was already used with a different request.")
	checkErr(t, e.do(t, "POST", base, `{"imageIdentifier":"local"}`),
		402, microvmsapi.ServiceQuotaExceededException, "At most 1 microVMs may exist that are not TERMINATED.")
}

func TestThrottling(t *testing.T) {
	t.Parallel()
	e := newAPI(t, func(_ *registry.Options, o *api.Options) {
		o.Rates[api.OpRunMicrovm] = 2
		o.Rates[api.OpGetMicrovm] = 1
	})
	e.run(t, `{"imageIdentifier":"local"}`)
	e.run(t, `{"imageIdentifier":"local"}`)
	r := e.do(t, "POST", base, `{"imageIdentifier":"local"}`)
	checkErr(t, r, 429, microvmsapi.ThrottlingException, "Rate exceeded.")
	if r.hdr.Get("Retry-After") != "1" {
		t.Errorf("Retry-After %q", r.hdr.Get("Retry-After"))
	}
	checkErr(t, e.do(t, "GET", base+"/microvm-x", ""), 404, microvmsapi.ResourceNotFoundException, "The microVM does not exist.")
	checkErr(t, e.do(t, "GET", base+"/microvm-x", ""), 429, microvmsapi.ThrottlingException, "Rate exceeded.")
	// Other operations have their own buckets; unknown paths use none.
	for range 5 {
		if r := e.do(t, "GET", base, ""); r.status != 200 {
			t.Fatalf("List throttled: %d", r.status)
		}
		checkErr(t, e.do(t, "GET", "/x", ""), 404, api.UnknownOperationException, "No operation matches the request.")
	}
	time.Sleep(600 * time.Millisecond) // 2/s refills one
	e.run(t, `{"imageIdentifier":"local"}`)
}

func TestDefaultRates(t *testing.T) {
	t.Parallel()
	want := map[string]float64{"RunMicrovm": 5, "ResumeMicrovm": 5, "SuspendMicrovm": 2, "TerminateMicrovm": 10,
		"GetMicrovm": 100, "CreateMicrovmAuthToken": 50, "ListMicrovms": 100}
	got := api.DefaultRates()
	if len(got) != len(want) {
		t.Fatalf("%v", got)
	}
	for k, v := range want {
		if got[k] != v {
			t.Fatalf("%s: %v", k, got[k])
		}
	}
	// With the defaults, a burst of Suspend calls beyond 2 is throttled.
	e := newAPI(t, func(_ *registry.Options, o *api.Options) { o.Rates = nil })
	codes := ""
	for range 3 {
		codes += fmt.Sprint(e.do(t, "POST", base+"/microvm-x/suspend", "").status, " ")
	}
	if codes != "404 404 429 " {
		t.Fatalf("statuses %s", codes)
	}
}

func TestPagination(t *testing.T) {
	t.Parallel()
	e := newAPI(t, nil)
	var ids []string
	for i := range 7 {
		ids = append(ids, e.run(t, fmt.Sprintf(`{"imageIdentifier":"img-%d","imageVersion":"%d"}`, i%2, i%3)).MicrovmID)
	}
	var got []string
	next, pages := "", 0
	for {
		path := base + "?maxResults=3"
		if next != "" {
			path += "&nextToken=" + next
		}
		out := decode[microvmsapi.ListMicrovmsOutput](t, e.do(t, "GET", path, ""))
		pages++
		for _, it := range out.Items {
			got = append(got, it.MicrovmID)
		}
		if out.NextToken == "" {
			break
		}
		next = out.NextToken
	}
	if pages != 3 || len(got) != 7 {
		t.Fatalf("%d pages, %v", pages, got)
	}
	for i, id := range got {
		if id != ids[6-i] {
			t.Fatalf("order %v", got)
		}
	}
	out := decode[microvmsapi.ListMicrovmsOutput](t, e.do(t, "GET", base+"?imageIdentifier=img-1", ""))
	if len(out.Items) != 3 {
		t.Fatalf("image filter: %+v", out.Items)
	}
	out = decode[microvmsapi.ListMicrovmsOutput](t, e.do(t, "GET", base+"?imageIdentifier=img-0&imageVersion=0", ""))
	if len(out.Items) != 2 {
		t.Fatalf("version filter: %+v", out.Items)
	}
	r := e.do(t, "GET", base+"?imageIdentifier=none", "")
	if string(r.body) != `{"items":[]}` {
		t.Fatalf("empty list %s", r.body)
	}
}

func TestStateTransitions(t *testing.T) {
	t.Parallel()
	t.Run("run hook 500", func(t *testing.T) {
		t.Parallel()
		e := newAPI(t, nil)
		e.hooks.SetRun(500, 0)
		m := e.run(t, `{"imageIdentifier":"local"}`)
		if got := e.waitState(t, m.MicrovmID, microvmsapi.StateTerminated); got.StateReason != "platform_error: run hook failed with HTTP status 500" {
			t.Fatalf("%+v", got)
		}
	})
	t.Run("maximum duration", func(t *testing.T) {
		t.Parallel()
		e := newAPI(t, nil)
		m := e.run(t, `{"imageIdentifier":"local","maximumDurationInSeconds":1}`)
		e.waitState(t, m.MicrovmID, microvmsapi.StateRunning)
		if got := e.waitState(t, m.MicrovmID, microvmsapi.StateTerminated); got.StateReason != "max_duration" {
			t.Fatalf("%+v", got)
		}
	})
	t.Run("rayd exits", func(t *testing.T) {
		t.Parallel()
		e := newAPI(t, nil)
		m := e.run(t, `{"imageIdentifier":"local"}`)
		e.waitState(t, m.MicrovmID, microvmsapi.StateRunning)
		e.l.Instance(m.MicrovmID).Exit(42)
		if got := e.waitState(t, m.MicrovmID, microvmsapi.StateTerminated); got.StateReason != "init_exited: exit status 42" {
			t.Fatalf("%+v", got)
		}
	})
	t.Run("retention", func(t *testing.T) {
		t.Parallel()
		e := newAPI(t, func(o *registry.Options, _ *api.Options) { o.TerminatedRetention = time.Second })
		m := e.run(t, `{"imageIdentifier":"local"}`)
		e.do(t, "DELETE", base+"/"+m.MicrovmID, "")
		e.waitState(t, m.MicrovmID, microvmsapi.StateTerminated)
		time.Sleep(1100 * time.Millisecond)
		checkErr(t, e.do(t, "GET", base+"/"+m.MicrovmID, ""), 404, microvmsapi.ResourceNotFoundException, "The microVM does not exist.")
		checkErr(t, e.do(t, "DELETE", base+"/"+m.MicrovmID, ""), 404, microvmsapi.ResourceNotFoundException, "The microVM does not exist.")
	})
}

func TestAuthToken(t *testing.T) {
	t.Parallel()
	e := newAPI(t, nil)
	m := e.run(t, `{"imageIdentifier":"local"}`)
	e.waitState(t, m.MicrovmID, microvmsapi.StateRunning)
	path := base + "/" + m.MicrovmID + "/auth-token"
	out := decode[microvmsapi.CreateMicrovmAuthTokenOutput](t, e.do(t, "POST", path,
		`{"expirationInMinutes":60,"allowedPorts":[{"port":8080},{"range":{"startPort":3000,"endPort":3010}},{"allPorts":{}}]}`))
	if out.AuthToken["X-aws-proxy-auth"] != "tok."+m.MicrovmID+".60" || len(out.AuthToken) != 1 {
		t.Fatalf("%+v", out)
	}
	v := microvmsapi.ValidationException
	for body, msg := range map[string]string{
		`{"allowedPorts":[{"port":8080}]}`:                                                 "expirationInMinutes must be between 1 and 60.",
		`{"expirationInMinutes":61,"allowedPorts":[{"port":8080}]}`:                        "expirationInMinutes must be between 1 and 60.",
		`{"expirationInMinutes":5}`:                                                        "allowedPorts must list 1 to 16 entries.",
		`{"expirationInMinutes":5,"allowedPorts":[]}`:                                      "allowedPorts must list 1 to 16 entries.",
		`{"expirationInMinutes":5,"allowedPorts":[{}]}`:                                    "allowedPorts[0] must set exactly one of port, range and allPorts.",
		`{"expirationInMinutes":5,"allowedPorts":[{"port":0}]}`:                            "allowedPorts[0].port must be between 1 and 65535.",
		`{"expirationInMinutes":5,"allowedPorts":[{"port":8080,"x":1}]}`:                   "The request body has a field this operation does not accept.",
		`{"expirationInMinutes":5,"allowedPorts":[{"port":"8080"}]}`:                       "The field allowedPorts.port has the wrong type.",
		`{"expirationInMinutes":5,"allowedPorts":[{"range":{"startPort":9,"endPort":1}}]}`: "allowedPorts[0].range must satisfy 1 <= startPort <= endPort <= 65535.",
	} {
		checkErr(t, e.do(t, "POST", path, body), 400, v, msg)
	}
	e.m.Err = &registry.Error{Type: v, Message: "The allowed ports are not valid."}
	checkErr(t, e.do(t, "POST", path, `{"expirationInMinutes":5,"allowedPorts":[{"port":1}]}`), 400, v, "The allowed ports are not valid.")
	e.m.Err = errors.New("disk on fire")
	checkErr(t, e.do(t, "POST", path, `{"expirationInMinutes":5,"allowedPorts":[{"port":1}]}`), 500,
		microvmsapi.InternalServerException, "An internal error occurred.")
	e.m.Err = nil
	e.do(t, "DELETE", base+"/"+m.MicrovmID, "")
	checkErr(t, e.do(t, "POST", path, `{"expirationInMinutes":5,"allowedPorts":[{"port":1}]}`), 409,
		microvmsapi.ConflictException, "The microVM is terminated.")
}

// TestAuthTokenNeverHooksPort: port 9000, the lifecycle hooks', is refused
// before anything is minted, and never ends up in a token: allPorts is
// minted as the ranges around it.
func TestAuthTokenNeverHooksPort(t *testing.T) {
	t.Parallel()
	e := newAPI(t, nil)
	m := e.run(t, `{"imageIdentifier":"local"}`)
	e.waitState(t, m.MicrovmID, microvmsapi.StateRunning)
	path := base + "/" + m.MicrovmID + "/auth-token"
	v := microvmsapi.ValidationException
	for body, msg := range map[string]string{
		`{"expirationInMinutes":5,"allowedPorts":[{"port":9000}]}`:                                             "allowedPorts[0].port must not be 9000, the lifecycle hooks' port.",
		`{"expirationInMinutes":5,"allowedPorts":[{"port":8080},{"port":9000}]}`:                               "allowedPorts[1].port must not be 9000, the lifecycle hooks' port.",
		`{"expirationInMinutes":5,"allowedPorts":[{"range":{"startPort":8000,"endPort":9100}}]}`:               "allowedPorts[0].range must not cover port 9000, the lifecycle hooks' port.",
		`{"expirationInMinutes":5,"allowedPorts":[{"range":{"startPort":9000,"endPort":9000}}]}`:               "allowedPorts[0].range must not cover port 9000, the lifecycle hooks' port.",
		`{"expirationInMinutes":5,"allowedPorts":[{"allPorts":{}},{"port":9000}]}`:                             "allowedPorts[1].port must not be 9000, the lifecycle hooks' port.",
		`{"expirationInMinutes":5,"allowedPorts":[{"range":{"startPort":1,"endPort":65535}},{"allPorts":{}}]}`: "allowedPorts[0].range must not cover port 9000, the lifecycle hooks' port.",
	} {
		checkErr(t, e.do(t, "POST", path, body), 400, v, msg)
	}
	if n := e.m.Calls(); n != 0 {
		t.Fatalf("Mint called %d times for refused requests", n)
	}
	// Other invalid input keeps its own error, even next to allPorts.
	checkErr(t, e.do(t, "POST", path, `{"expirationInMinutes":5,"allowedPorts":[{"allPorts":{}},{"port":0}]}`), 400, v,
		"allowedPorts[1].port must be between 1 and 65535.")

	covers := func(ports []microvmsapi.AllowedPort, p int) bool {
		for _, a := range ports {
			if a.AllPorts != nil || a.Port != nil && *a.Port == p || a.Range != nil && a.Range.StartPort <= p && p <= a.Range.EndPort {
				return true
			}
		}
		return false
	}
	for _, tc := range []struct {
		body  string
		allow []int
	}{
		{`{"expirationInMinutes":5,"allowedPorts":[{"allPorts":{}}]}`, []int{1, 8080, 8999, 9001, 65535}},
		{`{"expirationInMinutes":5,"allowedPorts":[{"port":8080},{"allPorts":{}}]}`, []int{1, 8080, 8999, 9001, 65535}},
		{`{"expirationInMinutes":5,"allowedPorts":[{"range":{"startPort":8000,"endPort":8999}},{"range":{"startPort":9001,"endPort":9100}}]}`, []int{8000, 8999, 9001, 9100}},
	} {
		if res := e.do(t, "POST", path, tc.body); res.status != 200 {
			t.Fatalf("%s: %d %s", tc.body, res.status, res.body)
		}
		got := e.m.LastPorts()
		if covers(got, microvmsapi.HooksPort) {
			t.Fatalf("%s: minted with %+v, which covers 9000", tc.body, got)
		}
		for _, p := range tc.allow {
			if !covers(got, p) {
				t.Fatalf("%s: minted with %+v, which lacks %d", tc.body, got, p)
			}
		}
	}
}

func TestBrowserGuards(t *testing.T) {
	t.Parallel()
	e := newAPI(t, nil)
	checkErr(t, e.do(t, "POST", base, `{"imageIdentifier":"local"}`, "Origin", "https://evil.example"),
		403, microvmsapi.AccessDeniedException, "Requests from web pages are not accepted.")
	checkErr(t, e.do(t, "GET", base, "", "Host", "rebind.evil.example:7450"),
		403, microvmsapi.AccessDeniedException, "The Host header must name localhost or a loopback address.")
	for _, host := range []string{"localhost:7450", "LOCALHOST", "127.0.0.1", "127.0.0.2:1", "[::1]:7450"} {
		if r := e.do(t, "GET", base, "", "Host", host); r.status != 200 {
			t.Errorf("Host %s: %d", host, r.status)
		}
	}
	open := newAPI(t, func(_ *registry.Options, o *api.Options) { o.AllowAnyHost = true })
	if r := open.do(t, "GET", base, "", "Host", "sandbox-host.example"); r.status != 200 {
		t.Fatalf("AllowAnyHost: %d", r.status)
	}
}

// TestNoInputQuoted sends a marker in every place a message could echo.
func TestNoInputQuoted(t *testing.T) {
	t.Parallel()
	e := newAPI(t, func(o *registry.Options, _ *api.Options) { o.MaxSandboxes = 1 })
	const mark = "Zq9MARK"
	e.run(t, `{"imageIdentifier":"local","clientToken":"`+mark+`"}`)
	for _, c := range [][3]string{
		{"POST", base, `{"imageIdentifier":"` + mark + `","clientToken":"` + mark + `"}`},
		{"POST", base, `{"imageIdentifier":"x"}`},
		{"POST", base, `{"` + mark + `":1}`},
		{"POST", base, `{"imageIdentifier":"x","ingressNetworkConnectors":["` + mark + `"]}`},
		{"POST", base, `{"imageIdentifier":"x","runHookPayload":"` + strings.Repeat(mark, 600) + `"}`},
		{"POST", base, `{"imageIdentifier":` + mark + `}`},
		{"GET", base + "/" + mark, ""},
		{"GET", base + "?nextToken=" + mark, ""},
		{"GET", base + "?maxResults=" + mark, ""},
		{"POST", base + "/" + mark + "/auth-token", `{"expirationInMinutes":5,"allowedPorts":[{"port":1}]}`},
		{"GET", "/" + mark, ""},
	} {
		r := e.do(t, c[0], c[1], c[2])
		if r.status < 400 {
			t.Errorf("%s %s: %d", c[0], c[1], r.status)
		}
		if strings.Contains(string(r.body), mark) || strings.Contains(fmt.Sprint(r.hdr), mark) {
			t.Errorf("%s %s quotes the input: %s", c[0], c[1], r.body)
		}
	}
}

// panicky is a Backend whose Get panics and whose List fails.
type panicky struct{ api.Backend }

func (panicky) Get(string) (microvmsapi.Microvm, error) { panic("boom: secret") }
func (panicky) List(registry.ListInput) (microvmsapi.ListMicrovmsOutput, error) {
	return microvmsapi.ListMicrovmsOutput{}, errors.New("state dir gone")
}

func TestInternalErrors(t *testing.T) {
	t.Parallel()
	e := newAPI(t, func(_ *registry.Options, o *api.Options) { o.Backend = panicky{} })
	checkErr(t, e.do(t, "GET", base+"/x", ""), 500, microvmsapi.InternalServerException, "An internal error occurred.")
	checkErr(t, e.do(t, "GET", base, ""), 500, microvmsapi.InternalServerException, "An internal error occurred.")
	if _, err := api.New(api.Options{}); err == nil {
		t.Fatal("New without a backend")
	}
}

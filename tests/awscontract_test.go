package tests

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/rayito-dev/rayito/proto/microvmsapi"
	"github.com/rayito-dev/rayito/sdk/microvms"
	"github.com/rayito-dev/rayito/sdk/microvms/microvmstest"
)

// ccBackend is one implementation of the MicroVMs API that the client
// contract suite runs against.
type ccBackend struct {
	name string
	c    *microvms.Client
	// image returns what RunMicrovm's imageIdentifier (and ListMicrovms'
	// image filter) is for an image called name on this backend. The
	// backends differ here legitimately: the service (and the fake) want
	// the ARN of an existing, launchable image; localvm takes any
	// template name.
	image func(t *testing.T, name string) string
	// raw sends a request the client would refuse to send itself (signed
	// where the backend wants signatures) and returns the status and the
	// exception name.
	raw func(t *testing.T, method, pathQuery string, body []byte) (int, string)
	// suspend: the backend can suspend microVMs.
	suspend bool
	// dataPlane POSTs rayd's Health RPC (Connect, JSON) to port 8080 of
	// the microVM through its endpoint proxy, with headers, and returns
	// the status and the body.
	dataPlane func(t *testing.T, m *microvmsapi.Microvm, headers map[string]string) (int, []byte)
	// skip, when set, is why the backend is not available here.
	skip string
}

// ccCase is one case: it drives a backend through the client and returns
// what it observed, in a form that must be the same on every backend.
type ccCase struct {
	name string
	// needsSuspend skips backends that cannot suspend.
	needsSuspend bool
	run          func(t *testing.T, b *ccBackend) []string
}

// TestClientContract runs the same cases through the sdk/microvms client
// against every implementation of the API at hand:
//
//   - localvm, a real local platform (root only: its sandboxes need it);
//   - the scripted fake (microvmstest) in simulated mode, signed;
//   - the fake forwarding to that localvm (root only), signed.
//
// Each case checks the answers it expects and returns its observations
// (fields present, states after settling, error kinds and exception
// names); the suite then requires every backend to have observed the same.
func TestClientContract(t *testing.T) {
	var backends []*ccBackend
	backends = append(backends, ccFakeBackend(t, "fake", microvmstest.Options{}))
	if isRoot() {
		p := startPlatform(t, "")
		t.Cleanup(func() { p.stop(true) })
		backends = append(backends, ccLocalBackend(t, p))
		be, err := microvms.New(p.endpoint, microvms.Unsigned(), microvms.WithoutRateLimits())
		if err != nil {
			t.Fatal(err)
		}
		backends = append(backends, ccFakeBackend(t, "fake-forwarded", microvmstest.Options{Backend: be, BackendEndpoint: p.endpoint}))
	}
	if !isRoot() {
		const why = "localvm sandboxes need root: run the suite as root to compare localvm and the forwarding fake with the fake"
		backends = append(backends, &ccBackend{name: "localvm", skip: why}, &ccBackend{name: "fake-forwarded", skip: why})
	}

	for _, tc := range ccCases {
		t.Run(tc.name, func(t *testing.T) {
			obs := map[string][]string{}
			var ran []string
			for _, b := range backends {
				if b.skip != "" {
					t.Run(b.name, func(t *testing.T) { t.Skip(b.skip) })
					continue
				}
				if tc.needsSuspend && !b.suspend {
					t.Run(b.name, func(t *testing.T) { t.Skip("this backend cannot suspend") })
					continue
				}
				ok := t.Run(b.name, func(t *testing.T) { obs[b.name] = tc.run(t, b) })
				if ok {
					ran = append(ran, b.name)
				}
			}
			if len(ran) > 0 {
				t.Logf("%s observed (%s):\n  %s", strings.Join(ran, ", "), ran[0], strings.Join(obs[ran[0]], "\n  "))
			}
			for _, n := range ran[min(1, len(ran)):] {
				if !slices.Equal(obs[n], obs[ran[0]]) {
					t.Errorf("%s and %s answer differently:\n%s: %s\n%s: %s", ran[0], n,
						ran[0], strings.Join(obs[ran[0]], "\n  "), n, strings.Join(obs[n], "\n  "))
				}
			}
		})
	}
}

func ccFakeBackend(t *testing.T, name string, opts microvmstest.Options) *ccBackend {
	t.Helper()
	// The fake throttles at the service's TPS (Run 5/s, Terminate 10/s,
	// Suspend 2/s); localvm allows ten times as much. The suite is about
	// answers, not rates, so the fake gets localvm's rates.
	opts.Rates = map[microvms.Operation]float64{
		microvms.OpRunMicrovm: 50, microvms.OpTerminateMicrovm: 100, microvms.OpSuspendMicrovm: 20,
		microvms.OpResumeMicrovm: 50, microvms.OpGetMicrovm: 1000, microvms.OpListMicrovms: 1000,
	}
	if opts.Backend == nil {
		// Simulated microVMs have no rayd: this stand-in answers its
		// Health RPC the way the data-plane case reads it.
		opts.App = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method != http.MethodPost || r.URL.Path != "/rayito.rayd.v1.HealthService/Health" {
				http.NotFound(w, r)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(map[string]any{"sandboxId": r.Header.Get(microvmstest.MicrovmIDHeader), "agentReady": true})
		})
	}
	f, err := microvmstest.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	creds := f.Credentials()
	c, err := microvms.New(f.URL(),
		microvms.WithCredentials(aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) { return creds, nil })),
		microvms.WithRegion(f.Region()), microvms.WithoutRateLimits())
	if err != nil {
		t.Fatal(err)
	}
	return &ccBackend{
		name: name, c: c, suspend: true,
		image: func(t *testing.T, image string) string { return f.AddImage(name + "-" + image) },
		raw: func(t *testing.T, method, pathQuery string, body []byte) (int, string) {
			return ccRaw(t, f.URL(), method, pathQuery, body, func(r *http.Request) error { return f.SignRequest(r, body) })
		},
		// As on AWS: https://<endpoint>, here over h2 (force-h2, as the
		// SDK sends RPCs) and HTTP/1.1 in turn; both must answer alike.
		dataPlane: func(t *testing.T, m *microvmsapi.Microvm, headers map[string]string) (int, []byte) {
			st1, b1 := ccHealth(t, ccTLSClient(f, false), "https://"+m.Endpoint, "", headers)
			h := maps.Clone(headers)
			h[microvmsapi.ProxyForceH2Header] = "true"
			st2, b2 := ccHealth(t, ccTLSClient(f, true), "https://"+m.Endpoint, "", h)
			if st1 != st2 {
				t.Errorf("HTTP/1.1 answered %d %s, h2 %d %s", st1, b1, st2, b2)
			}
			return st1, b1
		},
	}
}

func ccTLSClient(f *microvmstest.Server, h2 bool) *http.Client {
	var p http.Protocols
	cfg := f.TLSClientConfig()
	if h2 {
		p.SetHTTP2(true)
	} else {
		p.SetHTTP1(true)
		cfg.NextProtos = []string{"http/1.1"}
	}
	return &http.Client{Transport: &http.Transport{TLSClientConfig: cfg, Protocols: &p}, Timeout: 20 * time.Second}
}

// ccHealth POSTs the Health RPC to base, with Host set to host unless
// empty.
func ccHealth(t *testing.T, hc *http.Client, base, host string, headers map[string]string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, base+"/rayito.rayd.v1.HealthService/Health", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	if host != "" {
		req.Host = host
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

func ccLocalBackend(t *testing.T, p *platform) *ccBackend {
	t.Helper()
	c, err := microvms.New(p.endpoint, microvms.Unsigned(), microvms.WithoutRateLimits())
	if err != nil {
		t.Fatal(err)
	}
	return &ccBackend{
		name: "localvm", c: c, suspend: p.srv.Privileged(),
		// Any template name will do; it is also what ListMicrovms filters on.
		image: func(t *testing.T, image string) string { return "localvm-" + image },
		raw: func(t *testing.T, method, pathQuery string, body []byte) (int, string) {
			return ccRaw(t, p.endpoint, method, pathQuery, body, nil)
		},
		// localvm's proxy shares the API's port and picks the microVM by
		// Host.
		dataPlane: func(t *testing.T, m *microvmsapi.Microvm, headers map[string]string) (int, []byte) {
			return ccHealth(t, http.DefaultClient, p.endpoint, m.Endpoint, headers)
		},
	}
}

func ccRaw(t *testing.T, base, method, pathQuery string, body []byte, sign func(*http.Request) error) (int, string) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, base+pathQuery, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if sign != nil {
		if err := sign(req); err != nil {
			t.Fatal(err)
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, resp.Header.Get(microvmsapi.ErrorTypeHeader)
}

// ccErr describes an error as the contract compares it: its kind, the
// exception name and the status ("ok" for nil).
func ccErr(err error) string {
	if err == nil {
		return "ok"
	}
	var ae *microvms.APIError
	if !errors.As(err, &ae) {
		return "transport error: " + err.Error()
	}
	return fmt.Sprintf("%s %s %d", ae.Kind, ae.Exception, ae.StatusCode)
}

// ccFields lists the JSON fields of v that are present.
func ccFields(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return strings.Join(keys, ",")
}

// ccRun runs a microVM of image (the backend's form of it) and terminates
// it when the test ends.
func ccRun(t *testing.T, b *ccBackend, in microvmsapi.RunMicrovmInput) *microvmsapi.Microvm {
	t.Helper()
	if in.Logging == nil {
		in.Logging = &microvmsapi.Logging{Disabled: &struct{}{}}
	}
	m, err := b.c.RunMicrovm(t.Context(), &in)
	if err != nil {
		t.Fatalf("RunMicrovm: %v", err)
	}
	t.Cleanup(func() { _ = b.c.TerminateMicrovm(context.Background(), m.MicrovmID) })
	return m
}

// ccSettle polls GetMicrovm until the state is want (or a terminal state
// that is not), for up to 20 seconds.
func ccSettle(t *testing.T, b *ccBackend, id string, want microvmsapi.State) *microvmsapi.Microvm {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		m, err := b.c.GetMicrovm(t.Context(), id)
		if err != nil {
			t.Fatalf("GetMicrovm: %v", err)
		}
		if m.State == want {
			return m
		}
		if m.State == microvmsapi.StateTerminated || time.Now().After(deadline) {
			t.Fatalf("microVM is %s (%s), want %s", m.State, m.StateReason, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// ccStarting folds the two states RunMicrovm may answer: the service (and
// the fake) say PENDING; localvm waits for the boot and usually says
// RUNNING.
func ccStarting(s microvmsapi.State) string {
	if s == microvmsapi.StatePending || s == microvmsapi.StateRunning {
		return "starting"
	}
	return string(s)
}

const ccUnknownID = "microvm-00000000-0000-4000-8000-000000000000"

func ccPort(p int) []microvmsapi.AllowedPort { return []microvmsapi.AllowedPort{{Port: &p}} }

var ccCases = []ccCase{
	{name: "Run", run: func(t *testing.T, b *ccBackend) []string {
		img := b.image(t, "run")
		m := ccRun(t, b, microvmsapi.RunMicrovmInput{ImageIdentifier: img, MaximumDurationInSeconds: 600})
		if !strings.HasPrefix(m.MicrovmID, "microvm-") || m.Endpoint == "" || m.ImageArn != img || m.StartedAt == nil {
			t.Errorf("RunMicrovm answered %+v", m)
		}
		if m.MaximumDurationInSeconds != 600 || m.Logging == nil || m.Logging.Disabled == nil {
			t.Errorf("the configuration is not echoed: %+v", m)
		}
		g := ccSettle(t, b, m.MicrovmID, microvmsapi.StateRunning)
		if g.MicrovmID != m.MicrovmID || g.Endpoint != m.Endpoint || g.ImageVersion != m.ImageVersion {
			t.Errorf("GetMicrovm %+v after RunMicrovm %+v", g, m)
		}
		return []string{
			"run fields: " + ccFields(t, m),
			"run state: " + ccStarting(m.State),
			"settled: " + string(g.State),
			"get fields: " + ccFields(t, g),
		}
	}},

	{name: "UnknownID", run: func(t *testing.T, b *ccBackend) []string {
		ctx := t.Context()
		_, getErr := b.c.GetMicrovm(ctx, ccUnknownID)
		termErr := b.c.TerminateMicrovm(ctx, ccUnknownID)
		_, tokErr := b.c.CreateMicrovmAuthToken(ctx, ccUnknownID, &microvmsapi.CreateMicrovmAuthTokenInput{ExpirationInMinutes: 5, AllowedPorts: ccPort(8080)})
		if !errors.Is(getErr, microvms.ErrNotFound) || !errors.Is(termErr, microvms.ErrNotFound) {
			t.Errorf("get %v, terminate %v: want not found", getErr, termErr)
		}
		obs := []string{"get: " + ccErr(getErr), "terminate: " + ccErr(termErr), "auth token: " + ccErr(tokErr)}
		if b.suspend {
			obs = append(obs, "suspend: "+ccErr(b.c.SuspendMicrovm(ctx, ccUnknownID)), "resume: "+ccErr(b.c.ResumeMicrovm(ctx, ccUnknownID)))
		}
		return obs
	}},

	{name: "ListPagination", run: func(t *testing.T, b *ccBackend) []string {
		ctx := t.Context()
		img := b.image(t, "list")
		var ids []string
		for range 3 {
			ids = append(ids, ccRun(t, b, microvmsapi.RunMicrovmInput{ImageIdentifier: img}).MicrovmID)
		}
		var obs, got []string
		in := microvms.ListInput{MaxResults: 2, ImageIdentifier: img}
		var sizes []int
		for page := 0; ; page++ {
			out, err := b.c.ListMicrovms(ctx, in)
			if err != nil {
				t.Fatalf("page %d: %v", page, err)
			}
			sizes = append(sizes, len(out.Items))
			for _, it := range out.Items {
				got = append(got, it.MicrovmID)
				if it.ImageArn != img {
					t.Errorf("item of another image: %+v", it)
				}
				if page == 0 {
					obs = append(obs, "item fields: "+ccFields(t, it))
				}
			}
			if out.NextToken == "" || page > 5 {
				break
			}
			in.NextToken = out.NextToken
		}
		obs = append(obs, fmt.Sprint("page sizes: ", sizes))
		rev := slices.Clone(ids)
		slices.Reverse(rev)
		switch {
		case slices.Equal(got, rev):
			obs = append(obs, "order: newest first")
		case slices.Equal(got, ids):
			obs = append(obs, "order: oldest first")
		default:
			t.Errorf("listed %v, ran %v", got, ids)
			obs = append(obs, "order: other")
		}
		n := 0
		for _, err := range b.c.ListAll(ctx, microvms.ListInput{MaxResults: 1, ImageIdentifier: img}) {
			if err != nil {
				t.Fatal(err)
			}
			n++
		}
		obs = append(obs, "ListAll: "+strconv.Itoa(n))
		_, err := b.c.ListMicrovms(ctx, microvms.ListInput{NextToken: "not-a-token"})
		obs = append(obs, "bad nextToken: "+ccErr(err))
		other, err := b.c.ListMicrovms(ctx, microvms.ListInput{ImageIdentifier: b.image(t, "list-none")})
		if err != nil {
			t.Fatal(err)
		}
		obs = append(obs, "other image: "+strconv.Itoa(len(other.Items)))
		return obs
	}},

	{name: "InvalidMaxResults", run: func(t *testing.T, b *ccBackend) []string {
		_, err := b.c.ListMicrovms(t.Context(), microvms.ListInput{MaxResults: 51})
		obs := []string{"client-side 51: " + ccErr(err)}
		for _, q := range []string{"0", "51", "abc", "-1"} {
			st, exc := b.raw(t, http.MethodGet, microvmsapi.PathMicrovms+"?maxResults="+q, nil)
			obs = append(obs, fmt.Sprintf("maxResults=%s: %d %s", q, st, exc))
		}
		return obs
	}},

	{name: "TerminateThenGet", run: func(t *testing.T, b *ccBackend) []string {
		ctx := t.Context()
		img := b.image(t, "terminate")
		m := ccRun(t, b, microvmsapi.RunMicrovmInput{ImageIdentifier: img})
		ccSettle(t, b, m.MicrovmID, microvmsapi.StateRunning)
		if err := b.c.TerminateMicrovm(ctx, m.MicrovmID); err != nil {
			t.Fatal(err)
		}
		g, err := b.c.GetMicrovm(ctx, m.MicrovmID)
		if err != nil {
			t.Fatal(err)
		}
		if g.State != microvmsapi.StateTerminating && g.State != microvmsapi.StateTerminated {
			t.Errorf("after terminate: %s", g.State)
		}
		g = ccSettle(t, b, m.MicrovmID, microvmsapi.StateTerminated)
		if g.StateReason == "" || g.TerminatedAt == nil {
			t.Errorf("terminated without reason or time: %+v", g)
		}
		l, err := b.c.ListMicrovms(ctx, microvms.ListInput{ImageIdentifier: img})
		if err != nil {
			t.Fatal(err)
		}
		listed := "not listed"
		for _, it := range l.Items {
			if it.MicrovmID == m.MicrovmID {
				listed = "listed " + string(it.State)
			}
		}
		_, tokErr := b.c.CreateMicrovmAuthToken(ctx, m.MicrovmID, &microvmsapi.CreateMicrovmAuthTokenInput{ExpirationInMinutes: 5, AllowedPorts: ccPort(8080)})
		obs := []string{
			"settled: " + string(g.State),
			"fields: " + ccFields(t, g),
			"list: " + listed,
			"terminate again: " + ccErr(b.c.TerminateMicrovm(ctx, m.MicrovmID)),
			"auth token: " + ccErr(tokErr),
		}
		if b.suspend {
			obs = append(obs, "suspend: "+ccErr(b.c.SuspendMicrovm(ctx, m.MicrovmID)))
		}
		return obs
	}},

	{name: "AuthToken", run: func(t *testing.T, b *ccBackend) []string {
		ctx := t.Context()
		m := ccRun(t, b, microvmsapi.RunMicrovmInput{ImageIdentifier: b.image(t, "token")})
		ccSettle(t, b, m.MicrovmID, microvmsapi.StateRunning)
		tok, err := b.c.CreateMicrovmAuthToken(ctx, m.MicrovmID, &microvmsapi.CreateMicrovmAuthTokenInput{ExpirationInMinutes: 5, AllowedPorts: ccPort(8080)})
		if err != nil || tok == "" {
			t.Fatalf("token %q, %v", tok, err)
		}
		_, zero := b.c.CreateMicrovmAuthToken(ctx, m.MicrovmID, &microvmsapi.CreateMicrovmAuthTokenInput{ExpirationInMinutes: 0, AllowedPorts: ccPort(8080)})
		obs := []string{"token: ok", "client-side expiration 0: " + ccErr(zero)}
		for _, body := range []string{
			`{"expirationInMinutes":61,"allowedPorts":[{"port":8080}]}`,
			`{"expirationInMinutes":0,"allowedPorts":[{"port":8080}]}`,
			`{"expirationInMinutes":5,"allowedPorts":[]}`,
			`{"expirationInMinutes":5,"allowedPorts":[{"port":70000}]}`,
			`{"expirationInMinutes":5,"allowedPorts":[{"range":{"startPort":10,"endPort":9}}]}`,
		} {
			st, exc := b.raw(t, http.MethodPost, microvmsapi.AuthTokenPath(m.MicrovmID), []byte(body))
			obs = append(obs, fmt.Sprintf("%s: %d %s", body, st, exc))
		}
		return obs
	}},

	{name: "ClientToken", run: func(t *testing.T, b *ccBackend) []string {
		ctx := t.Context()
		img := b.image(t, "idempotent")
		tok := "cc-" + b.name + "-" + strconv.FormatInt(time.Now().UnixNano(), 36)
		first := ccRun(t, b, microvmsapi.RunMicrovmInput{ImageIdentifier: img, ClientToken: tok, RunHookPayload: "one"})
		again, err := b.c.RunMicrovm(ctx, &microvmsapi.RunMicrovmInput{ImageIdentifier: img, ClientToken: tok, RunHookPayload: "one",
			Logging: &microvmsapi.Logging{Disabled: &struct{}{}}})
		same := "error " + ccErr(err)
		if err == nil {
			same = strconv.FormatBool(again.MicrovmID == first.MicrovmID)
		}
		_, conflict := b.c.RunMicrovm(ctx, &microvmsapi.RunMicrovmInput{ImageIdentifier: img, ClientToken: tok, RunHookPayload: "two",
			Logging: &microvmsapi.Logging{Disabled: &struct{}{}}})
		l, err := b.c.ListMicrovms(ctx, microvms.ListInput{ImageIdentifier: img})
		if err != nil {
			t.Fatal(err)
		}
		return []string{"same token, same body, same microVM: " + same, "same token, other body: " + ccErr(conflict),
			"microVMs: " + strconv.Itoa(len(l.Items))}
	}},

	{name: "SuspendResume", needsSuspend: true, run: func(t *testing.T, b *ccBackend) []string {
		ctx := t.Context()
		m := ccRun(t, b, microvmsapi.RunMicrovmInput{ImageIdentifier: b.image(t, "suspend")})
		ccSettle(t, b, m.MicrovmID, microvmsapi.StateRunning)
		if err := b.c.SuspendMicrovm(ctx, m.MicrovmID); err != nil {
			t.Fatal(err)
		}
		s := ccSettle(t, b, m.MicrovmID, microvmsapi.StateSuspended)
		again := b.c.SuspendMicrovm(ctx, m.MicrovmID)
		if err := b.c.ResumeMicrovm(ctx, m.MicrovmID); err != nil {
			t.Fatal(err)
		}
		r := ccSettle(t, b, m.MicrovmID, microvmsapi.StateRunning)
		resumeRunning := b.c.ResumeMicrovm(ctx, m.MicrovmID)
		return []string{"suspended: " + string(s.State), "suspend again: " + ccErr(again), "resumed: " + string(r.State),
			"resume a running one: " + ccErr(resumeRunning)}
	}},

	{name: "DataPlane", run: func(t *testing.T, b *ccBackend) []string {
		ctx := t.Context()
		img := b.image(t, "dataplane")
		m := ccRun(t, b, microvmsapi.RunMicrovmInput{ImageIdentifier: img})
		other := ccRun(t, b, microvmsapi.RunMicrovmInput{ImageIdentifier: img})
		ccSettle(t, b, m.MicrovmID, microvmsapi.StateRunning)
		tok, err := b.c.CreateMicrovmAuthToken(ctx, m.MicrovmID, &microvmsapi.CreateMicrovmAuthTokenInput{ExpirationInMinutes: 5, AllowedPorts: ccPort(8080)})
		if err != nil {
			t.Fatal(err)
		}
		otherTok, err := b.c.CreateMicrovmAuthToken(ctx, other.MicrovmID, &microvmsapi.CreateMicrovmAuthTokenInput{ExpirationInMinutes: 5, AllowedPorts: ccPort(8080)})
		if err != nil {
			t.Fatal(err)
		}
		st, body := b.dataPlane(t, m, map[string]string{microvmsapi.ProxyAuthHeader: tok, microvmsapi.ProxyPortHeader: "8080"})
		var h struct {
			SandboxID string `json:"sandboxId"`
		}
		if st != 200 || json.Unmarshal(body, &h) != nil || h.SandboxID != m.MicrovmID {
			t.Errorf("health through the endpoint: %d %s", st, body)
		}
		obs := []string{fmt.Sprintf("health: %d, sandboxId is the microVM's: %t", st, h.SandboxID == m.MicrovmID)}
		// Not compared: a request without x-aws-proxy-port (AWS and the
		// fake: 400; localvm: port 8080).
		for _, tc := range []struct {
			name    string
			headers map[string]string
		}{
			{"bad port header", map[string]string{microvmsapi.ProxyAuthHeader: tok, microvmsapi.ProxyPortHeader: "80a"}},
			{"no token", map[string]string{microvmsapi.ProxyPortHeader: "8080"}},
			{"garbage token", map[string]string{microvmsapi.ProxyAuthHeader: "x.y.z", microvmsapi.ProxyPortHeader: "8080"}},
			{"port not in token", map[string]string{microvmsapi.ProxyAuthHeader: tok, microvmsapi.ProxyPortHeader: "8081"}},
			{"hooks port", map[string]string{microvmsapi.ProxyAuthHeader: tok, microvmsapi.ProxyPortHeader: "9000"}},
			{"another microVM's token", map[string]string{microvmsapi.ProxyAuthHeader: otherTok, microvmsapi.ProxyPortHeader: "8080"}},
		} {
			st, _ := b.dataPlane(t, m, tc.headers)
			obs = append(obs, fmt.Sprintf("%s: %d", tc.name, st))
		}
		return obs
	}},

	{name: "RunValidation", run: func(t *testing.T, b *ccBackend) []string {
		// A bare name is not in the contract: the service (and the fake)
		// answer "Invalid ARN format", localvm takes any template name.
		img := b.image(t, "validation")
		q := strconv.Quote(img)
		var obs []string
		for _, tc := range []struct{ name, body string }{
			{"duration 0", `{"imageIdentifier":` + q + `,"maximumDurationInSeconds":0}`},
			{"duration 28801", `{"imageIdentifier":` + q + `,"maximumDurationInSeconds":28801}`},
			{"idle policy partial", `{"imageIdentifier":` + q + `,"idlePolicy":{"maxIdleDurationSeconds":60}}`},
			{"idle 59", `{"imageIdentifier":` + q + `,"idlePolicy":{"maxIdleDurationSeconds":59,"suspendedDurationSeconds":0,"autoResumeEnabled":false}}`},
			{"NO_EGRESS", `{"imageIdentifier":` + q + `,"egressNetworkConnectors":[` + strconv.Quote(microvmsapi.ConnectorARN("us-east-1", "NO_EGRESS")) + `]}`},
			{"payload 4097", `{"imageIdentifier":` + q + `,"runHookPayload":"` + strings.Repeat("x", 4097) + `"}`},
			{"logging both", `{"imageIdentifier":` + q + `,"logging":{"disabled":{},"cloudWatch":{"logGroup":"g"}}}`},
			{"no image", `{}`},
			{"bad JSON", `{"imageIdentifier":`},
			{"unknown field", `{"imageIdentifier":` + q + `,"bogus":true}`},
		} {
			st, exc := b.raw(t, http.MethodPost, microvmsapi.PathMicrovms, []byte(tc.body))
			obs = append(obs, fmt.Sprintf("%s: %d %s", tc.name, st, exc))
		}
		return obs
	}},
}

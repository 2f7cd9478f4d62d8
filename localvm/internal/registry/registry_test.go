package registry_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rayito-dev/rayito/localvm/internal/registry"
	"github.com/rayito-dev/rayito/localvm/internal/registry/registrytest"
	"github.com/rayito-dev/rayito/proto/microvmsapi"
)

type env struct {
	dir   string
	l     *registrytest.Launcher
	hooks *registrytest.Hooks
	m     *registrytest.Minter
	opts  registry.Options
}

func newEnv(t *testing.T) *env {
	t.Helper()
	e := &env{dir: t.TempDir(), hooks: registrytest.NewHooks(t), m: &registrytest.Minter{}}
	e.l = &registrytest.Launcher{HooksAddr: e.hooks.Addr(), APIAddr: "127.0.0.1:18080"}
	e.opts = registry.Options{StateDir: e.dir, Launcher: e.l, Minter: e.m}
	return e
}

func (e *env) open(t *testing.T) *registry.Registry {
	t.Helper()
	r, err := registry.Open(t.Context(), e.opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = r.Close(ctx)
	})
	return r
}

func run(t *testing.T, r *registry.Registry, in microvmsapi.RunMicrovmInput) microvmsapi.Microvm {
	t.Helper()
	if in.ImageIdentifier == "" {
		in.ImageIdentifier = "local"
	}
	m, err := r.Run(t.Context(), in)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	return m
}

// wait polls until the microVM is in state.
func wait(t *testing.T, r *registry.Registry, id string, state microvmsapi.State) microvmsapi.Microvm {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		m, err := r.Get(id)
		if err != nil {
			t.Fatalf("Get: %v", err)
		}
		if m.State == state {
			return m
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s is %s (%s), want %s", id, m.State, m.StateReason, state)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func wantType(t *testing.T, err error, typ string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want %s", typ)
	}
	if got := registry.TypeOf(err); got != typ {
		t.Fatalf("error %v has type %s, want %s", err, got, typ)
	}
}

func readState(t *testing.T, dir, id string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "vms", id+".json"))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func fileState(t *testing.T, dir, id string) string {
	t.Helper()
	return readState(t, dir, id)["microvm"].(map[string]any)["state"].(string)
}

// waitFile polls until the state file says state: the registry writes it
// just after the change becomes visible.
func waitFile(t *testing.T, dir, id, state string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for fileState(t, dir, id) != state {
		if time.Now().After(deadline) {
			t.Fatalf("state file of %s is %s, want %s", id, fileState(t, dir, id), state)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestRunToRunning(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.open(t)
	payload := `{"v":1,"token_sha256":"secret-ish"}`
	m := run(t, r, microvmsapi.RunMicrovmInput{
		RunHookPayload:          payload,
		EgressNetworkConnectors: []string{microvmsapi.ConnectorARN("us-east-1", microvmsapi.ConnectorInternet)},
	})
	if m.State != microvmsapi.StatePending || !strings.HasPrefix(m.MicrovmID, "microvm-") {
		t.Fatalf("Run answered %+v", m)
	}
	uuidPart := strings.TrimPrefix(m.MicrovmID, "microvm-")
	if m.Endpoint != uuidPart+".microvms.localhost" || m.ImageArn != "local" || m.ImageVersion != "1.0" ||
		m.MaximumDurationInSeconds != 28800 || m.StartedAt == nil {
		t.Fatalf("Run answered %+v", m)
	}
	got := wait(t, r, m.MicrovmID, microvmsapi.StateRunning)
	if got.StateReason != "" || got.TerminatedAt != nil {
		t.Fatalf("running: %+v", got)
	}
	runs := e.hooks.Runs()
	if len(runs) != 1 || runs[0].MicrovmID != m.MicrovmID || runs[0].RunHookPayload != payload {
		t.Fatalf("run hook calls %+v", runs)
	}
	specs := e.l.Launched()
	vmDir := filepath.Join(e.dir, "vms", m.MicrovmID)
	if len(specs) != 1 || specs[0].ID != m.MicrovmID || !specs[0].Internet || specs[0].Dir != vmDir ||
		specs[0].LogPath != filepath.Join(vmDir, "rayd.log") {
		t.Fatalf("specs %+v", specs)
	}

	// Files: dirs 0700, state file 0600, no payload inside, the record.
	for path, want := range map[string]os.FileMode{
		e.dir: 0o700 | os.ModeDir, filepath.Join(e.dir, "vms"): 0o700 | os.ModeDir, vmDir: 0o700 | os.ModeDir,
		filepath.Join(e.dir, "vms", m.MicrovmID+".json"): 0o600,
	} {
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode() != want {
			t.Errorf("%s has mode %v, want %v", path, fi.Mode(), want)
		}
	}
	raw, _ := os.ReadFile(filepath.Join(e.dir, "vms", m.MicrovmID+".json"))
	if strings.Contains(string(raw), "secret-ish") || strings.Contains(string(raw), "token_sha256") {
		t.Fatal("the state file holds the payload")
	}
	waitFile(t, e.dir, m.MicrovmID, "RUNNING")
	st := readState(t, e.dir, m.MicrovmID)
	if st["microvm"].(map[string]any)["state"] != "RUNNING" || st["record"].(map[string]any)["id"] != m.MicrovmID {
		t.Fatalf("state file %s", raw)
	}
	entries, _ := os.ReadDir(filepath.Join(e.dir, "vms"))
	for _, en := range entries {
		if strings.HasPrefix(en.Name(), ".tmp") {
			t.Fatalf("temporary file left: %s", en.Name())
		}
	}
}

func TestNoInternetWithoutConnector(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.open(t)
	m := run(t, r, microvmsapi.RunMicrovmInput{})
	wait(t, r, m.MicrovmID, microvmsapi.StateRunning)
	if e.l.Launched()[0].Internet {
		t.Fatal("Internet without INTERNET_EGRESS")
	}
}

func TestRunHookFailure(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.hooks.SetRun(http.StatusInternalServerError, 0)
	r := e.open(t)
	m := run(t, r, microvmsapi.RunMicrovmInput{})
	got := wait(t, r, m.MicrovmID, microvmsapi.StateTerminated)
	if got.StateReason != "platform_error: run hook failed with HTTP status 500" || got.TerminatedAt == nil {
		t.Fatalf("got %+v", got)
	}
	if n := e.l.Instance(m.MicrovmID).Terminated(); n != 1 {
		t.Fatalf("Terminate called %d times", n)
	}
	if e.hooks.Terminates() != 1 {
		t.Fatalf("terminate hook called %d times", e.hooks.Terminates())
	}
	waitFile(t, e.dir, m.MicrovmID, "TERMINATED")
}

func TestRunHookTimeout(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.hooks.SetRun(http.StatusOK, 5*time.Second)
	e.opts.RunHookTimeout = 200 * time.Millisecond
	r := e.open(t)
	m := run(t, r, microvmsapi.RunMicrovmInput{})
	if got := wait(t, r, m.MicrovmID, microvmsapi.StateTerminated); got.StateReason != registry.ReasonRunHookTimeout {
		t.Fatalf("got %+v", got)
	}
}

func TestRunHookRetriesUntilRaydListens(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	// Nothing listens on the hooks address at first.
	hooks := registrytest.NewHooks(t)
	addr := hooks.Addr()
	hooks.Server.Close()
	e.l.HooksAddr = addr
	e.opts.RunHookTimeout = 300 * time.Millisecond
	r := e.open(t)
	m := run(t, r, microvmsapi.RunMicrovmInput{})
	if got := wait(t, r, m.MicrovmID, microvmsapi.StateTerminated); got.StateReason != registry.ReasonRunHookTimeout {
		t.Fatalf("got %+v", got)
	}
}

func TestLaunchFailure(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.l.LaunchErr = errors.New("no cgroup\nfor you")
	r := e.open(t)
	m := run(t, r, microvmsapi.RunMicrovmInput{})
	got := wait(t, r, m.MicrovmID, microvmsapi.StateTerminated)
	// A fixed text: the launch error (which may name paths) goes to the
	// log only.
	if got.StateReason != "platform_error: sandbox launch failed" {
		t.Fatalf("got %q", got.StateReason)
	}
	if len(e.hooks.Runs()) != 0 {
		t.Fatal("run hook called without a sandbox")
	}
}

func TestMaximumDuration(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.open(t)
	m := run(t, r, microvmsapi.RunMicrovmInput{MaximumDurationInSeconds: 1})
	wait(t, r, m.MicrovmID, microvmsapi.StateRunning)
	got := wait(t, r, m.MicrovmID, microvmsapi.StateTerminated)
	if got.StateReason != registry.ReasonMaxDuration {
		t.Fatalf("got %+v", got)
	}
	if d := got.TerminatedAt.Sub(*got.StartedAt); d < time.Second || d > 5*time.Second {
		t.Fatalf("terminated after %v", d)
	}
	if e.hooks.Terminates() != 1 || e.l.Instance(m.MicrovmID).Terminated() != 1 {
		t.Fatal("teardown incomplete")
	}
}

func TestRaydExitsByItself(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.open(t)
	m := run(t, r, microvmsapi.RunMicrovmInput{})
	wait(t, r, m.MicrovmID, microvmsapi.StateRunning)
	e.l.Instance(m.MicrovmID).Exit(3)
	got := wait(t, r, m.MicrovmID, microvmsapi.StateTerminated)
	if got.StateReason != "init_exited: exit status 3" {
		t.Fatalf("got %+v", got)
	}
	if e.hooks.Terminates() != 0 {
		t.Fatal("terminate hook called on an exited rayd")
	}
	if e.l.Instance(m.MicrovmID).Terminated() != 1 {
		t.Fatal("traces not cleaned up")
	}
}

func TestTerminate(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.open(t)
	m := run(t, r, microvmsapi.RunMicrovmInput{})
	wait(t, r, m.MicrovmID, microvmsapi.StateRunning)
	if err := r.Terminate(m.MicrovmID); err != nil {
		t.Fatal(err)
	}
	got, _ := r.Get(m.MicrovmID)
	if got.State != microvmsapi.StateTerminating && got.State != microvmsapi.StateTerminated {
		t.Fatalf("after Terminate: %s", got.State)
	}
	got = wait(t, r, m.MicrovmID, microvmsapi.StateTerminated)
	if got.StateReason != "killed_by_user" || got.TerminatedAt == nil {
		t.Fatalf("got %+v", got)
	}
	for range 2 { // idempotent
		if err := r.Terminate(m.MicrovmID); err != nil {
			t.Fatal(err)
		}
	}
	if e.hooks.Terminates() != 1 || e.l.Instance(m.MicrovmID).Terminated() != 1 {
		t.Fatalf("hook %d, Terminate %d", e.hooks.Terminates(), e.l.Instance(m.MicrovmID).Terminated())
	}
	wantType(t, r.Terminate("microvm-nope"), microvmsapi.ResourceNotFoundException)
}

func TestTerminateWhilePending(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.l.LaunchGate = make(chan struct{}) // Launch blocks until its context ends
	r := e.open(t)
	m := run(t, r, microvmsapi.RunMicrovmInput{})
	if err := r.Terminate(m.MicrovmID); err != nil {
		t.Fatal(err)
	}
	got := wait(t, r, m.MicrovmID, microvmsapi.StateTerminated)
	if got.StateReason != registry.ReasonKilledByUser {
		t.Fatalf("got %+v", got)
	}
	if len(e.hooks.Runs()) != 0 {
		t.Fatal("run hook called")
	}
}

func TestRetention(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.opts.TerminatedRetention = time.Second
	r := e.open(t)
	m := run(t, r, microvmsapi.RunMicrovmInput{})
	wait(t, r, m.MicrovmID, microvmsapi.StateRunning)
	if err := r.Terminate(m.MicrovmID); err != nil {
		t.Fatal(err)
	}
	wait(t, r, m.MicrovmID, microvmsapi.StateTerminated)
	if l, _ := r.List(registry.ListInput{}); len(l.Items) != 1 {
		t.Fatalf("TERMINATED not listed: %+v", l)
	}
	if _, ok := r.Lookup(m.Endpoint); !ok {
		t.Fatal("Lookup lost a TERMINATED microVM")
	}
	time.Sleep(1100 * time.Millisecond)
	if _, ok := r.Lookup(m.Endpoint); ok {
		t.Fatal("Lookup found an expired microVM")
	}
	_, err := r.Get(m.MicrovmID)
	wantType(t, err, microvmsapi.ResourceNotFoundException)
	if l, _ := r.List(registry.ListInput{}); len(l.Items) != 0 {
		t.Fatalf("expired still listed: %+v", l)
	}
	wantType(t, r.Terminate(m.MicrovmID), microvmsapi.ResourceNotFoundException)
	for _, p := range []string{m.MicrovmID + ".json", m.MicrovmID} {
		if _, err := os.Stat(filepath.Join(e.dir, "vms", p)); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("%s still there: %v", p, err)
		}
	}
}

func TestQuota(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.opts.MaxSandboxes = 2
	r := e.open(t)
	a := run(t, r, microvmsapi.RunMicrovmInput{})
	run(t, r, microvmsapi.RunMicrovmInput{})
	_, err := r.Run(t.Context(), microvmsapi.RunMicrovmInput{ImageIdentifier: "local"})
	wantType(t, err, microvmsapi.ServiceQuotaExceededException)
	if err := r.Terminate(a.MicrovmID); err != nil {
		t.Fatal(err)
	}
	wait(t, r, a.MicrovmID, microvmsapi.StateTerminated)
	run(t, r, microvmsapi.RunMicrovmInput{})
}

func TestClientToken(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.opts.MaxSandboxes = 1
	r := e.open(t)
	in := microvmsapi.RunMicrovmInput{ImageIdentifier: "local", ClientToken: "tok-1", RunHookPayload: "p"}
	a := run(t, r, in)
	b := run(t, r, in) // a replay does not count against the quota
	if a.MicrovmID != b.MicrovmID {
		t.Fatalf("replay created %s, first %s", b.MicrovmID, a.MicrovmID)
	}
	in2 := in
	in2.RunHookPayload = "other"
	_, err := r.Run(t.Context(), in2)
	wantType(t, err, microvmsapi.ConflictException)
	if strings.Contains(err.Error(), "tok-1") || strings.Contains(err.Error(), "other") {
		t.Fatalf("message quotes input: %v", err)
	}
	// Explicit default duration is the same input.
	in3 := in
	in3.MaximumDurationInSeconds = 28800
	if c := run(t, r, in3); c.MicrovmID != a.MicrovmID {
		t.Fatal("defaulted duration made a different input")
	}
	if len(e.l.Launched()) > 1 {
		t.Fatal("replay launched again")
	}
}

func TestRunValidation(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.open(t)
	conn := func(name string) string { return microvmsapi.ConnectorARN("eu-west-1", name) }
	ok := func(in *microvmsapi.RunMicrovmInput) {}
	cases := map[string]func(in *microvmsapi.RunMicrovmInput){
		"no image":    func(in *microvmsapi.RunMicrovmInput) { in.ImageIdentifier = "" },
		"long image":  func(in *microvmsapi.RunMicrovmInput) { in.ImageIdentifier = strings.Repeat("a", 2049) },
		"negative":    func(in *microvmsapi.RunMicrovmInput) { in.MaximumDurationInSeconds = -1 },
		"too long":    func(in *microvmsapi.RunMicrovmInput) { in.MaximumDurationInSeconds = 28801 },
		"payload":     func(in *microvmsapi.RunMicrovmInput) { in.RunHookPayload = strings.Repeat("x", 4097) },
		"bad utf8":    func(in *microvmsapi.RunMicrovmInput) { in.RunHookPayload = "\xff" },
		"token long":  func(in *microvmsapi.RunMicrovmInput) { in.ClientToken = strings.Repeat("t", 129) },
		"token space": func(in *microvmsapi.RunMicrovmInput) { in.ClientToken = "a b" },
		"idle short": func(in *microvmsapi.RunMicrovmInput) {
			in.IdlePolicy = &microvmsapi.IdlePolicy{MaxIdleDurationSeconds: 59}
		},
		"idle negative": func(in *microvmsapi.RunMicrovmInput) {
			in.IdlePolicy = &microvmsapi.IdlePolicy{MaxIdleDurationSeconds: 60, SuspendedDurationSeconds: -1}
		},
		"logging none": func(in *microvmsapi.RunMicrovmInput) { in.Logging = &microvmsapi.Logging{} },
		"logging group": func(in *microvmsapi.RunMicrovmInput) {
			in.Logging = &microvmsapi.Logging{CloudWatch: &microvmsapi.CloudWatchLogging{}}
		},
		"egress NO_EGRESS": func(in *microvmsapi.RunMicrovmInput) { in.EgressNetworkConnectors = []string{conn("NO_EGRESS")} },
		"egress ingress":   func(in *microvmsapi.RunMicrovmInput) { in.EgressNetworkConnectors = []string{conn("ALL_INGRESS")} },
		"ingress egress":   func(in *microvmsapi.RunMicrovmInput) { in.IngressNetworkConnectors = []string{conn("INTERNET_EGRESS")} },
		"bad arn": func(in *microvmsapi.RunMicrovmInput) {
			in.IngressNetworkConnectors = []string{"arn:aws:lambda:us-east-1:aws:thing:ALL_INGRESS"}
		},
		"bad region": func(in *microvmsapi.RunMicrovmInput) {
			in.IngressNetworkConnectors = []string{"arn:aws:lambda:US_EAST:aws:network-connector:aws-network-connector:NO_INGRESS"}
		},
		"empty region": func(in *microvmsapi.RunMicrovmInput) {
			in.IngressNetworkConnectors = []string{microvmsapi.ConnectorARN("", "NO_INGRESS")}
		},
		"11 connectors": func(in *microvmsapi.RunMicrovmInput) {
			for range 11 {
				in.IngressNetworkConnectors = append(in.IngressNetworkConnectors, conn("ALL_INGRESS"))
			}
		},
	}
	for name, mod := range cases {
		in := microvmsapi.RunMicrovmInput{ImageIdentifier: "local"}
		mod(&in)
		_, err := r.Run(t.Context(), in)
		if registry.TypeOf(err) != microvmsapi.ValidationException {
			t.Errorf("%s: got %v", name, err)
		}
	}
	for _, mod := range []func(in *microvmsapi.RunMicrovmInput){ok,
		func(in *microvmsapi.RunMicrovmInput) {
			in.ImageIdentifier = "arn:aws:lambda:us-east-1:123456789012:microvm-image:x"
			in.MaximumDurationInSeconds = 1
			in.RunHookPayload = strings.Repeat("é", 4096)
			in.ClientToken = strings.Repeat("t", 128)
			in.IdlePolicy = &microvmsapi.IdlePolicy{MaxIdleDurationSeconds: 60}
			in.Logging = &microvmsapi.Logging{Disabled: &struct{}{}}
			in.IngressNetworkConnectors = []string{conn("ALL_INGRESS"), conn("NO_INGRESS"), conn("SHELL_INGRESS"), conn("HTTP_INGRESS")}
			in.EgressNetworkConnectors = []string{conn("INTERNET_EGRESS")}
		},
	} {
		in := microvmsapi.RunMicrovmInput{ImageIdentifier: "local"}
		mod(&in)
		m := run(t, r, in)
		if in.Logging != nil && (m.Logging == nil || m.IdlePolicy == nil || len(m.IngressNetworkConnectors) != 4) {
			t.Fatalf("configuration not echoed: %+v", m)
		}
	}
}

func TestList(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.open(t)
	var ids []string
	for i := range 7 {
		img := "img-a"
		if i%2 == 1 {
			img = "img-b"
		}
		ids = append(ids, run(t, r, microvmsapi.RunMicrovmInput{ImageIdentifier: img, ImageVersion: fmt.Sprint(i % 3)}).MicrovmID)
	}
	// Three pages of 3, 3, 1, newest first.
	var got []string
	tok := ""
	pages := 0
	for {
		out, err := r.List(registry.ListInput{MaxResults: 3, NextToken: tok})
		if err != nil {
			t.Fatal(err)
		}
		pages++
		for _, it := range out.Items {
			got = append(got, it.MicrovmID)
			if it.ImageArn == "" || it.StartedAt == nil || !it.State.Valid() {
				t.Fatalf("item %+v", it)
			}
		}
		if out.NextToken == "" {
			break
		}
		tok = out.NextToken
		if pages == 1 {
			// A microVM created between pages does not disturb the walk.
			run(t, r, microvmsapi.RunMicrovmInput{})
		}
	}
	if pages != 3 || len(got) != 7 {
		t.Fatalf("%d pages, %d items", pages, len(got))
	}
	for i := range got {
		if got[i] != ids[len(ids)-1-i] {
			t.Fatalf("order %v, created %v", got, ids)
		}
	}
	out, _ := r.List(registry.ListInput{ImageIdentifier: "img-b"})
	if len(out.Items) != 3 {
		t.Fatalf("filter image: %+v", out.Items)
	}
	out, _ = r.List(registry.ListInput{ImageIdentifier: "img-a", ImageVersion: "0"})
	if len(out.Items) != 2 || out.Items[0].MicrovmID != ids[6] || out.Items[1].MicrovmID != ids[0] {
		t.Fatalf("filter version: %+v", out.Items)
	}
	out, _ = r.List(registry.ListInput{ImageIdentifier: "none"})
	if out.Items == nil || len(out.Items) != 0 || out.NextToken != "" {
		t.Fatalf("empty list: %+v", out)
	}
	for _, in := range []registry.ListInput{{MaxResults: -1}, {MaxResults: 51}, {NextToken: "garbage!"},
		{NextToken: "djE6MA"} /* v1:0 */, {NextToken: "eHg"}, {NextToken: strings.Repeat("A", 100)}} {
		_, err := r.List(in)
		wantType(t, err, microvmsapi.ValidationException)
	}
}

func TestCreateAuthToken(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.open(t)
	m := run(t, r, microvmsapi.RunMicrovmInput{})
	wait(t, r, m.MicrovmID, microvmsapi.StateRunning)
	port := 8080
	in := microvmsapi.CreateMicrovmAuthTokenInput{ExpirationInMinutes: 5, AllowedPorts: []microvmsapi.AllowedPort{{Port: &port}}}
	out, err := r.CreateAuthToken(m.MicrovmID, in)
	if err != nil {
		t.Fatal(err)
	}
	if out.AuthToken["X-aws-proxy-auth"] != "tok."+m.MicrovmID+".5" {
		t.Fatalf("got %+v", out)
	}
	_, err = r.CreateAuthToken("microvm-x", in)
	wantType(t, err, microvmsapi.ResourceNotFoundException)

	bad, zero, big := 70000, 0, 61
	for _, b := range []microvmsapi.CreateMicrovmAuthTokenInput{
		{ExpirationInMinutes: 0, AllowedPorts: in.AllowedPorts},
		{ExpirationInMinutes: big, AllowedPorts: in.AllowedPorts},
		{ExpirationInMinutes: 1},
		{ExpirationInMinutes: 1, AllowedPorts: []microvmsapi.AllowedPort{{}}},
		{ExpirationInMinutes: 1, AllowedPorts: []microvmsapi.AllowedPort{{Port: &bad}}},
		{ExpirationInMinutes: 1, AllowedPorts: []microvmsapi.AllowedPort{{Port: &zero}}},
		{ExpirationInMinutes: 1, AllowedPorts: []microvmsapi.AllowedPort{{Port: &port, AllPorts: &struct{}{}}}},
		{ExpirationInMinutes: 1, AllowedPorts: []microvmsapi.AllowedPort{{Range: &microvmsapi.PortRange{StartPort: 10, EndPort: 9}}}},
		{ExpirationInMinutes: 1, AllowedPorts: make([]microvmsapi.AllowedPort, 17)},
	} {
		_, err := r.CreateAuthToken(m.MicrovmID, b)
		wantType(t, err, microvmsapi.ValidationException)
	}

	e.m.Err = &registry.Error{Type: microvmsapi.ValidationException, Message: "bad ports"}
	_, err = r.CreateAuthToken(m.MicrovmID, in)
	wantType(t, err, microvmsapi.ValidationException)
	e.m.Err = errors.New("key broken")
	_, err = r.CreateAuthToken(m.MicrovmID, in)
	wantType(t, err, microvmsapi.InternalServerException)
	e.m.Err = nil

	if err := r.Terminate(m.MicrovmID); err != nil {
		t.Fatal(err)
	}
	_, err = r.CreateAuthToken(m.MicrovmID, in)
	wantType(t, err, microvmsapi.ConflictException)
}

func TestLookup(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.l.Priv = true
	r := e.open(t)
	e.hooks.SetRun(http.StatusOK, 300*time.Millisecond)
	m := run(t, r, microvmsapi.RunMicrovmInput{})
	tg, ok := r.Lookup(strings.ToUpper(m.Endpoint) + ".:443")
	if !ok || tg.MicrovmID() != m.MicrovmID {
		t.Fatal("Lookup failed")
	}
	if tg.Running() {
		t.Fatal("PENDING is Running")
	}
	if _, err := tg.Addr(8080); !errors.Is(err, registry.ErrNotRunning) {
		t.Fatalf("Addr while pending: %v", err)
	}
	wait(t, r, m.MicrovmID, microvmsapi.StateRunning)
	if !tg.Running() {
		t.Fatal("not Running")
	}
	if a, err := tg.Addr(8080); err != nil || a != "127.0.0.1:18080" {
		t.Fatalf("Addr(8080) = %q, %v", a, err)
	}
	if a, err := tg.Addr(3000); err != nil || a != "10.0.0.2:3000" {
		t.Fatalf("Addr(3000) = %q, %v", a, err)
	}
	if _, err := tg.Addr(9000); !errors.Is(err, registry.ErrHooksPort) {
		t.Fatalf("Addr(9000): %v", err)
	}
	if _, ok := r.Lookup("nope.microvms.localhost"); ok {
		t.Fatal("found an unknown endpoint")
	}
	if err := r.Terminate(m.MicrovmID); err != nil {
		t.Fatal(err)
	}
	wait(t, r, m.MicrovmID, microvmsapi.StateTerminated)
	if tg.Running() {
		t.Fatal("TERMINATED is Running")
	}
	if _, err := tg.Addr(8080); !errors.Is(err, registry.ErrNotRunning) {
		t.Fatalf("Addr after terminate: %v", err)
	}
}

func TestUnprivilegedGuestPort(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.open(t)
	m := run(t, r, microvmsapi.RunMicrovmInput{})
	wait(t, r, m.MicrovmID, microvmsapi.StateRunning)
	tg, _ := r.Lookup(m.Endpoint)
	if _, err := tg.Addr(3000); err == nil {
		t.Fatal("guest port of an unprivileged sandbox")
	}
}

func TestCloseKeepsSandboxes(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.open(t)
	m := run(t, r, microvmsapi.RunMicrovmInput{MaximumDurationInSeconds: 1})
	wait(t, r, m.MicrovmID, microvmsapi.StateRunning)
	if err := r.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1200 * time.Millisecond) // the duration timer is stopped
	if n := e.l.Instance(m.MicrovmID).Terminated(); n != 0 {
		t.Fatal("Close terminated a sandbox")
	}
	if fileState(t, e.dir, m.MicrovmID) != "RUNNING" {
		t.Fatal("state file changed")
	}
	if _, err := r.Get(m.MicrovmID); !errors.Is(err, registry.ErrClosed) {
		t.Fatalf("Get after Close: %v", err)
	}
	_, err := r.Run(t.Context(), microvmsapi.RunMicrovmInput{ImageIdentifier: "x"})
	if !errors.Is(err, registry.ErrClosed) {
		t.Fatalf("Run after Close: %v", err)
	}
}

func TestCloseAbortsLaunch(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.l.LaunchGate = make(chan struct{})
	r := e.open(t)
	m := run(t, r, microvmsapi.RunMicrovmInput{})
	if err := r.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	st := readState(t, e.dir, m.MicrovmID)["microvm"].(map[string]any)
	if st["state"] != "TERMINATED" || st["stateReason"] != registry.ReasonPlatformStopped {
		t.Fatalf("state file %+v", st)
	}
}

func TestTerminateAll(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.open(t)
	var ids []string
	for range 3 {
		ids = append(ids, run(t, r, microvmsapi.RunMicrovmInput{}).MicrovmID)
	}
	wait(t, r, ids[0], microvmsapi.StateRunning)
	if err := r.TerminateAll(t.Context()); err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		m, _ := r.Get(id)
		if m.State != microvmsapi.StateTerminated {
			t.Fatalf("%s is %s", id, m.State)
		}
	}
}

// TestConcurrentSafe runs, gets, lists and terminates from many goroutines.
func TestConcurrentSafe(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.opts.MaxSandboxes = 1000
	r := e.open(t)
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Go(func() {
			in := microvmsapi.RunMicrovmInput{ImageIdentifier: "local", ClientToken: fmt.Sprint("t", i%5)}
			m, err := r.Run(t.Context(), in)
			if err != nil {
				t.Error(err)
				return
			}
			_, _ = r.Get(m.MicrovmID)
			_, _ = r.List(registry.ListInput{MaxResults: 2})
			if tg, ok := r.Lookup(m.Endpoint); ok {
				_ = tg.Running()
				_, _ = tg.Addr(8080)
			}
			_ = r.Terminate(m.MicrovmID)
		})
	}
	wg.Wait()
	if err := r.TerminateAll(t.Context()); err != nil {
		t.Fatal(err)
	}
	out, _ := r.List(registry.ListInput{})
	if len(out.Items) != 5 {
		t.Fatalf("%d microVMs for 5 client tokens", len(out.Items))
	}
}

func TestDefaultStateDir(t *testing.T) {
	d := registry.DefaultStateDir()
	if !filepath.IsAbs(d) || !strings.HasSuffix(d, filepath.Join("rayito", "localvm")) {
		t.Fatalf("DefaultStateDir() = %q", d)
	}
	if os.Geteuid() != 0 {
		t.Setenv("XDG_STATE_HOME", "/xdg")
		if got := registry.DefaultStateDir(); got != "/xdg/rayito/localvm" {
			t.Fatalf("with XDG_STATE_HOME: %q", got)
		}
	} else if d != "/var/lib/rayito/localvm" {
		t.Fatalf("as root: %q", d)
	}
}

// TestRunWait checks that with RunWait, Run answers once the boot is over:
// RUNNING after a good boot, TERMINATING after a failed launch, and
// PENDING when the boot outlasts the wait.
func TestRunWait(t *testing.T) {
	t.Parallel()
	t.Run("running", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t)
		e.opts.RunWait = 10 * time.Second
		r := e.open(t)
		if m := run(t, r, microvmsapi.RunMicrovmInput{RunHookPayload: "{}"}); m.State != microvmsapi.StateRunning {
			t.Fatalf("Run answered %s (%s), want RUNNING", m.State, m.StateReason)
		}
	})
	t.Run("launch fails", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t)
		e.opts.RunWait = 10 * time.Second
		e.l.LaunchErr = errors.New("no cgroups here")
		r := e.open(t)
		m := run(t, r, microvmsapi.RunMicrovmInput{RunHookPayload: "{}"})
		if m.State != microvmsapi.StateTerminating && m.State != microvmsapi.StateTerminated {
			t.Fatalf("Run answered %s, want TERMINATING or TERMINATED", m.State)
		}
		if m.StateReason != registry.ReasonLaunchFailed || strings.Contains(m.StateReason, "no cgroups here") {
			t.Fatalf("stateReason %q, want the fixed %q", m.StateReason, registry.ReasonLaunchFailed)
		}
	})
	t.Run("slow boot", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t)
		e.opts.RunWait = 50 * time.Millisecond
		e.l.LaunchGate = make(chan struct{})
		r := e.open(t)
		m := run(t, r, microvmsapi.RunMicrovmInput{RunHookPayload: "{}"})
		if m.State != microvmsapi.StatePending {
			t.Fatalf("Run answered %s, want PENDING", m.State)
		}
		close(e.l.LaunchGate)
		wait(t, r, m.MicrovmID, microvmsapi.StateRunning)
	})
	t.Run("caller gives up", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t)
		e.opts.RunWait = time.Minute
		e.l.LaunchGate = make(chan struct{})
		r := e.open(t)
		ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
		defer cancel()
		m, err := r.Run(ctx, microvmsapi.RunMicrovmInput{ImageIdentifier: "local", RunHookPayload: "{}"})
		if err != nil || m.State != microvmsapi.StatePending {
			t.Fatalf("Run = %s, %v; want PENDING", m.State, err)
		}
		close(e.l.LaunchGate)
	})
}

// TestDrain: Drain terminates every microVM (platform_shutdown) while the
// registry still answers reads; afterwards Run is refused as shutting
// down, and the pool boots no more.
func TestDrain(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.open(t)
	a := running(t, r, microvmsapi.RunMicrovmInput{})
	if err := r.Drain(t.Context()); err != nil {
		t.Fatal(err)
	}
	got, err := r.Get(a.MicrovmID)
	if err != nil || got.State != microvmsapi.StateTerminated || registry.ReasonCode(got.StateReason) != "platform_shutdown" {
		t.Fatalf("after Drain: %+v %v", got, err)
	}
	if _, err := r.List(registry.ListInput{}); err != nil {
		t.Fatalf("List after Drain: %v", err)
	}
	if _, err := r.Run(t.Context(), microvmsapi.RunMicrovmInput{ImageIdentifier: "local"}); !errors.Is(err, registry.ErrClosed) {
		t.Fatalf("Run after Drain: %v, want ErrClosed", err)
	}
}

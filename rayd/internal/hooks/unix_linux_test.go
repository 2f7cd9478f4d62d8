package hooks

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// startUnixServer runs s.Serve on a Unix socket for the rest of the test.
func startUnixServer(t *testing.T, opts Options) (sock string, s *Server) {
	t.Helper()
	s = New(opts)
	sock = filepath.Join(t.TempDir(), "hooks.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- s.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-errc:
			if err != nil {
				t.Errorf("Serve: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Errorf("Serve did not return after cancel")
		}
	})
	return sock, s
}

// callUnix posts body to hook over the Unix socket sock.
func callUnix(t *testing.T, sock, hook, body string) reply {
	t.Helper()
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DisableKeepAlives: true,
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		},
	}}
	resp, err := c.Post("http://hooks"+PathPrefix+hook, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatalf("POST %s over %s: %v", hook, sock, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST %s: status %d: %s", hook, resp.StatusCode, raw)
	}
	var r reply
	if err := json.Unmarshal(raw, &r); err != nil {
		t.Fatalf("reply %q: %v", raw, err)
	}
	return r
}

// A Unix client outside rayd's pid namespace (pid 0) is the platform.
func TestUnixOutsidePidNamespaceIsPlatform(t *testing.T) {
	f := newFake()
	var asked atomic.Int32
	sock, s := startUnixServer(t, Options{Lifecycle: f, PlatformOverUnix: true,
		UnixPeer: func(*net.UnixConn) (int32, uint32, error) { asked.Add(1); return 0, 1000, nil }})
	want(t, callUnix(t, sock, HookRun, env("vm-1", "p")), OutcomeInstalled, PhaseRunning)
	if a := lastAudit(t, s); a.Caller != CallerPlatform || a.UID != 1000 || a.Anomaly {
		t.Errorf("audit %+v, want the platform, uid 1000, no anomaly", a)
	}
	want(t, callUnix(t, sock, HookTerminate, "{}"), OutcomeTerminating, PhaseTerminating)
	select {
	case <-f.termDone:
	case <-time.After(5 * time.Second):
		t.Fatal("Terminate not called")
	}
	if got := f.runCalls(); len(got) != 1 || got[0] != [2]string{"vm-1", "p"} {
		t.Errorf("Run calls %v", got)
	}
	if s.Anomalies() != 0 || asked.Load() != 2 {
		t.Errorf("anomalies %d, peer asked %d times", s.Anomalies(), asked.Load())
	}
}

// A Unix client rayd can see (here: this very process, whose pid reads
// non-zero) is sandbox code, whatever its uid: /terminate, /run and /ready
// are illegal, and a /suspend before /run has nothing to suspend.
func TestUnixInsidePidNamespaceIsSandbox(t *testing.T) {
	f := newFake()
	sock, s := startUnixServer(t, Options{Lifecycle: f, PlatformOverUnix: true})
	for h, out := range map[string]Outcome{HookTerminate: OutcomeIllegal, HookRun: OutcomeIllegal, HookSuspend: OutcomeUnchanged, HookReady: OutcomeIllegal} {
		want(t, callUnix(t, sock, h, env("forged", "forged")), out, PhaseBooting)
		if a := lastAudit(t, s); a.Caller != CallerSandbox || a.UID != int64(os.Geteuid()) || !a.Anomaly {
			t.Errorf("/%s: audit %+v, want sandbox, uid %d, anomaly", h, a, os.Geteuid())
		}
	}
	if len(f.runCalls()) != 0 || f.terminateCalls() != 0 || s.Anomalies() != 4 {
		t.Errorf("runs %v, terminates %d, anomalies %d", f.runCalls(), f.terminateCalls(), s.Anomalies())
	}
}

// A Unix client whose credentials cannot be read is unknown: /run and
// /terminate are illegal.
func TestUnixPeerErrorIsUnknown(t *testing.T) {
	f := newFake()
	sock, _ := startUnixServer(t, Options{Lifecycle: f,
		UnixPeer: func(*net.UnixConn) (int32, uint32, error) { return 0, 0, os.ErrPermission }})
	want(t, callUnix(t, sock, HookTerminate, "{}"), OutcomeIllegal, PhaseBooting)
	want(t, callUnix(t, sock, HookRun, env("vm", "p")), OutcomeIllegal, PhaseBooting)
	if len(f.runCalls()) != 0 || f.terminateCalls() != 0 {
		t.Errorf("runs %v, terminates %d", f.runCalls(), f.terminateCalls())
	}
}

// With PlatformOverUnix, every TCP caller is sandbox code, even one the
// peer lookup would call the platform (rootless: rayd's own uid), and the
// lookup is not even made.
func TestPlatformOverUnixTCPIsSandbox(t *testing.T) {
	f := newFake()
	base, s, owners := startServer(t, Options{Lifecycle: f, PlatformOverUnix: true})
	for _, h := range []string{HookTerminate, HookRun, HookSuspend, HookResume, HookValidate, HookReady} {
		out := OutcomeIllegal
		if h == HookSuspend || h == HookResume {
			out = OutcomeUnchanged // accepted from anyone; nothing to do before /run
		}
		want(t, call(t, base, fromPlatform, h, env("forged", "forged")), out, PhaseBooting)
		if a := lastAudit(t, s); a.Caller != CallerSandbox || !a.Anomaly {
			t.Errorf("/%s: audit %+v, want sandbox, anomaly", h, a)
		}
	}
	if len(f.runCalls()) != 0 || f.terminateCalls() != 0 || s.Anomalies() != 6 {
		t.Errorf("runs %v, terminates %d, anomalies %d", f.runCalls(), f.terminateCalls(), s.Anomalies())
	}
	if n := owners.calls.Load(); n != 0 {
		t.Errorf("peer lookups: %d, want none", n)
	}

	// The same through Handler on another server.
	hs := httptest.NewServer(s.Handler())
	defer hs.Close()
	resp, err := http.Post(hs.URL+PathPrefix+HookTerminate, "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	var r reply
	_ = json.NewDecoder(resp.Body).Decode(&r)
	resp.Body.Close()
	if r.Outcome != OutcomeIllegal || f.terminateCalls() != 0 {
		t.Errorf("Handler: outcome %q, terminates %d", r.Outcome, f.terminateCalls())
	}
}

// Without PlatformOverUnix, TCP callers are classified as before.
func TestTCPWithoutPlatformOverUnix(t *testing.T) {
	f := newFake()
	base, _, _ := startServer(t, Options{Lifecycle: f})
	want(t, call(t, base, fromPlatform, HookRun, env("vm", "p")), OutcomeInstalled, PhaseRunning)
}

package hooks

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

const (
	helperAddrEnv = "HOOKS_TEST_HELPER_ADDR"
	helperModeEnv = "HOOKS_TEST_HELPER_MODE"
)

const forgedRun = `{"microvmId":"forged","runHookPayload":"forged"}`

// TestHelperProcess is not a test: it is the sandbox client that the
// root-only tests start as uid 1000. Modes:
//
//	post:     POST /run and print the reply body
//	close:    write a whole /run request, then close without reading
//	reset:    write a whole /run request, then abort the connection (RST)
func TestHelperProcess(t *testing.T) {
	addr := os.Getenv(helperAddrEnv)
	if addr == "" {
		t.Skip("helper process for the end-to-end tests")
	}
	fail := func(err error) {
		fmt.Fprintln(os.Stderr, "helper:", err)
		os.Exit(2)
	}
	switch mode := os.Getenv(helperModeEnv); mode {
	case "post":
		resp, err := http.Post("http://"+addr+PathPrefix+HookRun, "application/json", strings.NewReader(forgedRun))
		if err != nil {
			fail(err)
		}
		io.Copy(os.Stdout, resp.Body)
		resp.Body.Close()
	case "close", "reset":
		c, err := net.Dial("tcp", addr)
		if err != nil {
			fail(err)
		}
		fmt.Fprintf(c, "POST %s%s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
			PathPrefix, HookRun, len(forgedRun), forgedRun)
		if mode == "reset" {
			c.(*net.TCPConn).SetLinger(0)
		}
		c.Close()
	default:
		fail(fmt.Errorf("unknown mode %q", mode))
	}
	os.Exit(0)
}

// helperBinary copies the test binary where uid 1000 can execute it: go test
// builds it under a 0700 directory.
func helperBinary(t *testing.T) string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "hooks-helper-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "hooks.test")
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	return bin
}

// runAsSandbox runs the helper as uid 1000 and returns its stdout.
func runAsSandbox(t *testing.T, bin, mode, addr string) string {
	t.Helper()
	cmd := exec.Command(bin, "-test.run=^TestHelperProcess$")
	cmd.Env = append(os.Environ(), helperAddrEnv+"="+addr, helperModeEnv+"="+mode)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 1000, Gid: 1000}}
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("helper %s: %v", mode, err)
	}
	return string(out)
}

// gatedListener holds Accept until gate is closed, so that a client can be
// made to finish before its connection is looked up.
type gatedListener struct {
	net.Listener
	gate chan struct{}
}

func (l *gatedListener) Accept() (net.Conn, error) {
	<-l.gate
	return l.Listener.Accept()
}

// syncBuffer is a log sink that tests read after the fact.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

func serveReal(t *testing.T, ln net.Listener) (*Server, *fakeLifecycle) {
	t.Helper()
	f := newFake()
	logs := &syncBuffer{}
	// The real peercred.LookupTCP.
	s := New(Options{Lifecycle: f, Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	t.Cleanup(func() {
		t.Logf("server log:\n%s", logs)
		if strings.Contains(logs.String(), "forged") || strings.Contains(logs.String(), "real") {
			t.Error("a payload reached the log")
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- s.Serve(ctx, ln) }()
	t.Cleanup(func() { cancel(); <-errc })
	return s, f
}

func TestEndToEndRealPeercred(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root: the sandbox client must run as uid 1000")
	}
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s, f := serveReal(t, ln)
	addr := ln.Addr().String()

	var r reply
	out := runAsSandbox(t, helperBinary(t), "post", addr)
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("helper reply %q: %v", out, err)
	}
	if r.Outcome != OutcomeIllegal || r.Phase != PhaseBooting {
		t.Fatalf("sandbox /run: %+v, want illegal/booting", r)
	}
	if len(f.runCalls()) != 0 {
		t.Fatal("Lifecycle.Run called for the sandbox /run")
	}
	if s.Anomalies() != 1 {
		t.Errorf("anomalies = %d, want 1", s.Anomalies())
	}
	if e := lastAudit(t, s); e.Caller != CallerSandbox || e.UID != 1000 || e.Hook != HookRun {
		t.Errorf("audit = %+v", e)
	}

	resp, err := http.Post("http://"+addr+PathPrefix+HookRun, "application/json", strings.NewReader(env("vm-1", "real")))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		t.Fatal(err)
	}
	if r.Outcome != OutcomeInstalled || r.Phase != PhaseRunning {
		t.Fatalf("platform /run: %+v, want installed/running", r)
	}
	if got := f.runCalls(); len(got) != 1 || got[0] != [2]string{"vm-1", "real"} {
		t.Errorf("Lifecycle.Run calls = %q", got)
	}
	if e := lastAudit(t, s); e.Caller != CallerPlatform || e.UID != 0 {
		t.Errorf("audit = %+v", e)
	}
}

// TestEndToEndVanishedSandboxClient is the attack that makes unidentified
// callers fail closed: sandbox code writes a whole /run and closes (or
// resets) its socket before rayd accepts the connection, so that the lookup
// finds an ownerless row (or none) instead of uid 1000.
func TestEndToEndVanishedSandboxClient(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root: the sandbox client must run as uid 1000")
	}
	bin := helperBinary(t)
	// Over loopback, and over an address of this namespace that is not
	// loopback: a vanished client there must not pass for the platform
	// calling from outside.
	hosts := []string{"127.0.0.1"}
	addrs, _ := interfaceAddrs()
	for _, a := range addrs {
		if !a.IsLoopback() && !a.IsLinkLocalUnicast() {
			hosts = append(hosts, a.String())
			break
		}
	}
	if len(hosts) == 1 {
		t.Log("no non-loopback address here; covering loopback only")
	}
	var cases []struct{ mode, host string }
	for _, h := range hosts {
		cases = append(cases, struct{ mode, host string }{"close", h}, struct{ mode, host string }{"reset", h})
	}
	for _, tc := range cases {
		t.Run(tc.mode+"/"+tc.host, func(t *testing.T) {
			mode := tc.mode
			raw, err := net.Listen("tcp", net.JoinHostPort(tc.host, "0"))
			if err != nil {
				t.Fatal(err)
			}
			gl := &gatedListener{Listener: raw, gate: make(chan struct{})}
			s, f := serveReal(t, gl)
			runAsSandbox(t, bin, mode, raw.Addr().String()) // has exited: its socket is orphaned or gone
			close(gl.gate)
			// Wait until the request, if the kernel kept it, was handled.
			deadline := time.Now().Add(3 * time.Second)
			for len(s.Audit()) == 0 && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
			if len(f.runCalls()) != 0 {
				t.Fatal("a vanished sandbox client installed the boot configuration")
			}
			for _, e := range s.Audit() {
				if e.Caller == CallerPlatform || e.Outcome != OutcomeIllegal || !e.Anomaly {
					t.Errorf("audit = %+v", e)
				}
			}
			if s.Phase() != PhaseBooting {
				t.Errorf("phase = %s", s.Phase())
			}
		})
	}
}

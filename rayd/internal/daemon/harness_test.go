package daemon

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/user"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/rayito-dev/rayito/proto/accesstoken"
	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
	"github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1/raydv1connect"
	"github.com/rayito-dev/rayito/proto/runpayload"
	"github.com/rayito-dev/rayito/rayd/internal/auth"
	"github.com/rayito-dev/rayito/rayd/internal/proc"
)

// sharedSupervisor serves every harness of the package: a program runs one
// supervisor at a time, because its reaper waits for every child.
var sharedSupervisor *proc.Supervisor

func TestMain(m *testing.M) {
	if os.Getenv(lateSignalEnv) == "1" {
		lateSignalChild()
	}
	if os.Getenv(listenChildEnv) == "1" {
		listenChild()
	}
	sup, err := proc.New(proc.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "supervisor:", err)
		os.Exit(1)
	}
	sharedSupervisor = sup
	code := m.Run()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	sup.Shutdown(ctx, time.Second)
	cancel()
	os.Exit(code)
}

// harness is a real rayd (real handlers, real supervisor, real listeners on
// loopback) for one test.
type harness struct {
	t        *testing.T
	d        *Daemon
	apiURL   string
	hooksURL string
	// envdURL and codeURL are the E2B shim's envd and code-interpreter
	// ports.
	envdURL  string
	codeURL  string
	stateDir string
	token    string
	client   *http.Client
	cancel   context.CancelFunc
	done     chan error
	stopOnce sync.Once
}

func newHarness(t *testing.T) *harness { return newHarnessWith(t, nil) }

// newHarnessWith is newHarness with the Config (test knobs included)
// adjusted by configure before rayd is built.
func newHarnessWith(t *testing.T, configure func(*Config)) *harness {
	t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if testing.Verbose() {
		log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	// The harness runs rayd in the test's own network namespace: the
	// network stays off unless a test gives rayd a namespace of its own.
	cfg := Config{StateDir: t.TempDir(), Egress: EgressOff}
	if configure != nil {
		configure(&cfg)
	}
	d, err := New(cfg, log, sharedSupervisor)
	if err != nil {
		t.Fatal(err)
	}
	apiLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hooksLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	envdLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	d.SetEnvdListener(envdLn)
	codeLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	d.SetCodeListener(codeLn)
	ctx, cancel := context.WithCancel(context.Background())
	h := &harness{
		envdURL: "http://" + envdLn.Addr().String(),
		codeURL: "http://" + codeLn.Addr().String(),
		t:       t, d: d, cancel: cancel, done: make(chan error, 1),
		apiURL:   "http://" + apiLn.Addr().String(),
		hooksURL: "http://" + hooksLn.Addr().String(),
		stateDir: cfg.StateDir,
		client:   h2cClient(),
	}
	d.onTerminated = cancel
	go func() { h.done <- d.Serve(ctx, apiLn, hooksLn) }()
	t.Cleanup(h.stop)
	tok, err := accesstoken.New()
	if err != nil {
		t.Fatal(err)
	}
	h.token = tok
	return h
}

// stop stops rayd and waits for Serve; it is idempotent.
func (h *harness) stop() {
	h.stopOnce.Do(func() {
		h.cancel()
		select {
		case err := <-h.done:
			if err != nil {
				h.t.Errorf("Serve: %v", err)
			}
		case <-time.After(20 * time.Second):
			h.t.Error("rayd did not stop")
		}
	})
}

// h2cClient speaks HTTP/2 without TLS, like the SDK through the proxy.
func h2cClient() *http.Client {
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	return &http.Client{Transport: &http.Transport{Protocols: &p, TLSClientConfig: &tls.Config{}}}
}

// run posts /run with a payload carrying the harness token's digest.
func (h *harness) run(extra func(*runpayload.Payload)) {
	h.t.Helper()
	digest, err := accesstoken.Digest(h.token)
	if err != nil {
		h.t.Fatal(err)
	}
	p := &runpayload.Payload{V: 1, TokenSHA256: digest, Metadata: map[string]string{"team": "a"}}
	if os.Geteuid() != 0 {
		// Without root rayd can only run processes as itself.
		if u, err := user.Current(); err == nil {
			p.User = u.Username
		}
	}
	if extra != nil {
		extra(p)
	}
	raw, err := runpayload.Encode(p)
	if err != nil {
		h.t.Fatal(err)
	}
	out := h.hook("run", map[string]string{"microvmId": "microvm-test", "runHookPayload": raw})
	if out["outcome"] != "installed" {
		h.t.Fatalf("/run outcome = %v", out["outcome"])
	}
}

// hook posts a hook and decodes its JSON reply.
func (h *harness) hook(name string, body any) map[string]any {
	h.t.Helper()
	var buf bytes.Buffer
	if body != nil {
		if err := json.NewEncoder(&buf).Encode(body); err != nil {
			h.t.Fatal(err)
		}
	}
	// Bounded: a hook that never answers fails the test, not go test's timeout.
	c := &http.Client{Timeout: time.Minute}
	resp, err := c.Post(h.hooksURL+"/aws/lambda-microvms/runtime/v1/"+name, "application/json", &buf)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		h.t.Fatalf("/%s status %d", name, resp.StatusCode)
	}
	out := map[string]any{}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		h.t.Fatal(err)
	}
	return out
}

// withToken adds the access token to every call.
func withToken(token string) connect.ClientOption {
	return connect.WithInterceptors(connect.UnaryInterceptorFunc(func(next connect.UnaryFunc) connect.UnaryFunc {
		return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
			req.Header().Set(auth.Header, token)
			return next(ctx, req)
		}
	}), streamToken(token))
}

type streamToken string

func (s streamToken) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc { return next }
func (s streamToken) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return func(ctx context.Context, spec connect.Spec) connect.StreamingClientConn {
		conn := next(ctx, spec)
		conn.RequestHeader().Set(auth.Header, string(s))
		return conn
	}
}
func (s streamToken) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return next
}

func (h *harness) processes(opts ...connect.ClientOption) raydv1connect.ProcessServiceClient {
	return raydv1connect.NewProcessServiceClient(h.client, h.apiURL, append([]connect.ClientOption{withToken(h.token)}, opts...)...)
}

func (h *harness) health() *raydv1.HealthResponse {
	h.t.Helper()
	c := raydv1connect.NewHealthServiceClient(h.client, h.apiURL)
	resp, err := c.Health(context.Background(), connect.NewRequest(&raydv1.HealthRequest{}))
	if err != nil {
		h.t.Fatal(err)
	}
	return resp.Msg
}

// result is a collected process stream.
type result struct {
	pid      uint32
	stdout   string
	stderr   string
	lastSeq  uint64
	end      *raydv1.EndEvent
	messages int
}

// collect reads a process stream to its end.
func collect(t *testing.T, s *connect.ServerStreamForClient[raydv1.ProcessEvent]) result {
	t.Helper()
	defer s.Close()
	var r result
	var out, errOut strings.Builder
	for s.Receive() {
		ev := s.Msg()
		if r.messages == 0 && ev.GetStart() == nil {
			t.Fatalf("first message is not start: %v", ev)
		}
		r.messages++
		switch e := ev.Event.(type) {
		case *raydv1.ProcessEvent_Start:
			r.pid = e.Start.GetPid()
		case *raydv1.ProcessEvent_Data:
			if e.Data.GetSeq() <= r.lastSeq {
				t.Fatalf("seq went from %d to %d", r.lastSeq, e.Data.GetSeq())
			}
			r.lastSeq = e.Data.GetSeq()
			out.Write(e.Data.GetStdout())
			errOut.Write(e.Data.GetStderr())
		case *raydv1.ProcessEvent_End:
			r.end = e.End
		}
	}
	if err := s.Err(); err != nil {
		t.Fatalf("stream: %v", err)
	}
	if r.end == nil {
		t.Fatal("stream ended without end")
	}
	r.stdout, r.stderr = out.String(), errOut.String()
	return r
}

func shell(script string) *raydv1.StartRequest {
	return &raydv1.StartRequest{Process: &raydv1.ProcessConfig{Cmd: "/bin/sh", Args: []string{"-c", script}}}
}

func code(err error) connect.Code {
	var ce *connect.Error
	if errors.As(err, &ce) {
		return ce.Code()
	}
	return connect.CodeUnknown
}

func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: identity switching and rlimits are only enforced when rayd runs as root")
	}
}

// newToken returns a fresh token and its digest.
func newToken(t *testing.T) (string, string) {
	t.Helper()
	tok, err := accesstoken.New()
	if err != nil {
		t.Fatal(err)
	}
	d, err := accesstoken.Digest(tok)
	if err != nil {
		t.Fatal(err)
	}
	return tok, d
}

package raydtest

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/user"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/rayito-dev/rayito/proto/accesstoken"
	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
	"github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1/raydv1connect"
	"github.com/rayito-dev/rayito/proto/runpayload"
)

// Server is what a Harness serves: a wired rayd (package daemon's
// Daemon) with its API, hooks and E2B shim's ports.
type Server interface {
	// SetEnvdListener and SetCodeListener give the server the E2B shim's
	// envd and code-interpreter listeners before Serve.
	SetEnvdListener(ln net.Listener)
	SetCodeListener(ln net.Listener)
	// Serve serves until ctx ends.
	Serve(ctx context.Context, apiLn net.Listener, hooksLns ...net.Listener) error
}

// Harness is a real rayd (real handlers, real supervisor, real listeners
// on loopback) for one test.
type Harness struct {
	t *testing.T
	// APIURL, HooksURL, EnvdURL and CodeURL are the base URLs of rayd's
	// API, its hooks and the E2B shim's envd and code-interpreter ports.
	APIURL   string
	HooksURL string
	EnvdURL  string
	CodeURL  string
	// StateDir is rayd's state directory.
	StateDir string
	// Token is the access token whose digest Run installs.
	Token string
	// Client speaks HTTP/2 without TLS (H2CClient).
	Client   *http.Client
	cancel   context.CancelFunc
	done     chan error
	stopOnce sync.Once
}

// Start serves the server build returns on fresh loopback listeners
// until the test ends or Stop. build receives the function that stops
// serving (what the platform's /terminate hook ends in); stateDir is the
// server's state directory.
func Start(t *testing.T, stateDir string, build func(stop func()) Server) *Harness {
	t.Helper()
	apiLn, hooksLn, envdLn, codeLn := listen(t), listen(t), listen(t), listen(t)
	ctx, cancel := context.WithCancel(context.Background())
	srv := build(cancel)
	srv.SetEnvdListener(envdLn)
	srv.SetCodeListener(codeLn)
	h := &Harness{
		t:        t,
		APIURL:   "http://" + apiLn.Addr().String(),
		HooksURL: "http://" + hooksLn.Addr().String(),
		EnvdURL:  "http://" + envdLn.Addr().String(),
		CodeURL:  "http://" + codeLn.Addr().String(),
		StateDir: stateDir,
		Client:   H2CClient(),
		cancel:   cancel,
		done:     make(chan error, 1),
	}
	go func() { h.done <- srv.Serve(ctx, apiLn, hooksLn) }()
	t.Cleanup(h.Stop)
	tok, err := accesstoken.New()
	if err != nil {
		t.Fatal(err)
	}
	h.Token = tok
	return h
}

func listen(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

// Stop stops rayd and waits for Serve; it is idempotent.
func (h *Harness) Stop() {
	if h.done == nil {
		return
	}
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

// H2CClient speaks HTTP/2 without TLS, like the SDK through the proxy.
func H2CClient() *http.Client {
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	return &http.Client{Transport: &http.Transport{Protocols: &p, TLSClientConfig: &tls.Config{}}}
}

// Run posts /run with a payload carrying the harness token's digest,
// adjusted by extra (nil: none).
func (h *Harness) Run(extra func(*runpayload.Payload)) {
	h.t.Helper()
	digest, err := accesstoken.Digest(h.Token)
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
	out := h.Hook("run", map[string]string{"microvmId": "microvm-test", "runHookPayload": raw})
	if out["outcome"] != "installed" {
		h.t.Fatalf("/run outcome = %v", out["outcome"])
	}
}

// Hook posts a hook and decodes its JSON reply.
func (h *Harness) Hook(name string, body any) map[string]any {
	h.t.Helper()
	var buf bytes.Buffer
	if body != nil {
		if err := json.NewEncoder(&buf).Encode(body); err != nil {
			h.t.Fatal(err)
		}
	}
	// Bounded: a hook that never answers fails the test, not go test's timeout.
	c := &http.Client{Timeout: time.Minute}
	resp, err := c.Post(h.HooksURL+"/aws/lambda-microvms/runtime/v1/"+name, "application/json", &buf)
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

// Health calls HealthService.Health (no token: the anonymous RPC).
func (h *Harness) Health() *raydv1.HealthResponse {
	h.t.Helper()
	c := raydv1connect.NewHealthServiceClient(h.Client, h.APIURL)
	resp, err := c.Health(context.Background(), connect.NewRequest(&raydv1.HealthRequest{}))
	if err != nil {
		h.t.Fatal(err)
	}
	return resp.Msg
}

// Served waits up to d for Serve to return (after /terminate or the
// sandbox's timeout) and says whether it did; Stop still reports its
// error.
func (h *Harness) Served(d time.Duration) bool {
	if h.done == nil {
		return false
	}
	select {
	case err := <-h.done:
		h.done <- err
		return true
	case <-time.After(d):
		return false
	}
}

// Attach is a harness on a rayd served elsewhere (another process) at
// apiURL and hooksURL, with the access token token: its clients and hooks
// work, Stop does nothing and Served says false.
func Attach(t *testing.T, apiURL, hooksURL, token string) *Harness {
	return &Harness{t: t, APIURL: apiURL, HooksURL: hooksURL, Token: token, Client: H2CClient()}
}

// T is the test the harness serves.
func (h *Harness) T() *testing.T { return h.t }

// Logger is the logger a harness's rayd logs to: nowhere, or stderr at
// debug level under go test -v.
func Logger() *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

package tests

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rayito-dev/rayito/e2b"
	rayito "github.com/rayito-dev/rayito/sdk"
)

// The E2B compatibility tests: the official E2B JavaScript SDKs (e2b,
// @e2b/code-interpreter; exact versions in e2b/package-lock.json, which
// the test installs with npm ci) run e2b/scenario.mjs against Rayito's
// E2B server in front of a local platform, configured only by E2B's own
// environment variables. Three ways: the e2b package in-process, debug
// mode (E2B_DEBUG) against one sandbox, and the real CLI (`rayito e2b
// serve` in front of `rayito local serve`, with a key from `rayito e2b
// key create`).

// e2bScenarioTimeout bounds one run of the scenario (it takes about 20 s),
// within the test binary's deadline.
const e2bScenarioTimeout = 5 * time.Minute

// npmDir is one directory of pinned npm packages the tests install once
// per run (npm ci); what stops it is kept for every test that needs it.
type npmDir struct {
	rel, why string // the directory under tests/, what needs the packages
	once     sync.Once
	err      error
	skip     string
}

var (
	e2bNpm = &npmDir{rel: "e2b", why: "the E2B SDK tests need Node.js and npm (to install the pinned e2b SDKs with npm ci)"}
	mcpNpm = &npmDir{rel: "mcp", why: "the MCP client test needs Node.js and npm (to install the pinned @modelcontextprotocol/sdk with npm ci)"}
)

// install runs npm ci in the directory (once per test run) and returns
// its path. It skips the test, saying why, when node or npm is missing.
func (n *npmDir) install(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(n.rel)
	if err != nil {
		t.Fatal(err)
	}
	n.once.Do(func() {
		for _, tool := range []string{"node", "npm"} {
			if _, err := exec.LookPath(tool); err != nil {
				n.skip = tool + " is not installed: " + n.why
				return
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		// --ignore-scripts: no package's install script runs; the lockfile
		// pins every version and integrity hash. The cache is the
		// repository's .tmp (gitignored), not ~/.npm: a run as root
		// leaves no root-owned files in the user's home.
		cmd := exec.CommandContext(ctx, "npm", "ci", "--ignore-scripts", "--no-audit", "--no-fund")
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "npm_config_cache="+filepath.Join(filepath.Dir(dir), "..", ".tmp", "npm-cache"), "npm_config_update_notifier=false")
		if out, err := cmd.CombinedOutput(); err != nil {
			n.err = fmt.Errorf("npm ci in %s: %v\n%s", dir, err, out)
		}
	})
	if n.skip != "" {
		t.Skip(n.skip)
	}
	if n.err != nil {
		t.Fatal(n.err)
	}
	return dir
}

// e2bScenarioDir installs the pinned SDKs and returns the scenario's
// directory.
func e2bScenarioDir(t *testing.T) string { return e2bNpm.install(t) }

// runE2BScenario runs scenario.mjs with exactly env (plus PATH and a
// fresh HOME) and fails the test, with the scenario's output, unless it
// exits 0.
func runE2BScenario(t *testing.T, dir string, env map[string]string, args ...string) {
	t.Helper()
	timeout := e2bScenarioTimeout
	if d, ok := t.Deadline(); ok {
		// Fail here, with the scenario's output, before go test's own
		// timeout panics without it.
		timeout = min(timeout, time.Until(d)-30*time.Second)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", append([]string{"scenario.mjs"}, args...)...)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.WaitDelay = 10 * time.Second
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("the E2B scenario did not finish within %v; its output:\n%s", timeout.Round(time.Second), out.String())
	}
	if err != nil {
		t.Fatalf("the E2B scenario (node scenario.mjs %s) failed: %v; its output:\n%s", strings.Join(args, " "), err, out.String())
	}
	t.Logf("the E2B scenario passed in %v:\n%s", time.Since(start).Round(time.Second), out.String())
}

// peerArgs are the scenario's network flags: the peer namespace's two
// addresses (a sandbox with open egress reaches both).
func peerArgs() []string {
	return []string{"--peer", peerAddr.String(), "--peer-other", peerOther.String()}
}

// serveE2B serves srv on a local port and returns its URL: E2B_API_URL and
// E2B_SANDBOX_URL alike (one handler serves the control plane and the
// sandbox router).
func serveE2B(t *testing.T, srv *e2b.Server) string {
	t.Helper()
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		hs.CloseClientConnections()
		hs.Close()
		if err := srv.Close(); err != nil {
			t.Errorf("e2b server Close: %v", err)
		}
	})
	return hs.URL
}

// TestE2BSDK: the official E2B SDKs against the e2b package's server,
// in-process, in front of an in-process local platform; then debug mode
// (E2B_DEBUG=true with E2B_SANDBOX_URL) against one sandbox.
func TestE2BSDK(t *testing.T) {
	t.Parallel() // a long wait on sandboxes: beside the other parallel tests (each has its own subnet, testSubnet)
	if !isRoot() {
		t.Skip("needs root: the root local platform (pause/resume uses its cgroup freezer; the network steps use network namespaces)")
	}
	dir := e2bScenarioDir(t)
	pn := startPeerNet(t)
	defer pn.close()
	p := startPlatform(t, "")
	defer p.stop(true)

	t.Run("server", func(t *testing.T) {
		key, err := e2b.NewAPIKey()
		if err != nil {
			t.Fatal(err)
		}
		srv, err := e2b.New(context.Background(), e2b.Options{
			SDK:          p.opts(),
			APIKeyHashes: [][32]byte{e2b.HashAPIKey(key)},
			Templates:    map[string]string{"": "local"},
			SnapshotDir:  t.TempDir(),
		})
		if err != nil {
			t.Fatal(err)
		}
		url := serveE2B(t, srv)
		// The server accepts only its keys.
		other, _ := e2b.NewAPIKey()
		if code := e2bGet(t, url+"/v2/sandboxes", other); code != http.StatusUnauthorized {
			t.Errorf("GET /v2/sandboxes with another key: %d, want 401", code)
		}
		if code := e2bGet(t, url+"/v2/sandboxes", ""); code != http.StatusUnauthorized {
			t.Errorf("GET /v2/sandboxes without a key: %d, want 401", code)
		}
		runE2BScenario(t, dir, map[string]string{"E2B_API_KEY": key, "E2B_API_URL": url, "E2B_SANDBOX_URL": url}, peerArgs()...)
	})

	t.Run("debug", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		sbx, err := rayito.Create(ctx, p.opts()...)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = sbx.Kill(context.Background()) }()
		key, err := e2b.NewAPIKey()
		if err != nil {
			t.Fatal(err)
		}
		srv, err := e2b.New(context.Background(), e2b.Options{
			SDK:            p.opts(),
			APIKeyHashes:   [][32]byte{e2b.HashAPIKey(key)},
			Templates:      map[string]string{"": "local"},
			DebugSandboxID: sbx.ID(),
		})
		if err != nil {
			t.Fatal(err)
		}
		url := serveE2B(t, srv)
		// Debug mode: no API key, no control plane; every data-plane call
		// names debug_sandbox_id and carries no access token.
		runE2BScenario(t, dir, map[string]string{"E2B_DEBUG": "true", "E2B_SANDBOX_URL": url}, "--debug")
		if _, err := sbx.Commands.Run(ctx, "true"); err != nil {
			t.Errorf("the debug sandbox after the scenario: %v", err)
		}
	})
}

// e2bGet GETs url with the X-API-KEY key ("" none) and returns the status.
func e2bGet(t *testing.T, url, key string) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("X-API-KEY", key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// e2bDebugSandboxFlag is the `rayito e2b serve` flag naming the sandbox
// debug mode's debug_sandbox_id routes to.
const e2bDebugSandboxFlag = "--debug-sandbox"

// TestE2BSDKCLI: the same scenario through the real CLI binary: `rayito
// e2b serve` as its own process in front of `rayito local serve`, with a
// key made by `rayito e2b key create`; then `rayito e2b serve` in debug
// mode for one sandbox made by `rayito sandbox create`.
func TestE2BSDKCLI(t *testing.T) {
	if !isRoot() {
		t.Skip("needs root: the root local platform (pause/resume uses its cgroup freezer; the network steps use network namespaces)")
	}
	dir := e2bScenarioDir(t)
	pn := startPeerNet(t)
	defer pn.close()
	env := cliEnv(t) // RAYITO_ENDPOINT: a free port, where local serve listens
	var endpoint string
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "RAYITO_ENDPOINT="); ok {
			endpoint = v
		}
	}
	state := t.TempDir()
	startCLIServer(t, env, "local serve", func() bool {
		return runCLI(t, env, "sandbox", "list").code == 0
	}, "local", "serve", "--addr", strings.TrimPrefix(endpoint, "http://"), "--state-dir", state)
	// The scenario kills its sandboxes; whatever a failure leaves, this
	// ends.
	t.Cleanup(func() { runCLI(t, env, "sandbox", "kill", "--all") })

	keys := filepath.Join(t.TempDir(), "e2b-keys")
	r := runCLI(t, env, "e2b", "key", "create", "--keys", keys, "--json")
	var made struct {
		Key string `json:"key"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &made); err != nil || r.code != 0 || !regexp.MustCompile(`^e2b_[0-9a-f]+$`).MatchString(made.Key) {
		t.Fatalf("e2b key create --json: %+v", r)
	}
	key := made.Key
	if b, err := os.ReadFile(keys); err != nil || bytes.Contains(b, []byte(key)) {
		t.Fatalf("the keys file holds the key itself (want only its hash) or is unreadable: %v", err)
	}

	t.Run("serve", func(t *testing.T) {
		url := "http://" + freeAddr(t)
		startCLIServer(t, env, "e2b serve", e2bAnswers(url), "e2b", "serve", "--addr", strings.TrimPrefix(url, "http://"), "--keys", keys)
		runE2BScenario(t, dir, map[string]string{"E2B_API_KEY": key, "E2B_API_URL": url, "E2B_SANDBOX_URL": url}, peerArgs()...)
	})

	t.Run("debug", func(t *testing.T) {
		r := runCLI(t, env, "sandbox", "create")
		if r.code != 0 {
			t.Fatalf("sandbox create: %+v", r)
		}
		id := strings.TrimSpace(r.stdout)
		defer runCLI(t, env, "sandbox", "kill", id)
		url := "http://" + freeAddr(t)
		startCLIServer(t, env, "e2b serve "+e2bDebugSandboxFlag, e2bAnswers(url),
			"e2b", "serve", "--addr", strings.TrimPrefix(url, "http://"), "--keys", keys, e2bDebugSandboxFlag, id)
		runE2BScenario(t, dir, map[string]string{"E2B_DEBUG": "true", "E2B_SANDBOX_URL": url}, "--debug")
	})
}

// freeAddr returns a 127.0.0.1 address nothing listens on.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// e2bAnswers reports whether an E2B server answers at url.
func e2bAnswers(url string) func() bool {
	return func() bool {
		resp, err := http.Get(url + "/v2/sandboxes")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return true
	}
}

// startCLIServer starts the rayito binary with args as a long-running
// server, waits until ready() holds, and stops it (SIGINT, then SIGKILL
// after 30 s) when the test ends; its stderr is in the failure message.
func startCLIServer(t *testing.T, env []string, name string, ready func() bool, args ...string) {
	t.Helper()
	cmd := exec.Command(rayitoBin(t), args...)
	cmd.Env = env
	var logs syncBuffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
			t.Errorf("%s did not stop within 30 s of SIGINT; its log:\n%s", name, logs.String())
		}
		if t.Failed() {
			t.Logf("%s log:\n%s", name, logs.String())
		}
	})
	deadline := time.Now().Add(60 * time.Second)
	for !ready() {
		select {
		case err := <-exited:
			exited <- err
			t.Fatalf("rayito %s exited: %v; its log:\n%s", strings.Join(args, " "), err, logs.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("rayito %s not ready within 60 s; its log:\n%s", strings.Join(args, " "), logs.String())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

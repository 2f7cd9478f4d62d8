package tests

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rayito-dev/rayito/e2b"
	"github.com/rayito-dev/rayito/localvm"
	"github.com/rayito-dev/rayito/localvm/localvmtest"
	rayito "github.com/rayito-dev/rayito/sdk"
	"github.com/rayito-dev/rayito/sdk/secrets"
)

// The secrets tests' peer namespace: a TLS upstream that wants a key, and
// another host a placeholder must never reach.
var (
	secretsPeerHost = netip.MustParseAddr("10.250.10.1")
	secretsUpstream = netip.MustParseAddr("10.250.10.2")
	secretsOther    = netip.MustParseAddr("10.250.10.3")
)

// upstreamRecorder is the upstream's view: what each request carried.
type upstreamRecorder struct {
	mu   sync.Mutex
	seen []string // "METHOD path authorized" per request
	hdrs []http.Header
}

func (u *upstreamRecorder) add(r *http.Request, ok bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.seen = append(u.seen, fmt.Sprintf("%s %s %v", r.Method, r.URL.RequestURI(), ok))
	u.hdrs = append(u.hdrs, r.Header.Clone())
}

func (u *upstreamRecorder) headers() []http.Header {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]http.Header(nil), u.hdrs...)
}

// secretsUpstreamHandler wants the key in x-api-key, as a bearer token,
// or as the password of Basic auth (git). It answers what a model API
// would, and on /v1/echo it echoes the key back in response headers (the
// gateway must strip them).
func secretsUpstreamHandler(keyv *atomic.Value, rec *upstreamRecorder) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := keyv.Load().(string)
		_, pass, basic := r.BasicAuth()
		ok := r.Header.Get("X-Api-Key") == key || r.Header.Get("Authorization") == "Bearer "+key || (basic && pass == key)
		rec.add(r, ok)
		if !ok {
			w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
			http.Error(w, `{"error":"no key"}`, http.StatusUnauthorized)
			return
		}
		switch {
		case r.URL.Path == "/repo.git/info/refs":
			// git's dumb HTTP protocol: one ref.
			fmt.Fprint(w, strings.Repeat("ab", 20)+"\trefs/heads/main\n")
		case r.URL.Path == "/v1/echo":
			w.Header().Set("X-Api-Key", key)
			w.Header().Set("X-Leak", "the key is "+key)
			fmt.Fprint(w, `{"echo":true}`)
		default:
			fmt.Fprintf(w, `{"answer":"from upstream","path":%q}`, r.URL.Path)
		}
	})
}

// syncBuffer is a log sink for the canary search.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestSecrets: a sandbox whose gateway injects x-api-key reaches a TLS
// upstream through its loopback URL, and a second one reaches the same
// upstream by its own URL with unmodified curl, Python (urllib, requests),
// Node's fetch and git, through a placeholder; in neither can the code
// read the key (env, /proc, files, Health), the placeholder never reaches
// another host, and the key is in no log and no error of the whole run.
func TestSecrets(t *testing.T) {
	if !isRoot() {
		t.Skip("needs root: network namespaces and the root platform")
	}
	canary := "sk-canary-" + randHex(t, 16)
	rotated := "sk-rotated-" + randHex(t, 16) // the value after a rotation
	_, caPEM, leaf := testPKI(t, "upstream.test", "other.test")
	pn, err := localvmtest.NewPeerNet(netip.PrefixFrom(secretsPeerHost, 24).Masked(), 1)
	if err != nil {
		t.Fatal(err)
	}
	defer pn.Close()
	rec := &upstreamRecorder{}
	keyv := &atomic.Value{}
	keyv.Store(canary)
	for _, a := range pn.Addrs {
		ln, err := pn.Listen("tcp", netip.AddrPortFrom(a, 443).String())
		if err != nil {
			t.Fatal(err)
		}
		srv := &http.Server{Handler: secretsUpstreamHandler(keyv, rec), ErrorLog: nil}
		go func() { _ = srv.Serve(tls.NewListener(ln, &tls.Config{Certificates: []tls.Certificate{leaf}})) }()
		defer srv.Close()
	}
	dns, err := pn.ListenPacket("udp", netip.AddrPortFrom(secretsUpstream, 53).String())
	if err != nil {
		t.Fatal(err)
	}
	go localvmtest.ServeDNS(dns, map[string]netip.Addr{"upstream.test.": secretsUpstream, "other.test.": secretsOther})

	logs := &syncBuffer{}
	stateDir := t.TempDir()
	p := startPlatform(t, stateDir, func(o *localvm.Options) {
		o.DNS = []netip.Addr{secretsUpstream}
		o.UpstreamCAs = caPEM
		o.Logger = slog.New(slog.NewTextHandler(io.MultiWriter(logs, logWriter()), &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	stopped := false
	defer func() {
		if !stopped {
			p.stop(true)
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()

	store, err := secrets.NewLocalStore(filepath.Join(t.TempDir(), "secrets"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.CreateSecret(ctx, "upstream-key", []byte(canary)); err != nil {
		t.Fatal(err)
	}
	ref := secrets.Ref{Name: "upstream-key"}
	var errs []error // every error of the run, searched for the canary
	create := func(opts ...rayito.Option) *rayito.Sandbox {
		t.Helper()
		sbx, err := rayito.Create(ctx, p.opts(append([]rayito.Option{secrets.WithStore(store)}, opts...)...)...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = sbx.Kill(context.Background()) })
		return sbx
	}
	run := func(sbx *rayito.Sandbox, cmd string) (string, bool) {
		t.Helper()
		res, err := sbx.Commands.Run(ctx, cmd)
		if err != nil {
			errs = append(errs, err)
		}
		var ee *rayito.CommandExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatalf("%s: %v", cmd, err)
		}
		if res == nil {
			return "", false
		}
		if strings.Contains(res.Stdout+res.Stderr, canary) || strings.Contains(res.Stdout+res.Stderr, rotated) {
			t.Errorf("%s: the key reached the sandbox's output", cmd)
		}
		return res.Stdout + res.Stderr, err == nil && res.ExitCode == 0
	}
	// noKey: the code finds the key nowhere it can look.
	noKey := func(t *testing.T, sbx *rayito.Sandbox) {
		for _, cmd := range []string{
			"env",
			"cat /proc/[0-9]*/environ 2>/dev/null | tr '\\0' '\\n'",
			"grep -rIlF -e " + canary + " /home /tmp /run /etc /var /dev/shm 2>/dev/null; true",
			"curl -sS -m 5 -X POST -H 'Content-Type: application/json' -d '{}' http://127.0.0.1:8080/rayito.rayd.v1.HealthService/Health",
			"cat /proc/1/mem 2>&1 | head -c 100; true",
			"grep -rIl 'PRIVATE KEY' /run /tmp /home /etc/ssl 2>/dev/null; true",
			// No core dump or trace of rayd (pid 1) for the sandbox's user.
			"kill -ABRT 1 && echo SIGNALLED; cat /proc/1/environ 2>&1 | head -c 200; true",
		} {
			out, _ := run(sbx, cmd)
			if strings.Contains(out, canary) || strings.Contains(out, rotated) {
				t.Errorf("%q shows the key", cmd)
			}
			if strings.Contains(out, "SIGNALLED") {
				t.Errorf("the sandbox's user could signal rayd")
			}
			if strings.Contains(cmd, "PRIVATE KEY") && strings.TrimSpace(out) != "" {
				t.Errorf("a private key file is readable: %q", out)
			}
		}
	}

	t.Run("gateway", func(t *testing.T) {
		sbx := create(secrets.WithGateways(secrets.Gateway{
			Name: "up", Upstream: "https://upstream.test",
			Headers: map[string]secrets.HeaderValue{"x-api-key": secrets.Plain(ref)},
			Allow:   []secrets.GatewayRule{{Method: "POST", Path: "/v1/messages"}, {Method: "GET", Path: "/v1/echo"}},
			Env:     "GATEWAY_URL",
		}))
		url := sbx.Gateway("up").URL()
		if !strings.HasPrefix(url, "http://127.0.0.1:") {
			t.Fatalf("gateway URL %q", url)
		}
		out, ok := run(sbx, `curl -sS -m 10 -X POST -H 'x-api-key: forged' "$GATEWAY_URL/v1/messages"`)
		if !ok || !strings.Contains(out, `"answer":"from upstream"`) {
			t.Fatalf("through the gateway: %q %v", out, ok)
		}
		if out, _ := run(sbx, `curl -sS -m 10 -o /dev/null -w '%{http_code}' -X POST "$GATEWAY_URL/v1/../admin"`); out != "403" {
			t.Errorf("a dot segment: %q", out)
		}
		if out, _ := run(sbx, `curl -sS -m 10 -o /dev/null -w '%{http_code}' "$GATEWAY_URL/v1/messages"`); out != "403" {
			t.Errorf("a method off the list: %q", out)
		}
		out, _ = run(sbx, `curl -sS -m 10 -D - "$GATEWAY_URL/v1/echo"`)
		if !strings.Contains(out, `{"echo":true}`) || strings.Contains(strings.ToLower(out), "x-leak") || strings.Contains(strings.ToLower(out), "x-api-key") {
			t.Errorf("an echoing upstream's headers came back: %q", out)
		}
		noKey(t, sbx)
		// A rotation: the upstream wants the new key, the store has it,
		// the gateway still injects the old one (cached in the SDK, held
		// by rayd) until Refresh, which keeps the port.
		if _, err := store.UpdateSecret(ctx, "upstream-key", []byte(rotated)); err != nil {
			t.Fatal(err)
		}
		keyv.Store(rotated)
		if out, _ := run(sbx, `curl -sS -m 10 -o /dev/null -w '%{http_code}' -X POST "$GATEWAY_URL/v1/messages"`); out != "401" {
			t.Errorf("before Refresh: %q", out)
		}
		if err := secrets.Refresh(ctx, sbx); err != nil {
			t.Fatal(err)
		}
		if got := sbx.Gateway("up").URL(); got != url {
			t.Errorf("after Refresh: %q, was %q", got, url)
		}
		if out, ok := run(sbx, `curl -sS -m 10 -X POST "$GATEWAY_URL/v1/messages"`); !ok || !strings.Contains(out, `"answer":"from upstream"`) {
			t.Errorf("after Refresh: %q %v", out, ok)
		}
		if _, err := store.UpdateSecret(ctx, "upstream-key", []byte(canary)); err != nil {
			t.Fatal(err)
		}
		keyv.Store(canary)
		if err := secrets.Refresh(ctx, sbx); err != nil {
			t.Fatal(err)
		}
		// Connect learns the routes.
		again, err := rayito.Connect(ctx, sbx.ID(), p.opts(rayito.WithAccessToken(sbx.AccessToken()))...)
		if err != nil {
			t.Fatal(err)
		}
		if got := again.Gateway("up").URL(); got != url {
			t.Errorf("after Connect: %q, was %q", got, url)
		}
	})

	t.Run("env", func(t *testing.T) {
		// WithSecrets: the value in one command's environment only (the
		// sandbox's code can read it: the residual risk of env injection).
		sbx := create()
		res, err := sbx.Commands.Run(ctx, "printenv TOKEN", secrets.WithSecrets(map[string]secrets.Ref{"TOKEN": ref}))
		if err != nil || strings.TrimSpace(res.Stdout) != canary {
			t.Fatalf("an injected secret: %v", err)
		}
		if out, _ := run(sbx, "printenv TOKEN; true"); strings.TrimSpace(out) != "" {
			t.Errorf("another command got the secret")
		}
		_, err = sbx.Commands.Run(ctx, "true", rayito.WithEnvs(map[string]string{"TOKEN": "x"}), secrets.WithSecrets(map[string]secrets.Ref{"TOKEN": ref}))
		if !errors.Is(err, rayito.ErrInvalidArgument) {
			t.Errorf("an env and a secret of one name: %v", err)
		}
		errs = append(errs, err)
		_, err = sbx.Commands.Run(ctx, "true", secrets.WithSecrets(map[string]secrets.Ref{"TOKEN": {Name: "missing"}}))
		if !errors.Is(err, rayito.ErrSecretNotFound) {
			t.Errorf("a missing secret: %v", err)
		}
		errs = append(errs, err)
		// A terminal and a code cell get it the same way.
		want := strconv.Itoa(len(canary))
		var screen syncBuf
		h, err := sbx.Pty.Create(ctx, rayito.OnData(screen.write), secrets.WithSecrets(map[string]secrets.Ref{"TOKEN": ref}))
		if err != nil {
			t.Fatal(err)
		}
		if err := h.SendInput(ctx, []byte("echo len=${#TOKEN}; exit\n")); err != nil {
			t.Fatal(err)
		}
		screen.waitFor(t, "len="+want)
		_, _ = h.Wait(ctx)
		ex, err := sbx.RunCode(ctx, "import os; print(len(os.environ.get('TOKEN', '')))", secrets.WithSecrets(map[string]secrets.Ref{"TOKEN": ref}))
		if err != nil || strings.TrimSpace(strings.Join(ex.Logs.Stdout, "")) != want {
			t.Errorf("a code cell's secret: %v", err)
		}
		info, err := sbx.Info(ctx)
		if err != nil || strings.Contains(fmt.Sprintf("%+v", info), canary) {
			t.Errorf("Info: %v", err)
		}
	})

	t.Run("placeholder", func(t *testing.T) {
		sbx := create(secrets.WithPlaceholders(secrets.Placeholder{
			Env: "UPSTREAM_KEY", Secret: ref, Host: "upstream.test",
		}))
		ph := sbx.Placeholder("UPSTREAM_KEY")
		if !strings.HasPrefix(ph, "RAYITO-PLACEHOLDER-") {
			t.Fatalf("placeholder %q", ph)
		}
		if out, ok := run(sbx, `printenv UPSTREAM_KEY`); !ok || strings.TrimSpace(out) != ph {
			t.Fatalf("the sandbox sees %q, not the placeholder", out)
		}
		for _, c := range []struct{ name, cmd string }{
			{"curl", `curl -sS -m 10 -X POST -H "x-api-key: $UPSTREAM_KEY" https://upstream.test/v1/messages`},
			{"urllib", `python3 -c 'import os,urllib.request as u; print(u.urlopen(u.Request("https://upstream.test/v1/messages", method="POST", data=b"{}", headers={"x-api-key": os.environ["UPSTREAM_KEY"]}), timeout=10).read().decode())'`},
			{"requests", `python3 -c 'import os,requests; print(requests.post("https://upstream.test/v1/messages", headers={"Authorization": "Bearer "+os.environ["UPSTREAM_KEY"]}, timeout=10).text)'`},
			{"node", `node -e 'fetch("https://upstream.test/v1/messages",{method:"POST",headers:{"x-api-key":process.env.UPSTREAM_KEY}}).then(r=>r.text()).then(t=>console.log(t),e=>{console.error(String(e.cause||e));process.exit(1)})'`},
			{"git", `git ls-remote "https://x-access-token:$UPSTREAM_KEY@upstream.test/repo.git"`},
		} {
			out, ok := run(sbx, c.cmd)
			want := `"answer":"from upstream"`
			if c.name == "git" {
				want = "refs/heads/main"
			}
			if !ok || !strings.Contains(out, want) {
				t.Errorf("%s through the placeholder: %q %v", c.name, out, ok)
			}
		}
		// Aimed at another host (TLS there is not intercepted: it never
		// carries the key) and in clear: blocked or useless, never the key.
		if out, _ := run(sbx, `curl -sS -m 10 -o /dev/null -w '%{http_code}' -H "x-api-key: $UPSTREAM_KEY" http://other.test/`); out != "403" {
			t.Errorf("a placeholder in clear to another host: %q", out)
		}
		for _, h := range rec.headers() {
			for _, vs := range h {
				for _, v := range vs {
					if strings.Contains(v, ph) {
						t.Errorf("the upstream received the placeholder: %q", v)
					}
				}
			}
		}
		noKey(t, sbx)
	})

	t.Run("deny-all", func(t *testing.T) {
		// The agent's set-up: nothing leaves but through the secrets.
		sbx := create(rayito.WithAllowInternetAccess(false),
			secrets.WithPlaceholders(secrets.Placeholder{Env: "UPSTREAM_KEY", Secret: ref, Host: "upstream.test"}),
			secrets.WithGateways(secrets.Gateway{Name: "up", Upstream: "https://upstream.test",
				Headers: map[string]secrets.HeaderValue{"x-api-key": secrets.Plain(ref)},
				Allow:   []secrets.GatewayRule{{Method: "POST", Path: "/v1/messages"}}, Env: "GATEWAY_URL"}))
		for _, cmd := range []string{
			`curl -sS -m 10 -X POST -H "x-api-key: $UPSTREAM_KEY" https://upstream.test/v1/messages`,
			`curl -sS -m 10 -X POST "$GATEWAY_URL/v1/messages"`,
		} {
			if out, ok := run(sbx, cmd); !ok || !strings.Contains(out, `"answer":"from upstream"`) {
				t.Errorf("deny-all, %s: %q %v", cmd, out, ok)
			}
		}
		for _, cmd := range []string{
			"curl -sS -m 5 -k https://other.test/",
			"curl -sS -m 5 -k https://" + secretsOther.String() + "/",
			"getent hosts other.test",
		} {
			if out, ok := run(sbx, cmd); ok {
				t.Errorf("deny-all let %q through: %q", cmd, out)
			}
		}
	})

	t.Run("header rules", func(t *testing.T) {
		// E2B Secrets' model: a header added to every HTTPS request to a
		// host, its value from a store the sandbox never sees.
		key := keyv.Load().(string)
		mem := secrets.NewMemoryStore()
		if _, err := mem.CreateSecret(ctx, "rule-key", []byte(key)); err != nil {
			t.Fatal(err)
		}
		rule := secrets.HeaderRule{Host: "upstream.test", Headers: map[string]secrets.HeaderValue{"x-api-key": secrets.Plain(secrets.Ref{Name: "rule-key"})}}
		sbx := create(secrets.WithStore(mem), secrets.WithHeaderRules(rule))
		// -k: without a rule the answer comes from the upstream itself,
		// whose test CA only rayd trusts.
		status := `curl -sS -m 10 -k -o /dev/null -w '%{http_code}' -X POST -H 'x-api-key: forged' https://upstream.test/v1/messages`
		if out, ok := run(sbx, `curl -sS -m 10 -X POST -H 'x-api-key: forged' https://upstream.test/v1/messages`); !ok || !strings.Contains(out, `"answer":"from upstream"`) {
			t.Fatalf("with a header rule: %q %v", out, ok)
		}
		hs := rec.headers()
		if v := hs[len(hs)-1].Values("X-Api-Key"); len(v) != 1 || v[0] != key {
			t.Errorf("the upstream saw x-api-key %d times: want the rule's value once, the forged one replaced", len(v))
		}
		// Another host gets nothing; an echo of the value is stripped.
		if out, _ := run(sbx, `curl -sS -m 10 -o /dev/null -w '%{http_code}' -k https://other.test/v1/messages`); out != "401" {
			t.Errorf("another host: %q, want 401 (no header)", out)
		}
		if out, _ := run(sbx, `curl -sS -m 10 -D - https://upstream.test/v1/echo`); !strings.Contains(out, `{"echo":true}`) || strings.Contains(out, key) {
			t.Errorf("an echoing upstream: %q", out)
		}
		noKey(t, sbx)
		// UpdateHeaderRules: none, then the rule again.
		if err := secrets.UpdateHeaderRules(ctx, sbx); err != nil {
			t.Fatal(err)
		}
		if out, _ := run(sbx, status); out != "401" {
			t.Errorf("without rules: %q, want 401", out)
		}
		if err := secrets.UpdateHeaderRules(ctx, sbx, rule); err != nil {
			t.Fatal(err)
		}
		if out, _ := run(sbx, status); out != "200" {
			t.Errorf("with the rule again: %q, want 200", out)
		}
		// A rule grants nothing: a deny-all sandbox does not reach the host.
		closed := create(secrets.WithStore(mem), secrets.WithHeaderRules(rule), rayito.WithNetwork(rayito.DenyAllNetwork()))
		if out, ok := run(closed, status); ok && (out == "200" || out == "401") {
			t.Errorf("a deny-all sandbox reached a rule's host: %q", out)
		}
		// Bad rules fail the create before the sandbox is handed out.
		if _, err := rayito.Create(ctx, p.opts(secrets.WithStore(mem), secrets.WithHeaderRules(secrets.HeaderRule{Host: "*", Headers: rule.Headers}))...); !errors.Is(err, rayito.ErrInvalidArgument) {
			t.Errorf("a bad rule: %v, want ErrInvalidArgument", err)
		} else if strings.Contains(err.Error(), key) {
			t.Error("the error carries the value")
		}
	})

	t.Run("E2B network rules", func(t *testing.T) {
		// The official E2B SDK's network.rules through the E2B gateway.
		dir := e2bScenarioDir(t)
		apiKey, err := e2b.NewAPIKey()
		if err != nil {
			t.Fatal(err)
		}
		srv, err := e2b.New(context.Background(), e2b.Options{SDK: p.opts(), APIKeyHashes: [][32]byte{e2b.HashAPIKey(apiKey)}, Templates: map[string]string{"": "local"}})
		if err != nil {
			t.Fatal(err)
		}
		url := serveE2B(t, srv)
		runE2BScenario(t, dir, map[string]string{"E2B_API_KEY": apiKey, "E2B_API_URL": url, "E2B_SANDBOX_URL": url, "E2B_RULES_KEY": keyv.Load().(string)}, "--rules", "upstream.test")
	})

	// The canary: in no log of the platform or of any rayd, and in no
	// error of the run.
	stopped = true
	p.stop(true)
	for _, e := range errs {
		if e != nil && (strings.Contains(e.Error(), canary) || strings.Contains(e.Error(), rotated)) {
			t.Errorf("an error carries the key: %v", e)
		}
	}
	if strings.Contains(logs.String(), canary) || strings.Contains(logs.String(), rotated) {
		t.Errorf("the platform's log carries the key")
	}
	_ = filepath.WalkDir(stateDir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".log") {
			return nil
		}
		if b, err := os.ReadFile(path); err == nil && (bytes.Contains(b, []byte(canary)) || bytes.Contains(b, []byte(rotated))) {
			t.Errorf("%s carries the key", path)
		}
		return nil
	})
	if raw, err := json.Marshal(rec.seen); err == nil {
		t.Logf("upstream saw %s", raw)
	}
}

// logWriter is stderr when verbose, else nothing.
func logWriter() io.Writer {
	if testing.Verbose() {
		return os.Stderr
	}
	return io.Discard
}

func randHex(t *testing.T, n int) string {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

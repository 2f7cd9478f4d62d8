package localvm

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rayito-dev/rayito/localvm/internal/authtoken"
	"github.com/rayito-dev/rayito/localvm/internal/registry"
	"github.com/rayito-dev/rayito/proto/accesstoken"
	"github.com/rayito-dev/rayito/proto/microvmsapi"
	"github.com/rayito-dev/rayito/proto/runpayload"
)

func TestMintAdapter(t *testing.T) {
	t.Parallel()
	m, err := authtoken.NewMinter(authtoken.NewKey(), nil)
	if err != nil {
		t.Fatal(err)
	}
	a := mintAdapter{m}
	_, _, err = a.Mint("microvm-1", nil, time.Minute)
	var e *registry.Error
	if !errors.As(err, &e) || e.Type != microvmsapi.ValidationException || e.Message != "allowedPorts must hold 1 to 16 entries." {
		t.Fatalf("invalid input: %v", err)
	}
	port := 8080
	tok, _, err := a.Mint("microvm-1", []microvmsapi.AllowedPort{{Port: &port}}, time.Minute)
	if err != nil || tok == "" {
		t.Fatalf("Mint: %v", err)
	}
	if _, err := m.Verify(tok, "microvm-1", 8080); err != nil {
		t.Fatal(err)
	}
}

// TestWiring runs the real launcher, minter and proxy: one sandbox from
// RunMicrovm to RUNNING, reached through the endpoint proxy with a minted
// token, then terminated. The launcher uses the state dir's own scope and a
// subnet of its own, so a platform running on this machine is not disturbed.
func TestWiring(t *testing.T) {
	if testing.Short() {
		t.Skip("launches a real sandbox")
	}
	dir := t.TempDir()
	opts, err := normalize(Options{StateDir: dir, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	s, err := open(t.Context(), opts, func(scope string) (deps, error) {
		return wire(opts, wireConfig{scope: scope, subnet: netip.MustParsePrefix("10.219.0.0/24")})
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = s.TerminateAll(ctx)
		_ = s.Close(ctx)
	}()
	t.Logf("privileged: %v", s.Privileged())
	if fi, err := os.Stat(filepath.Join(dir, authKeyFile)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("auth key: %v", err)
	}
	base, stop := serve(t, s)
	defer stop()

	tok, err := accesstoken.New()
	if err != nil {
		t.Fatal(err)
	}
	digest, _ := accesstoken.Digest(tok)
	payload, err := runpayload.Encode(&runpayload.Payload{V: runpayload.Version, TokenSHA256: digest})
	if err != nil {
		t.Fatal(err)
	}
	in, _ := json.Marshal(microvmsapi.RunMicrovmInput{ImageIdentifier: "local", RunHookPayload: payload})
	res, body := do(t, http.DefaultClient, "POST", base+microvmsapi.PathMicrovms, "", string(in))
	if res.StatusCode != 200 {
		t.Fatalf("Run: %d %s", res.StatusCode, body)
	}
	var m microvmsapi.Microvm
	_ = json.Unmarshal([]byte(body), &m)
	got := waitState(t, base, m.MicrovmID, microvmsapi.StateRunning)
	if got.StateReason != "" {
		t.Fatalf("running with reason %q", got.StateReason)
	}
	if _, err := os.Stat(filepath.Join(dir, "vms", m.MicrovmID, registry.LogFileName)); err != nil {
		t.Fatalf("rayd log: %v", err)
	}

	res, body = do(t, http.DefaultClient, "POST", base+microvmsapi.AuthTokenPath(m.MicrovmID), "",
		`{"expirationInMinutes":5,"allowedPorts":[{"port":8080}]}`)
	if res.StatusCode != 200 {
		t.Fatalf("auth-token: %d %s", res.StatusCode, body)
	}
	var out microvmsapi.CreateMicrovmAuthTokenOutput
	_ = json.Unmarshal([]byte(body), &out)
	proxyTok := out.AuthToken[microvmsapi.AuthTokenResponseKey]

	health := func(proxyToken string) (int, string) {
		req, _ := http.NewRequestWithContext(t.Context(), "POST", base+"/rayito.rayd.v1.HealthService/Health", strings.NewReader("{}"))
		req.Host = m.Endpoint
		req.Header.Set("Content-Type", "application/json")
		if proxyToken != "" {
			req.Header.Set(microvmsapi.ProxyAuthHeader, proxyToken)
		}
		req.Header.Set("x-access-token", tok)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	if code, body := health(""); code != http.StatusForbidden {
		t.Fatalf("proxy without a token: %d %s", code, body)
	}
	if code, body := health(proxyTok); code != 200 {
		t.Fatalf("Health through the proxy: %d %s", code, body)
	}

	res, _ = do(t, http.DefaultClient, "DELETE", base+microvmsapi.MicrovmPath(m.MicrovmID), "", "")
	if res.StatusCode != 200 {
		t.Fatalf("DELETE: %d", res.StatusCode)
	}
	if got := waitState(t, base, m.MicrovmID, microvmsapi.StateTerminated); got.StateReason != registry.ReasonKilledByUser {
		t.Fatalf("terminated: %+v", got)
	}
}

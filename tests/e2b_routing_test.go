package tests

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestE2BSDKRouting: the official E2B SDK configured as for E2B's cloud,
// with only E2B_DOMAIN and E2B_API_KEY (plus the gateway's CA), against
// `rayito local serve --e2b-addr --e2b-tls --e2b-template base=local-root`:
// the API at https://api.<domain>, envd at https://49983-<id>.<domain>, a
// web server in the sandbox at getHost(port), presigned links fetched
// without any E2B header, user root and sudo, private traffic, and a
// killed sandbox's host (e2b/routing.mjs).
func TestE2BSDKRouting(t *testing.T) {
	if !isRoot() {
		t.Skip("needs root: the local-root template (user root, sudo) needs the root local platform")
	}
	dir := e2bScenarioDir(t)
	env := cliEnv(t)
	var endpoint, state string
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "RAYITO_ENDPOINT="); ok {
			endpoint = v
		}
		if v, ok := strings.CutPrefix(kv, "XDG_STATE_HOME="); ok {
			state = v
		}
	}
	const key = "e2b_00112233445566778899aabbccddeeff00112233"
	env = append(env, "RAYITO_E2B_API_KEY="+key, "XDG_CONFIG_HOME="+t.TempDir())
	gw := freeAddr(t)
	_, port, _ := net.SplitHostPort(gw)
	domain := "e2b.localhost:" + port
	caFile := filepath.Join(state, "rayito", "e2b-tls", "e2b.localhost", "ca.pem")
	ready := func() bool {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return false
		}
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(pem)
		c := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{
			TLSClientConfig: &tls.Config{RootCAs: pool},
			DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
				return (&net.Dialer{}).DialContext(ctx, network, gw)
			},
		}}
		res, err := c.Get("https://api." + domain + "/health")
		if err != nil {
			return false
		}
		res.Body.Close()
		return res.StatusCode == 200
	}
	startCLIServer(t, env, "local serve --e2b-tls", ready, "local", "serve", "--addr", strings.TrimPrefix(endpoint, "http://"),
		"--state-dir", t.TempDir(), "--prebooted", "0", "--e2b-addr", gw, "--e2b-tls", "--e2b-template", "base=local-root")
	t.Cleanup(func() { runCLI(t, env, "sandbox", "kill", "--all") })

	ctx, cancel := context.WithTimeout(context.Background(), e2bScenarioTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", "--require", "./localhost-dns.cjs", "routing.mjs")
	cmd.Dir = dir
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(),
		"E2B_DOMAIN=" + domain, "E2B_API_KEY=" + key, "NODE_EXTRA_CA_CERTS=" + caFile}
	cmd.WaitDelay = 10 * time.Second
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("node routing.mjs: %v; its output:\n%s", err, out.String())
	}
	t.Logf("routing.mjs:\n%s", out.String())
}

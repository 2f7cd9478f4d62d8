package e2b

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	e2bapi "github.com/rayito-dev/rayito/e2b"
	rayito "github.com/rayito-dev/rayito/sdk"
)

// --tls: the gateway serves HTTPS under its domain with a certificate of
// its own CA, which clients that trust the CA accept for api.DOMAIN and
// <port>-<id>.DOMAIN; the CA is made once, private, and kept.
func TestLocalTLS(t *testing.T) {
	state := t.TempDir()
	getenv := func(k string) string { return map[string]string{"XDG_STATE_HOME": state}[k] }
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_, port, _ := net.SplitHostPort(addr)
	x, err := NewExposure(getenv, "", addr, "", true, "", "")
	if err != nil {
		t.Fatal(err)
	}
	if x.Domain != "e2b.localhost:"+port || x.TLS == nil {
		t.Fatalf("exposure %+v", x)
	}
	if want := filepath.Join(state, "rayito", "e2b-tls", "e2b.localhost", "ca.pem"); x.CAFile != want {
		t.Fatalf("CA at %s, want %s", x.CAFile, want)
	}
	for path, mode := range map[string]os.FileMode{filepath.Dir(x.CAFile): 0o700 | os.ModeDir, x.CAFile: 0o600, filepath.Join(filepath.Dir(x.CAFile), "ca-key.pem"): 0o600} {
		if fi, err := os.Stat(path); err != nil || fi.Mode() != mode {
			t.Errorf("%s: %v %v, want %v", path, fi.Mode(), err, mode)
		}
	}
	if env := x.Env(addr); !slices.Equal(env, []any{"E2B_DOMAIN", x.Domain, "NODE_EXTRA_CA_CERTS", x.CAFile}) {
		t.Errorf("env %v", env)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- Serve(ctx, ln, e2bapi.Options{SDK: []rayito.Option{rayito.WithBackend(rayito.BackendLocal), rayito.WithEndpoint("http://127.0.0.1:1")},
			APIKeyHashes: [][32]byte{e2bapi.HashAPIKey("e2b_k")}, Domain: x.Domain}, x.TLS)
	}()
	pemCA, err := os.ReadFile(x.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pemCA)
	// Any name resolves to the gateway, as *.localhost does.
	client := &http.Client{Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool},
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		},
	}}
	for _, host := range []string{"api." + x.Domain, "49983-microvm-1.e2b.localhost:" + port, "127.0.0.1:" + port} {
		var res *http.Response
		for range 50 {
			if res, err = client.Get("https://" + host + "/health"); err == nil || !strings.Contains(err.Error(), "refused") {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		if err != nil {
			t.Fatalf("%s: %v", host, err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		// api.DOMAIN is the API; a sandbox host the router (502: no such
		// sandbox on the unreachable platform).
		if want := map[bool]int{true: 502, false: 200}[strings.HasPrefix(host, "49983-")]; res.StatusCode != want {
			t.Fatalf("%s: %d %s, want %d", host, res.StatusCode, b, want)
		}
	}
	if _, err := client.Get("https://other.example/health"); err == nil {
		t.Fatal("the certificate was accepted for another domain")
	}
	// The CA cannot sign for another domain: a certificate it signs for
	// one does not verify.
	ca, key, err := loadCA(filepath.Dir(x.CAFile))
	if err != nil {
		t.Fatal(err)
	}
	lk, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	der, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{SerialNumber: serial(), Subject: pkix.Name{CommonName: "bank.example"},
		DNSNames: []string{"bank.example"}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}, ca, &lk.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	forged, _ := x509.ParseCertificate(der)
	if _, err := forged.Verify(x509.VerifyOptions{Roots: pool, DNSName: "bank.example"}); err == nil {
		t.Fatal("the gateway's CA signed for bank.example")
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// Kept: a second start uses the same CA.
	again, err := NewExposure(getenv, "", "127.0.0.1:443", "", true, "", "")
	if err != nil {
		t.Fatal(err)
	}
	if again.Domain != "e2b.localhost" {
		t.Fatalf("port 443: domain %q", again.Domain)
	}
	if b, _ := os.ReadFile(again.CAFile); string(b) != string(pemCA) {
		t.Fatal("a second start made another CA")
	}
	// Another domain has a CA of its own.
	other, err := NewExposure(getenv, "", "127.0.0.1:3443", "sbx.test", true, "", "")
	if err != nil || other.Domain != "sbx.test" || filepath.Base(filepath.Dir(other.CAFile)) != "sbx.test" {
		t.Fatalf("--domain sbx.test: %+v %v", other, err)
	}
}

func TestExposureRefusals(t *testing.T) {
	state := t.TempDir()
	getenv := func(k string) string { return map[string]string{"XDG_STATE_HOME": state}[k] }
	for _, c := range []struct {
		domain, cert, key string
		local             bool
		want              string
	}{
		{domain: "Bad_Domain", want: "--domain"},
		{cert: "c.pem", want: "go together"},
		{cert: "c.pem", key: "k.pem", want: "needs --domain"},
		{cert: "c.pem", key: "k.pem", domain: "a.test", local: true, want: "does not take"},
		{cert: "/nonexistent/c.pem", key: "/nonexistent/k.pem", domain: "a.test", want: "--tls-cert"},
	} {
		if _, err := NewExposure(getenv, "", "127.0.0.1:3000", c.domain, c.local, c.cert, c.key); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c, err, c.want)
		}
	}
	// Plain HTTP: the URLs; a domain is reported for getHost.
	x, err := NewExposure(getenv, "", "127.0.0.1:3000", "sbx.test:8443", false, "", "")
	if err != nil || x.TLS != nil {
		t.Fatal(x, err)
	}
	if env := x.Env("127.0.0.1:3000"); !slices.Equal(env, []any{"E2B_API_URL", "http://127.0.0.1:3000", "E2B_SANDBOX_URL", "http://127.0.0.1:3000", "E2B_DOMAIN", "sbx.test:8443"}) {
		t.Errorf("env %v", env)
	}
	// A CA directory that is a symbolic link, or a key open to others,
	// is refused.
	dir := filepath.Join(state, "rayito", "e2b-tls")
	if _, err := NewExposure(getenv, "", "127.0.0.1:3000", "a.test", true, "", ""); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(dir, "a.test", "ca-key.pem"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := NewExposure(getenv, "", "127.0.0.1:3000", "a.test", true, "", ""); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Errorf("a key readable by others: %v", err)
	}
	if err := os.Symlink(filepath.Join(dir, "a.test"), filepath.Join(dir, "b.test")); err != nil {
		t.Fatal(err)
	}
	if _, err := NewExposure(getenv, "", "127.0.0.1:3000", "b.test", true, "", ""); err == nil || !strings.Contains(err.Error(), "not a directory") {
		t.Errorf("a symbolic link for a CA directory: %v", err)
	}
	// A CA of another domain in its place is refused.
	if err := os.Remove(filepath.Join(dir, "b.test")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "b.test"), 0o700); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"ca.pem", "ca-key.pem"} {
		src, err := os.ReadFile(filepath.Join(dir, "a.test", f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "b.test", f), src, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := NewExposure(getenv, "", "127.0.0.1:3000", "b.test", true, "", ""); err == nil || !strings.Contains(err.Error(), "not the gateway's CA for b.test") {
		t.Errorf("another domain's CA: %v", err)
	}
}

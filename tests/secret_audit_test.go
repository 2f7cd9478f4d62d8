package tests

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rayito-dev/rayito/localvm"
	"github.com/rayito-dev/rayito/localvm/localvmtest"
	rayito "github.com/rayito-dev/rayito/sdk"
	"github.com/rayito-dev/rayito/sdk/secrets"
)

// TestSecretAudit: a sandbox's audit trail counts each secret per host
// and mechanism (placeholder, header rule, gateway route), shows a
// placeholder sent to a host that does not hold it (through TLS to
// another placeholder's host, and in clear), and never a value; through
// the SDK and `rayito sandbox audit`.
func TestSecretAudit(t *testing.T) {
	if !isRoot() {
		t.Skip("needs root: network namespaces and the root platform")
	}
	peer := netip.MustParseAddr("10.250.41.1")
	upstream, other := netip.MustParseAddr("10.250.41.2"), netip.MustParseAddr("10.250.41.3")
	key := "sk-audit-" + randHex(t, 16)
	_, caPEM, leaf := testPKI(t, "upstream.test", "other.test")
	pn, err := localvmtest.NewPeerNet(netip.PrefixFrom(peer, 24).Masked(), 1)
	if err != nil {
		t.Fatal(err)
	}
	defer pn.Close()
	rec := &upstreamRecorder{}
	keyv := &atomic.Value{}
	keyv.Store(key)
	for _, a := range pn.Addrs {
		ln, err := pn.Listen("tcp", netip.AddrPortFrom(a, 443).String())
		if err != nil {
			t.Fatal(err)
		}
		srv := &http.Server{Handler: secretsUpstreamHandler(keyv, rec)}
		go func() { _ = srv.Serve(tls.NewListener(ln, &tls.Config{Certificates: []tls.Certificate{leaf}})) }()
		defer srv.Close()
	}
	dns, err := pn.ListenPacket("udp", netip.AddrPortFrom(upstream, 53).String())
	if err != nil {
		t.Fatal(err)
	}
	go localvmtest.ServeDNS(dns, map[string]netip.Addr{"upstream.test.": upstream, "other.test.": other})
	p := startPlatform(t, "", func(o *localvm.Options) {
		o.DNS = []netip.Addr{upstream}
		o.UpstreamCAs = caPEM
	})
	defer p.stop(true)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	store, err := secrets.NewLocalStore(filepath.Join(t.TempDir(), "secrets"))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"up-key", "other-key"} {
		if _, err := store.CreateSecret(ctx, name, []byte(key)); err != nil {
			t.Fatal(err)
		}
	}
	up, otherRef := secrets.Ref{Name: "up-key"}, secrets.Ref{Name: "other-key"}
	sbx, err := rayito.Create(ctx, p.opts(secrets.WithStore(store),
		secrets.WithPlaceholders(
			secrets.Placeholder{Env: "UP_KEY", Secret: up, Host: "upstream.test"},
			secrets.Placeholder{Env: "OTHER_KEY", Secret: otherRef, Host: "other.test"}),
		secrets.WithHeaderRules(secrets.HeaderRule{Host: "other.test", Headers: map[string]secrets.HeaderValue{"x-api-key": secrets.Plain(up)}}),
		secrets.WithGateways(secrets.Gateway{Name: "up", Upstream: "https://upstream.test",
			Headers: map[string]secrets.HeaderValue{"x-api-key": secrets.Plain(up)},
			Allow:   []secrets.GatewayRule{{Method: "POST", Path: "/v1/*"}}, Env: "GATEWAY_URL"}))...)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sbx.Kill(context.Background()) }()
	if a, err := secrets.Audit(ctx, sbx); err != nil || len(a.Records) != 0 {
		t.Fatalf("the audit before any request: %+v %v", a, err)
	}
	for _, c := range []struct{ cmd, want string }{
		// UP_KEY to its host, twice.
		{`curl -sS -m 10 -X POST -H "x-api-key: $UP_KEY" https://upstream.test/v1/messages`, `"answer":"from upstream"`},
		{`curl -sS -m 10 -X POST -H "x-api-key: $UP_KEY" https://upstream.test/v1/messages`, `"answer":"from upstream"`},
		// OTHER_KEY to upstream.test, which does not hold it: refused.
		{`curl -sS -m 10 -o /dev/null -w '%{http_code}' -H "x-api-key: $OTHER_KEY" https://upstream.test/v1/messages`, `403`},
		// UP_KEY in clear to other.test: refused.
		{`curl -sS -m 10 -o /dev/null -w '%{http_code}' -H "x-api-key: $UP_KEY" http://other.test/`, `403`},
		// The header rule of other.test.
		{`curl -sS -m 10 https://other.test/v1/x`, `"answer":"from upstream"`},
		// The gateway route.
		{`curl -sS -m 10 -X POST "$GATEWAY_URL/v1/messages"`, `"answer":"from upstream"`},
	} {
		res, err := sbx.Commands.Run(ctx, c.cmd)
		out := ""
		if res != nil {
			out = res.Stdout + res.Stderr
		}
		if !strings.Contains(out, c.want) {
			t.Errorf("%s: %q %v, want %q", c.cmd, out, err, c.want)
		}
	}

	a, err := secrets.Audit(ctx, sbx)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range a.Records {
		got = append(got, fmt.Sprintf("%s %s %s %s:%d %s %d", r.Mechanism, r.Name, r.Header, r.Host, r.Port, r.Outcome, r.Count))
		if r.Last.IsZero() || time.Since(r.Last) > 5*time.Minute {
			t.Errorf("a record's time: %+v", r)
		}
	}
	want := []string{
		"gateway_route up X-Api-Key upstream.test:443 sent 1",
		"header_rule  X-Api-Key other.test:443 sent 1",
		"placeholder OTHER_KEY  upstream.test:443 wrong_host 1",
		"placeholder UP_KEY  other.test:80 wrong_host 1",
		"placeholder UP_KEY  upstream.test:443 sent 2",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") || a.Dropped != 0 {
		t.Errorf("the audit:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	// The CLI: a table and --json, with no value and no placeholder.
	env := append(os.Environ(), "RAYITO_ENDPOINT="+p.endpoint, "XDG_STATE_HOME="+t.TempDir(), "RAYITO_BACKEND=", "RAYITO_ACCESS_TOKEN="+sbx.AccessToken())
	bin := rayitoBin(t)
	cmd := exec.Command(bin, "sandbox", "audit", sbx.ID(), "--json")
	cmd.Env = env
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("rayito sandbox audit --json: %v", err)
	}
	var js struct {
		Records []struct {
			Mechanism, Name, Host, Outcome string
			Port                           int
			Count                          uint64
		}
		Dropped uint64
	}
	if err := json.Unmarshal(out, &js); err != nil || len(js.Records) != len(want) {
		t.Fatalf("--json: %v %s", err, out)
	}
	if r := js.Records[2]; r.Mechanism != "placeholder" || r.Name != "OTHER_KEY" || r.Host != "upstream.test" || r.Outcome != "wrong_host" || r.Count != 1 {
		t.Errorf("--json's wrong host: %+v", r)
	}
	cmd = exec.Command(bin, "sandbox", "audit", sbx.ID())
	cmd.Env = env
	table, err := cmd.Output()
	if err != nil {
		t.Fatalf("rayito sandbox audit: %v", err)
	}
	if !strings.Contains(string(table), "MECHANISM") || !strings.Contains(string(table), "upstream.test:443  wrong_host") {
		t.Errorf("the table:\n%s", table)
	}
	for _, s := range []string{string(out), string(table), fmt.Sprintf("%+v", a)} {
		for _, secret := range []string{key, sbx.Placeholder("UP_KEY"), sbx.Placeholder("OTHER_KEY")} {
			if strings.Contains(s, secret) {
				t.Errorf("the audit shows a secret or a placeholder: %s", s)
			}
		}
	}
	t.Logf("rayito sandbox audit:\n%s", table)
}

package suites

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"math"
	"math/big"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/rayito-dev/rayito/bench/internal/harness"
	"github.com/rayito-dev/rayito/localvm"
	"github.com/rayito-dev/rayito/localvm/localvmtest"
	rayito "github.com/rayito-dev/rayito/sdk"
	"github.com/rayito-dev/rayito/sdk/secrets"
)

// Names of the secrets suite's results.
const (
	SecretsSuite                   = "secrets"
	SecretsGatewaySuite            = "secrets gateway"
	SecretsPlaceholderSuite        = "secrets placeholder"
	SecretsGatewayNewConnSuite     = "secrets gateway (new connection)"
	SecretsPlaceholderNewConnSuite = "secrets placeholder (new connection)"
)

// secretsGoalMs is the goal: added p50 per keep-alive request.
const secretsGoalMs = 1.0

// Secrets addresses: a peer namespace of its own plays the upstream API.
var (
	secretsPrefix = netip.MustParsePrefix("10.253.4.0/24")
	secretsSubnet = netip.MustParsePrefix("10.209.0.0/16") // not localvm's default (10.213), the run's (10.217), the pre-booted (10.212) nor egress's (10.211)
)

const secretsHost = "upstream.bench"

// secretsClient runs inside a sandbox: one keep-alive connection with
// warm-up then n timed POSTs, then nnew POSTs each on a new connection
// (TLS handshake included for https), printing one JSON object of
// microsecond samples. Arguments: URL (or env:VAR), key (env:VAR, lit:V or
// none), CA file (or system), n, warm-up, nnew.
const secretsClient = `import http.client, json, os, ssl, sys, time
from urllib.parse import urlsplit
def arg(s): return os.environ[s[4:]] if s.startswith('env:') else (s[4:] if s.startswith('lit:') else s)
url, key, ca = arg(sys.argv[1]), sys.argv[2], sys.argv[3]
n, warm, nnew = int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6])
u = urlsplit(url)
hdrs = {'content-type': 'application/json', 'anthropic-version': '2023-06-01'}
if key != 'none': hdrs['x-api-key'] = arg(key)
body = b'{"model":"bench","max_tokens":1,"messages":[{"role":"user","content":"hi"}]}'
ctx = None
if u.scheme == 'https':
    ctx = ssl.create_default_context() if ca == 'system' else ssl.create_default_context(cafile=ca)
def conn():
    if ctx is not None: return http.client.HTTPSConnection(u.hostname, u.port or 443, context=ctx, timeout=10)
    return http.client.HTTPConnection(u.hostname, u.port or 80, timeout=10)
def one(c):
    c.request('POST', '/v1/messages', body=body, headers=hdrs)
    r = c.getresponse(); b = r.read()
    if r.status != 200: sys.exit('status %d: %r' % (r.status, b[:200]))
def us(t): return (time.perf_counter_ns() - t) // 1000
c = conn(); ka = []
for i in range(warm + n):
    t = time.perf_counter_ns(); one(c); d = us(t)
    if i >= warm: ka.append(d)
c.close()
new, nw = [], min(warm, 3)
for i in range(nw + nnew):
    t = time.perf_counter_ns(); c = conn(); one(c); c.close(); d = us(t)
    if i >= nw: new.append(d)
print(json.dumps({'ka': ka, 'new': new}))
`

// secretsMode is one of the three sandboxes and how its client calls.
type secretsMode struct {
	name string // F, G or P
	sbx  *rayito.Sandbox
	args string // URL key CA
}

// Secrets measures the added latency of the two secret modes over a direct
// call (the root platform only), from inside sandboxes of a platform of
// the suite's own to a TLS upstream in a peer namespace that wants
// x-api-key: F = direct (the real key, the test CA), G = the secret
// gateway (plain HTTP to rayd's loopback route, which adds the key and
// calls the upstream over TLS), P = a placeholder (the sandbox calls the
// upstream's own URL with the placeholder; rayd's egress proxy terminates
// TLS with the sandbox CA, swaps the key in and calls the upstream). Keep-
// alive (the goal: added p50 ≤ 1 ms) and a new connection per request
// (information).
func Secrets(ctx context.Context, e *Env) harness.Result {
	if os.Geteuid() != 0 {
		return harness.Result{Suite: SecretsSuite, Unavailable: "not available: needs root (a peer network namespace and the root platform)"}
	}
	keyBytes := make([]byte, 16)
	_, _ = rand.Read(keyBytes)
	key := "sk-bench-" + hex.EncodeToString(keyBytes)

	pn, err := localvmtest.NewPeerNet(secretsPrefix, 0)
	if err != nil {
		return failed(SecretsSuite, fmt.Errorf("peer namespace: %w", err))
	}
	defer pn.Close()
	up := pn.Addrs[0]
	caPEM, leaf, err := secretsPKI(up)
	if err != nil {
		return failed(SecretsSuite, err)
	}
	unauthorized, stopUp, err := secretsUpstream(pn, up, key, leaf)
	if err != nil {
		return failed(SecretsSuite, err)
	}
	defer stopUp()

	ep, stop, err := secretsPlatform(ctx, e, up, caPEM)
	if err != nil {
		return failed(SecretsSuite, err)
	}
	defer stop()
	store, err := secrets.NewLocalStore(filepath.Join(e.Tmp, "secrets-store"))
	if err != nil {
		return failed(SecretsSuite, err)
	}
	if _, err := store.CreateSecret(ctx, "bench-key", []byte(key)); err != nil {
		return failed(SecretsSuite, fmt.Errorf("CreateSecret: %w", err))
	}
	modes := secretsModes(key)
	defer func() {
		for _, m := range modes {
			kill(m.sbx)
		}
	}()
	if err := secretsSandboxes(ctx, e, ep, store, modes, caPEM); err != nil {
		return failed(SecretsSuite, err)
	}

	n, nNew, warm := e.n(500), e.n(100), e.warmup(50)
	rounds := 5
	if n < rounds*10 {
		rounds = 1
	}
	ka, nc, err := secretsRounds(ctx, e, modes, rounds, n, nNew, warm)
	if err != nil {
		return failed(SecretsSuite, err)
	}
	if unauthorized.Load() > 0 {
		return failed(SecretsSuite, fmt.Errorf("the upstream saw %d requests without the key", unauthorized.Load()))
	}
	return secretsResults(e, ka, nc, rounds, warm)
}

// secretsUpstream serves the TLS upstream that wants x-api-key: key at
// up:443 in the peer namespace, and DNS for secretsHost at up:53. It
// returns the count of requests without the key and the server's stop.
func secretsUpstream(pn *localvmtest.PeerNet, up netip.Addr, key string, leaf tls.Certificate) (*atomic.Int64, func(), error) {
	unauthorized := new(atomic.Int64)
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if r.Header.Get("X-Api-Key") != key {
			unauthorized.Add(1)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = io.WriteString(w, `{"error":"no key"}`)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":"msg_bench","type":"message","content":[{"type":"text","text":"ok"}]}`)
	})
	ln, err := pn.Listen("tcp", netip.AddrPortFrom(up, 443).String())
	if err != nil {
		return nil, nil, err
	}
	srv := &http.Server{Handler: handler, ErrorLog: log.New(io.Discard, "", 0),
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{leaf}}}
	go func() { _ = srv.ServeTLS(ln, "", "") }()
	dns, err := pn.ListenPacket("udp", netip.AddrPortFrom(up, 53).String())
	if err != nil {
		_ = srv.Close()
		return nil, nil, err
	}
	go localvmtest.ServeDNS(dns, map[string]netip.Addr{secretsHost + ".": up})
	return unauthorized, func() { _ = srv.Close() }, nil
}

// secretsModes are the three modes, their sandboxes not yet created.
func secretsModes(key string) []*secretsMode {
	url := "https://" + secretsHost
	return []*secretsMode{
		{name: "F", args: fmt.Sprintf("%s lit:%s /tmp/bench-ca.pem", url, key)},
		{name: "G", args: "env:GATEWAY_URL none system"},
		{name: "P", args: url + " env:UPSTREAM_KEY system"},
	}
}

// secretsSandboxes creates modes' three sandboxes on the platform at ep
// (F with the test CA, G with the gateway, P with the placeholder, each
// reading its key from store), writes the client into each and pins them.
// The caller kills them, on errors too.
func secretsSandboxes(ctx context.Context, e *Env, ep string, store *secrets.LocalStore, modes []*secretsMode, caPEM []byte) error {
	ref := secrets.Ref{Name: "bench-key"}
	create := func(opts ...rayito.Option) (*rayito.Sandbox, error) {
		base := []rayito.Option{rayito.WithBackend(rayito.BackendLocal), rayito.WithEndpoint(ep),
			rayito.WithTokenStoreDir(filepath.Join(e.Tmp, "secrets-tokens")), secrets.WithStore(store)}
		return rayito.Create(ctx, append(base, opts...)...)
	}
	url := "https://" + secretsHost
	var err error
	if modes[0].sbx, err = create(); err != nil {
		return fmt.Errorf("create (direct): %w", err)
	}
	if _, err := modes[0].sbx.Files.Write(ctx, "/tmp/bench-ca.pem", caPEM); err != nil {
		return err
	}
	if modes[1].sbx, err = create(secrets.WithGateways(secrets.Gateway{
		Name: "up", Upstream: url,
		Headers: map[string]secrets.HeaderValue{"x-api-key": secrets.Plain(ref)},
		Allow:   []secrets.GatewayRule{{Method: "POST", Path: "/v1/messages"}},
		// The default (600/min) would throttle the benchmark itself.
		RatePerMinute: 6000,
		Env:           "GATEWAY_URL",
	})); err != nil {
		return fmt.Errorf("create (gateway): %w", err)
	}
	if modes[2].sbx, err = create(secrets.WithPlaceholders(secrets.Placeholder{
		Env: "UPSTREAM_KEY", Secret: ref, Host: secretsHost, RatePerMinute: 6000,
	})); err != nil {
		return fmt.Errorf("create (placeholder): %w", err)
	}
	for _, m := range modes {
		if _, err := m.sbx.Files.Write(ctx, "/tmp/secrets.py", []byte(secretsClient)); err != nil {
			return err
		}
	}
	// With -pin, the sandboxes (client and rayd) go to the server CPU; the
	// upstream runs in the harness's process.
	return e.pinSandboxes(modes[0].sbx, modes[1].sbx, modes[2].sbx)
}

// secretsRounds runs the client in rounds, returning each mode's
// keep-alive and new-connection samples.
func secretsRounds(ctx context.Context, e *Env, modes []*secretsMode, rounds, n, nNew, warm int) (ka, nc map[string][]float64, err error) {
	// Rounds interleave the modes (F,G,P / G,P,F / P,F,G ...) so that drift
	// hits all alike; each round is one client run per mode.
	ka, nc = map[string][]float64{}, map[string][]float64{}
	for r := range rounds {
		per, perNew := ceilDiv(n, rounds), ceilDiv(nNew, rounds)
		w := warm
		if r > 0 {
			w = min(warm, 10)
		}
		for i := range modes {
			m := modes[(i+r)%len(modes)]
			e.progress("secrets: round %d/%d, %s", r+1, rounds, m.name)
			ks, ns, err := secretsRun(ctx, m, per, w, perNew)
			if err != nil {
				return nil, nil, fmt.Errorf("%s: %w", m.name, err)
			}
			ka[m.name] = append(ka[m.name], ks...)
			nc[m.name] = append(nc[m.name], ns...)
		}
	}
	return ka, nc, nil
}

// secretsResults makes the gateway's keep-alive result (returned) and the
// placeholder's and the new-connection ones (added to e) from the samples.
func secretsResults(e *Env, ka, nc map[string][]float64, rounds, warm int) harness.Result {
	note := func(r, variant string) string {
		what := map[string]string{
			"G": "R = the secret gateway (plain HTTP to rayd's loopback route $GATEWAY_URL, which adds x-api-key and calls the upstream over TLS)",
			"P": "R = a placeholder (https://" + secretsHost + " with x-api-key: $UPSTREAM_KEY; rayd's egress proxy terminates TLS with the sandbox CA, swaps the key in and calls the upstream over TLS)",
		}[r]
		return "inside the sandbox (python http.client, POST /v1/messages, " + variant + "): F = direct to https://" + secretsHost + " with the real key and the test CA; " + what
	}
	mk := func(suite, r string, samples map[string][]float64, variant string) harness.Result {
		return harness.FromSamples(suite, "ms", false, harness.Samples{By: map[string][]float64{"F": samples["F"], "R": samples[r]}}, note(r, variant))
	}
	gw := mk(SecretsGatewaySuite, "G", ka, "one keep-alive connection")
	ph := mk(SecretsPlaceholderSuite, "P", ka, "one keep-alive connection")
	gwNew := mk(SecretsGatewayNewConnSuite, "G", nc, "a new connection per request; information")
	phNew := mk(SecretsPlaceholderNewConnSuite, "P", nc, "a new connection per request, TLS handshake included; information")
	added := func(r *harness.Result) float64 {
		if r.F == nil || r.R == nil {
			return math.NaN()
		}
		return math.Round((r.R.P50-r.F.P50)*1000) / 1000
	}
	for _, t := range []struct {
		r      *harness.Result
		mode   string
		metric string
	}{{&gw, "G", harness.MetricSecretsGatewayAddedP50}, {&ph, "P", harness.MetricSecretsPlaceholderAddedP50}} {
		a := added(t.r)
		t.r.SetMetric(t.metric, a)
		verdict := "missed"
		if a <= secretsGoalMs {
			verdict = "met"
		}
		t.r.Details = append(t.r.Details,
			fmt.Sprintf("goal: added p50 ≤ %.0f ms (keep-alive): %s (R - F = %.3f ms)", secretsGoalMs, verdict, a),
			fmt.Sprintf("tail: requests over 2 ms: F %.1f %%, R %.1f %%; max F %.2f ms, R %.2f ms",
				over(ka["F"], 2), over(ka[t.mode], 2), maxOf(t.r.F), maxOf(t.r.R)))
	}
	gwNew.SetMetric(harness.MetricSecretsGatewayNewConnAddedP50, added(&gwNew))
	phNew.SetMetric(harness.MetricSecretsPlaceholderNewConnAddedP50, added(&phNew))
	gwNew.Details = append(gwNew.Details, fmt.Sprintf("added p50 %.3f ms (information, no goal); R's new connection is plain HTTP to loopback while rayd keeps its TLS connection to the upstream pooled, so it skips the TLS handshake F pays", added(&gwNew)))
	phNew.Details = append(phNew.Details, fmt.Sprintf("added p50 %.3f ms (information, no goal); R's handshake is with rayd (a leaf of the sandbox CA), whose upstream connection is pooled", added(&phNew)))
	gw.Details = append(gw.Details, fmt.Sprintf("%d rounds interleaving F, G, P; each client run: %d warm-up requests in the first round, %d in the others, then the timed ones; both routes at 6000 requests/min (the default 600 would refuse part of the run)", rounds, warm, min(warm, 10)))
	e.AddResult(ph)
	e.AddResult(gwNew)
	e.AddResult(phNew)
	return gw
}

// secretsRun runs the client once in a mode's sandbox and returns its
// keep-alive and new-connection samples in ms.
func secretsRun(ctx context.Context, m *secretsMode, n, warm, nNew int) (ka, nc []float64, err error) {
	cmd := fmt.Sprintf("python3 /tmp/secrets.py %s %d %d %d", m.args, n, warm, nNew)
	res, err := m.sbx.Commands.Run(ctx, cmd, rayito.WithTimeout(10*time.Minute))
	if err != nil {
		msg := ""
		if res != nil {
			msg = strings.TrimSpace(res.Stderr)
		}
		return nil, nil, fmt.Errorf("the client in the sandbox: %w %s", err, msg)
	}
	var s struct {
		KA  []float64 `json:"ka"`
		New []float64 `json:"new"`
	}
	if err := json.Unmarshal([]byte(res.Stdout), &s); err != nil {
		return nil, nil, fmt.Errorf("the client's output: %w", err)
	}
	for i := range s.KA {
		s.KA[i] /= 1000
	}
	for i := range s.New {
		s.New[i] /= 1000
	}
	return s.KA, s.New, nil
}

// over is the percentage of xs above limit.
func over(xs []float64, limit float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	n := 0
	for _, x := range xs {
		if x > limit {
			n++
		}
	}
	return 100 * float64(n) / float64(len(xs))
}

func maxOf(s *harness.Summary) float64 {
	if s == nil {
		return 0
	}
	return s.Max
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }

// secretsPKI makes an ECDSA P-256 CA and a leaf for upstream.bench and the
// peer's address.
func secretsPKI(ip netip.Addr) ([]byte, tls.Certificate, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, tls.Certificate{}, err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "rayito bench secrets CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, tls.Certificate{}, err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, tls.Certificate{}, err
	}
	leafKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, tls.Certificate{}, err
	}
	leafTmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: secretsHost},
		DNSNames: []string{secretsHost}, IPAddresses: []net.IP{net.IP(ip.AsSlice())},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	leafDER, err := x509.CreateCertificate(rand.Reader, leafTmpl, ca, &leafKey.PublicKey, caKey)
	if err != nil {
		return nil, tls.Certificate{}, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		tls.Certificate{Certificate: [][]byte{leafDER}, PrivateKey: leafKey}, nil
}

// secretsPlatform serves a root platform of the suite's own whose
// sandboxes resolve names through dns and whose gateways trust caPEM,
// until stop.
func secretsPlatform(ctx context.Context, e *Env, dns netip.Addr, caPEM []byte) (endpoint string, stop func(), err error) {
	return ownPlatform(ctx, "secrets", localvm.Options{
		StateDir: filepath.Join(e.Tmp, "secrets-state"), Subnet: secretsSubnet, DNS: []netip.Addr{dns}, UpstreamCAs: caPEM,
	})
}

package suites

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/rayito-dev/rayito/bench/internal/harness"
	"github.com/rayito-dev/rayito/localvm"
	"github.com/rayito-dev/rayito/localvm/localvmtest"
	rayito "github.com/rayito-dev/rayito/sdk"
)

// Names of the egress suite's results.
const (
	EgressSuite           = "egress"
	EgressNewConnSuite    = "egress (new connection)"
	EgressThroughputSuite = "egress (100 MiB)"
)

// Egress addresses: a peer namespace of its own plays the internet.
var (
	egressPrefix = netip.MustParsePrefix("10.251.7.0/24")
	egressSubnet = netip.MustParsePrefix("10.211.0.0/16") // not localvm's default (10.213.0.0/16) nor the other platforms of a run
)

// egressBigBytes is what GET /big answers.
const egressBigBytes = 100 << 20

// egressClient runs inside the sandbox: it times requests to the direct
// path (an allowed CIDR) and the policy path (an allowed name whose
// address is not allowed directly, so its connections are redirected to
// rayd's egress proxy, which checks the Host and dials), and prints one
// JSON object of millisecond samples.
const egressClient = `import http.client, json, socket, sys, time
direct, named, denied, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
def ms(t): return (time.perf_counter() - t) * 1000
def keepalive(host):
    c = http.client.HTTPConnection(host, 80, timeout=10)
    out = []
    for _ in range(n + 5):
        t = time.perf_counter(); c.request('GET', '/'); c.getresponse().read(); out.append(ms(t))
    c.close()
    return out[5:]
def newconn(host):
    out = []
    for _ in range(n // 2 + 3):
        t = time.perf_counter()
        c = http.client.HTTPConnection(host, 80, timeout=10); c.request('GET', '/'); c.getresponse().read(); c.close()
        out.append(ms(t))
    return out[3:]
def big(host):
    out = []
    for _ in range(3):
        c = http.client.HTTPConnection(host, 80, timeout=60)
        t = time.perf_counter(); c.request('GET', '/big'); r = c.getresponse(); got = 0
        while True:
            b = r.read(1 << 20)
            if not b: break
            got += len(b)
        out.append(got / ms(t) / 1000)
        c.close()
    return out
def refused():
    out = []
    for _ in range(n // 4 + 2):
        t = time.perf_counter()
        try:
            socket.create_connection((denied, 81), timeout=5).close(); out.append(-1)
        except OSError:
            out.append(ms(t))
    return out[2:]
print(json.dumps({'ka_direct': keepalive(direct), 'ka_named': keepalive(named), 'new_direct': newconn(direct), 'new_named': newconn(named),
    'big_direct': big(direct), 'big_named': big(named), 'refused': refused()}))
`

// Egress measures the policy path (BENCHMARKS.md §2.9): from inside a
// sandbox with a policy, to servers in a peer namespace of the suite's
// own (the root platform only), F = the direct path (an allowed CIDR),
// R = through rayd's egress proxy (an allowed name, redirected
// transparently): keep-alive request latency (EgressSuite), a new
// connection per request (EgressNewConnSuite) and 100 MiB downloads
// (EgressThroughputSuite), plus how fast a denied connection fails and
// how long UpdateNetwork takes (metrics).
func Egress(ctx context.Context, e *Env) harness.Result {
	if os.Geteuid() != 0 {
		return harness.Result{Suite: EgressSuite, Unavailable: "not available: needs root (a peer network namespace and the root platform)"}
	}
	pn, err := localvmtest.NewPeerNet(egressPrefix, 1)
	if err != nil {
		return failed(EgressSuite, fmt.Errorf("peer namespace: %w", err))
	}
	defer pn.Close()
	direct, proxied := pn.Addrs[0], pn.Addrs[1]
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok") })
	mux.HandleFunc("/big", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", fmt.Sprint(egressBigBytes))
		buf := make([]byte, 256<<10)
		for sent := 0; sent < egressBigBytes; sent += len(buf) {
			if _, err := w.Write(buf); err != nil {
				return
			}
		}
	})
	for _, a := range pn.Addrs {
		ln, err := pn.Listen("tcp", netip.AddrPortFrom(a, 80).String())
		if err != nil {
			return failed(EgressSuite, err)
		}
		go func() { _ = http.Serve(ln, mux) }()
	}
	dns, err := pn.ListenPacket("udp", netip.AddrPortFrom(direct, 53).String())
	if err != nil {
		return failed(EgressSuite, err)
	}
	go localvmtest.ServeDNS(dns, map[string]netip.Addr{"egress.test.": proxied})

	ep, stop, err := egressPlatform(ctx, e, direct)
	if err != nil {
		return failed(EgressSuite, err)
	}
	defer stop()
	policy := rayito.NetworkPolicy{AllowOut: []string{direct.String() + "/32", "egress.test"}, DenyOut: rayito.DenyAllNetwork().DenyOut}
	sbx, err := rayito.Create(ctx, rayito.WithBackend(rayito.BackendLocal), rayito.WithEndpoint(ep),
		rayito.WithTokenStoreDir(filepath.Join(e.Tmp, "egress-tokens")), rayito.WithNetwork(policy))
	if err != nil {
		return failed(EgressSuite, fmt.Errorf("create: %w", err))
	}
	defer kill(sbx)
	if _, err := sbx.Files.Write(ctx, "/tmp/egress.py", []byte(egressClient)); err != nil {
		return failed(EgressSuite, err)
	}
	n := e.n(200)
	res, err := sbx.Commands.Run(ctx, fmt.Sprintf("python3 /tmp/egress.py %s egress.test %s %d", direct, proxied, n), rayito.WithTimeout(10*time.Minute))
	if err != nil {
		stderr := ""
		if res != nil {
			stderr = strings.TrimSpace(res.Stderr)
		}
		return failed(EgressSuite, fmt.Errorf("the client in the sandbox: %w %s", err, stderr))
	}
	var s map[string][]float64
	if err := json.Unmarshal([]byte(res.Stdout), &s); err != nil {
		return failed(EgressSuite, fmt.Errorf("the client's output: %w", err))
	}
	if slices.Contains(s["refused"], -1) {
		return failed(EgressSuite, fmt.Errorf("a denied connection was accepted"))
	}
	// UpdateNetwork, alternating two policies, as the SDK sees it.
	other := rayito.NetworkPolicy{AllowOut: []string{direct.String() + "/32"}, DenyOut: rayito.DenyAllNetwork().DenyOut}
	var updates []float64
	for i := range 21 {
		p := policy
		if i%2 == 0 {
			p = other
		}
		t := time.Now()
		if _, err := sbx.UpdateNetwork(ctx, p); err != nil {
			return failed(EgressSuite, fmt.Errorf("UpdateNetwork: %w", err))
		}
		if i > 0 {
			updates = append(updates, float64(time.Since(t).Microseconds())/1000)
		}
	}
	nc := harness.FromSamples(EgressNewConnSuite, "ms", false, harness.Samples{By: map[string][]float64{"F": s["new_direct"], "R": s["new_named"]}},
		"inside the sandbox: F = a new connection and GET to an allowed CIDR (direct), R = the same to an allowed name (redirected to rayd's proxy, which checks the Host, resolves and dials)")
	e.AddResult(nc)
	tp := harness.FromSamples(EgressThroughputSuite, "MB/s", true, harness.Samples{By: map[string][]float64{"F": s["big_direct"], "R": s["big_named"]}},
		"inside the sandbox: GET of 100 MiB, F = direct to an allowed CIDR, R = an allowed name through rayd's proxy")
	e.AddResult(tp)
	r := harness.FromSamples(EgressSuite, "ms", false, harness.Samples{By: map[string][]float64{"F": s["ka_direct"], "R": s["ka_named"]}},
		"inside the sandbox (python http.client, keep-alive): F = GET / to an allowed CIDR (direct, through the nftables rules), R = GET / to an allowed name (the connection redirected to rayd's proxy, which splices it)")
	ref, upd := harness.Summarize(s["refused"]), harness.Summarize(updates)
	r.Metrics = map[string]float64{harness.MetricEgressRefusedP50: ref.P50, harness.MetricUpdateNetworkP50: upd.P50}
	if r.F != nil && r.R != nil {
		r.Metrics[harness.MetricEgressAddedP50] = r.R.P50 - r.F.P50
	}
	r.Details = append(r.Details,
		fmt.Sprintf("a denied connection (a port no rule allows) fails after p50 %.3f ms, p95 %.3f ms (n %d)", ref.P50, ref.P95, len(s["refused"])),
		fmt.Sprintf("UpdateNetwork (SDK call, alternating two policies) p50 %.2f ms, p95 %.2f ms (n %d)", upd.P50, upd.P95, len(updates)))
	return r
}

// egressPlatform serves a root platform of the suite's own whose
// sandboxes resolve names through dns, until stop.
func egressPlatform(ctx context.Context, e *Env, dns netip.Addr) (endpoint string, stop func(), err error) {
	return ownPlatform(ctx, "egress", localvm.Options{
		StateDir: filepath.Join(e.Tmp, "egress-state"), Subnet: egressSubnet, DNS: []netip.Addr{dns},
	})
}

// ownPlatform serves a root platform with opts (a suite's own state dir
// and subnet) on a loopback port until stop, which terminates its
// sandboxes.
func ownPlatform(ctx context.Context, suite string, opts localvm.Options) (endpoint string, stop func(), err error) {
	opts.Logger = slog.New(slog.DiscardHandler)
	srv, err := localvm.New(ctx, opts)
	if err != nil {
		return "", nil, fmt.Errorf("localvm (%s): %w", suite, err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		_ = srv.Close(ctx)
		return "", nil, err
	}
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	served := make(chan error, 1)
	go func() { served <- srv.Serve(sctx, ln) }()
	return "http://" + ln.Addr().String(), func() {
		cctx, ccancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer ccancel()
		_ = srv.TerminateAll(cctx)
		cancel()
		<-served
		_ = srv.Close(cctx)
	}, nil
}

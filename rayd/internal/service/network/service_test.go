package network

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"strings"
	"testing"

	"connectrpc.com/connect"

	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
	"github.com/rayito-dev/rayito/proto/runpayload"
	"github.com/rayito-dev/rayito/rayd/internal/egress"
	"github.com/rayito-dev/rayito/rayd/internal/netpolicy"
	"github.com/rayito-dev/rayito/rayd/internal/rpcerr"
	"github.com/rayito-dev/rayito/rayd/internal/sandbox"
)

type fakeEnforcer struct {
	probeErr, setErr error
	sets             []netpolicy.Policy
}

func (f *fakeEnforcer) Probe(context.Context) error { return f.probeErr }
func (f *fakeEnforcer) Set(_ context.Context, p netpolicy.Policy) error {
	f.sets = append(f.sets, p)
	return f.setErr
}
func (f *fakeEnforcer) Verify(context.Context) error { return nil }
func (f *fakeEnforcer) IMDSBlocked() bool            { return true }

type fakeHosts struct {
	pol      egress.HostPolicy
	upstream *egress.Upstream
}

func (f *fakeHosts) SetPolicy(p egress.HostPolicy, u *egress.Upstream) { f.pol, f.upstream = p, u }

type fakeDNS struct{ pol egress.HostPolicy }

func (f *fakeDNS) SetPolicy(p egress.HostPolicy) { f.pol = p }

// newTestService returns a started service whose sandbox has run.
func newTestService(t *testing.T, e *fakeEnforcer) (*Service, *fakeHosts, *fakeDNS) {
	t.Helper()
	st := sandbox.New(sandbox.Options{})
	digest := strings.Repeat("a", 64)
	raw, err := runpayload.Encode(&runpayload.Payload{V: 1, TokenSHA256: digest})
	if err != nil {
		t.Fatal(err)
	}
	st.Run(context.Background(), "microvm-test", raw)
	h, d := &fakeHosts{}, &fakeDNS{}
	s := New(Options{State: st, Enforcer: e, Proxy: h, DNS: d, ProxyPort: 9180})
	s.Start(context.Background())
	return s, h, d
}

func reasonOf(err error) raydv1.ErrorReason {
	var ce *connect.Error
	if !errors.As(err, &ce) {
		return raydv1.ErrorReason_ERROR_REASON_UNSPECIFIED
	}
	return rpcerr.ReasonOf(ce)
}

func update(s *Service, allow, deny []string, proxy *raydv1.EgressProxy) (*raydv1.NetworkState, error) {
	resp, err := s.UpdateNetwork(context.Background(), connect.NewRequest(&raydv1.UpdateNetworkRequest{Policy: &raydv1.NetworkPolicy{AllowOut: allow, DenyOut: deny, EgressProxy: proxy}}))
	if err != nil {
		return nil, err
	}
	return resp.Msg.GetState(), nil
}

func TestUpdateNetwork(t *testing.T) {
	e := &fakeEnforcer{}
	s, hosts, dns := newTestService(t, e)
	if len(e.sets) != 1 || !e.sets[0].Unrestricted() {
		t.Fatalf("boot install: %+v", e.sets)
	}
	// Bad input: refused before anything is installed.
	for _, bad := range [][]string{{"not a host!"}, {"*.*.example.com"}, {"10.0.0.0/33"}} {
		if _, err := update(s, bad, nil, nil); reasonOf(err) != raydv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT {
			t.Fatalf("%q: %v", bad, err)
		}
	}
	if _, err := update(s, nil, nil, &raydv1.EgressProxy{Address: "no-port"}); reasonOf(err) != raydv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT {
		t.Fatalf("bad proxy: %v", err)
	}
	if len(e.sets) != 1 {
		t.Fatalf("bad input installed something: %d sets", len(e.sets))
	}
	// A policy with hosts and an operator proxy.
	pw := "hunter2"
	st, err := update(s, []string{"api.example.com", "10.1.0.0/16"}, []string{"0.0.0.0/0", "::/0"}, &raydv1.EgressProxy{Address: "proxy.corp:1080", Username: ptr("u"), Password: &pw})
	if err != nil {
		t.Fatal(err)
	}
	if !st.GetEgressProxyConfigured() || st.GetLocalProxyPort() != 9180 || st.GetEnforcement() != raydv1.EgressEnforcement_EGRESS_ENFORCEMENT_GUEST_ROUTES_AND_PROXY {
		t.Fatalf("state %v", st)
	}
	if strings.Contains(st.String(), pw) || strings.Contains(st.String(), "proxy.corp") {
		t.Fatal("the state shows the operator proxy")
	}
	if hosts.upstream == nil || hosts.upstream.Password != pw || !hosts.pol.AllowsHost("api.example.com", 443) || dns.pol == nil {
		t.Fatalf("proxy and DNS not given the policy: %+v", hosts)
	}
	env := s.ProxyEnv()
	if env["HTTPS_PROXY"] != "http://127.0.0.1:9180" || !strings.Contains(env["NO_PROXY"], "10.1.0.0/16") {
		t.Fatalf("proxy env %v", env)
	}
	got, err := s.GetNetwork(context.Background(), connect.NewRequest(&raydv1.GetNetworkRequest{}))
	if err != nil || strings.Contains(got.Msg.String(), pw) {
		t.Fatalf("GetNetwork %v %v", got, err)
	}
	// A failed install: deny-all everywhere, Internal.
	e.setErr = errors.New("boom")
	if _, err := update(s, nil, nil, nil); reasonOf(err) != raydv1.ErrorReason_ERROR_REASON_EGRESS_UPDATE_FAILED {
		t.Fatalf("failed install: %v", err)
	}
	if hosts.upstream != nil || hosts.pol.AllowsHost("api.example.com", 443) || s.ProxyEnv() != nil {
		t.Fatal("after a failed install the proxy still allows the old policy")
	}
	e.setErr = nil
	got, _ = s.GetNetwork(context.Background(), connect.NewRequest(&raydv1.GetNetworkRequest{}))
	if len(got.Msg.GetState().GetDenyOut()) == 0 || len(got.Msg.GetState().GetAllowOut()) != 0 {
		t.Fatalf("after a failed install: %v", got.Msg.GetState())
	}
}

func TestNetworkUnavailable(t *testing.T) {
	s, _, _ := newTestService(t, &fakeEnforcer{probeErr: errors.New("EPERM")})
	if _, err := update(s, nil, []string{"0.0.0.0/0"}, nil); reasonOf(err) != raydv1.ErrorReason_ERROR_REASON_EGRESS_UNAVAILABLE {
		t.Fatalf("without the capability: %v", err)
	}
	if s.Enforcement() != raydv1.EgressEnforcement_EGRESS_ENFORCEMENT_NONE || s.IMDSBlocked() {
		t.Fatal("enforcement without the capability")
	}
	if r := s.RunNetwork(); r != raydv1.RunNetwork_RUN_NETWORK_NOT_REQUESTED {
		t.Errorf("RunNetwork before /run: %v", r)
	}
	if err := s.Install(context.Background(), &runpayload.Network{Enforce: true, DenyOut: []string{"0.0.0.0/0"}}); reasonOf(err) != raydv1.ErrorReason_ERROR_REASON_EGRESS_UNAVAILABLE {
		t.Fatalf("install without the capability: %v", err)
	}
	if r := s.RunNetwork(); r != raydv1.RunNetwork_RUN_NETWORK_UNAVAILABLE {
		t.Errorf("RunNetwork without the capability: %v", r)
	}
}

// TestInstallPayload: the run payload's policy goes in after deny-all; one
// rayd cannot parse leaves deny-all.
func TestInstallPayload(t *testing.T) {
	e := &fakeEnforcer{}
	s, _, _ := newTestService(t, e)
	if err := s.Install(context.Background(), &runpayload.Network{Enforce: true, AllowOut: []string{"10.0.0.0/8"}, DenyOut: []string{"0.0.0.0/0"}}); err != nil {
		t.Fatal(err)
	}
	if n := len(e.sets); n != 3 || !e.sets[1].DenyAll() || len(e.sets[2].AllowCIDRs()) != 1 {
		t.Fatalf("sets %+v", e.sets)
	}
	if r := s.RunNetwork(); r != raydv1.RunNetwork_RUN_NETWORK_IN_FORCE {
		t.Errorf("RunNetwork after an install: %v", r)
	}
	if err := s.Install(context.Background(), &runpayload.Network{Enforce: true, AllowOut: []string{"bad entry!"}}); reasonOf(err) != raydv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT {
		t.Fatalf("unparsable payload policy: %v", err)
	}
	if last := e.sets[len(e.sets)-1]; !last.DenyAll() {
		t.Fatalf("after an unparsable payload policy: %+v", last)
	}
	if r := s.RunNetwork(); r != raydv1.RunNetwork_RUN_NETWORK_FAILED {
		t.Errorf("RunNetwork after an unparsable policy: %v", r)
	}
	// The enforcer fails: deny-all stays, and Health says FAILED.
	e.setErr = errors.New("netlink: EPERM")
	if err := s.Install(context.Background(), &runpayload.Network{Enforce: true, AllowOut: []string{"10.0.0.0/8"}}); err == nil {
		t.Fatal("a failed install answered nil")
	}
	if r := s.RunNetwork(); r != raydv1.RunNetwork_RUN_NETWORK_FAILED {
		t.Errorf("RunNetwork after a failed install: %v", r)
	}
	e.setErr = nil
	if err := s.Install(context.Background(), &runpayload.Network{Enforce: false}); err != nil {
		t.Fatal(err)
	}
	if r := s.RunNetwork(); r != raydv1.RunNetwork_RUN_NETWORK_NOT_REQUESTED {
		t.Errorf("RunNetwork without a policy: %v", r)
	}
}

func ptr[T any](v T) *T { return &v }

// UpdateNetwork refuses, as InvalidArgument and before anything is
// installed, an operator proxy that rayd would dial at an internal
// address (every literal form of loopback, unspecified, link-local and
// the IMDS, IPv4-mapped and embedded ones included, and every localhost
// name), and allow_out entries under .localhost; its errors name the list
// and the index, never the entry or the address.
func TestUpdateNetworkRefusesInternalDestinations(t *testing.T) {
	e := &fakeEnforcer{}
	s, hosts, _ := newTestService(t, e)
	for _, addr := range []string{
		"127.0.0.1:1080", "127.0.0.2:1080", "127.255.255.254:1080", "[::1]:1080",
		"0.0.0.0:1080", "[::]:1080", "169.254.169.254:1080", "169.254.0.1:1080", "[fe80::1]:1080",
		"[fe80::1%eth0]:1080", "[fd00:ec2::254]:1080", "[::ffff:127.0.0.1]:1080", "[::ffff:169.254.169.254]:1080",
		"[::ffff:7f00:1]:1080", "[::127.0.0.1]:1080", "[64:ff9b::a9fe:a9fe]:1080", "[2002:7f00:1::]:1080",
		"localhost:1080", "LOCALHOST:1080", "localhost.:1080", "x.localhost:1080", "a.b.LocalHost.:1080",
		"127.1:1080", "2130706433:1080", "0x7f000001:1080", "0177.0.0.1:1080",
	} {
		_, err := update(s, []string{"api.example.com"}, nil, &raydv1.EgressProxy{Address: addr, Username: ptr("op"), Password: ptr("pw-Zq8")})
		if reasonOf(err) != raydv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT {
			t.Errorf("egress_proxy %s: %v", addr, err)
			continue
		}
		// One fixed text: the address is never echoed.
		var ce *connect.Error
		if !errors.As(err, &ce) || ce.Message() != "egress_proxy.address: loopback, unspecified, link-local and metadata addresses, the sandbox's own addresses and localhost names are not allowed" {
			t.Errorf("egress_proxy %s: error %v", addr, err)
		}
	}
	for _, tc := range []struct {
		allow []string
		want  string
	}{
		{[]string{"10.0.0.0/8", "api.example.com", "*.example.org", "x.localhost"}, "network policy: allow_out[3]: a host name under .localhost is not allowed"},
		{[]string{"localhost"}, "network policy: allow_out[0]: a host name under .localhost is not allowed"},
		{[]string{"api.example.com", "*.localhost"}, "network policy: allow_out[1]: a host name under .localhost is not allowed"},
		{[]string{"db-internal-Zq8.X.LOCALHOST.:5432"}, "network policy: allow_out[0]: a host name under .localhost is not allowed"},
		{[]string{"db-internal-Zq8.corp:99999"}, "network policy: allow_out[0]: port must be 1-65535"},
	} {
		_, err := update(s, tc.allow, nil, nil)
		var ce *connect.Error
		if !errors.As(err, &ce) || ce.Code() != connect.CodeInvalidArgument || ce.Message() != tc.want {
			t.Errorf("allow_out %q: %v, want %q", tc.allow, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "Zq8") {
			t.Errorf("allow_out %q: the error echoes the entry: %v", tc.allow, err)
		}
	}
	// The payload's policy: the same refusal, deny-all left in force.
	err := s.Install(context.Background(), &runpayload.Network{Enforce: true, AllowOut: []string{"api.example.com", "x.localhost"}})
	var ce *connect.Error
	if !errors.As(err, &ce) || ce.Message() != "network policy: allow_out[1]: a host name under .localhost is not allowed" {
		t.Errorf("payload with x.localhost: %v", err)
	}
	if n := len(e.sets); n != 2 || !e.sets[1].DenyAll() {
		t.Fatalf("installs: %d (only the boot policy and the payload's deny-all expected)", n)
	}
	if hosts.upstream != nil {
		t.Fatal("a refused upstream reached the proxy")
	}
	// A proxy in the VPC or on the Internet is fine.
	for _, addr := range []string{"proxy.corp:1080", "socks:1080", "10.0.0.5:1080", "[2001:db8::5]:1080", "localhost.example.com:1080"} {
		if _, err := update(s, nil, nil, &raydv1.EgressProxy{Address: addr}); err != nil {
			t.Errorf("egress_proxy %s: %v", addr, err)
		}
	}
}

// FuzzValidUpstream: validUpstream never panics, never takes an address
// the proxy's guard would refuse, and its errors never hold the address
// or the credentials.
func FuzzValidUpstream(f *testing.F) {
	for _, s := range []string{"proxy.corp:1080", "127.0.0.1:1080", "[::1]:1080", "localhost:1080", "x.localhost:1080",
		"169.254.169.254:1080", "[fd00:ec2::254]:1080", "[::ffff:127.0.0.1]:1080", "[fe80::1%eth0]:1080", "127.1:1080",
		"0x7f000001:1080", "no-port", ":1080", "a:0", "a:65536", "[::1]", "a b:1"} {
		f.Add(s, "user", "pass")
	}
	f.Fuzz(func(t *testing.T, addr, user, pass string) {
		up, err := validUpstream(&raydv1.EgressProxy{Address: addr, Username: &user, Password: &pass})
		if err != nil {
			if up != nil {
				t.Fatal("an upstream with an error")
			}
			msg := err.Error()
			for _, s := range []string{addr, user, pass} {
				if len(s) >= 12 && strings.Contains(msg, s) {
					t.Fatalf("error %q echoes input", msg)
				}
			}
			return
		}
		host, _, serr := net.SplitHostPort(up.Address)
		if serr != nil || egress.BlockedUpstreamHost(host) || netpolicy.LocalhostName(host) {
			t.Fatalf("accepted %q", addr)
		}
		if a, aerr := netip.ParseAddr(host); aerr == nil && egress.Blocked(a) {
			t.Fatalf("accepted a guarded address %q", addr)
		}
	})
}

//go:build linux

package netcfg

import (
	"errors"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"
)

const (
	ruleDNSRedirUDP = `l4proto == "\x11" payload 2/2/2 == "\x005" imm 14e9 redir`
	ruleDNSRedirTCP = `l4proto == "\x06" payload 2/2/2 == "\x005" imm 14e9 redir`
	ruleIntercept   = `l4proto == "\x06" payload 2/2/2 @intercept_ports imm 1f90 redir`
	ruleProxyPorts  = `l4proto == "\x06" payload 2/2/2 @proxy_ports imm 1f90 redir`
	ruleAllow4Ret   = `nfproto == "\x02" payload 1/16/4 @allow4 return`
)

var natReturns = []string{
	`oifname == "lo" return`,
	`nfproto == "\x02" payload 1/16/1 == "\x7f" return`,
	`nfproto == "\n" payload 1/24/16 == ::1 return`,
	`nfproto == "\x02" payload 1/16/4 == 169.254.169.254 return`,
	`nfproto == "\n" payload 1/24/16 == fd00:ec2::254 return`,
}

func join(parts ...[]string) []string { return slices.Concat(parts...) }

func wantChain(t *testing.T, f *fakeNFT, chain string, want []string) {
	t.Helper()
	if got := renderChain(f, chain); !slices.Equal(got, want) {
		t.Errorf("%s =\n%s\nwant\n%s", chain, strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestInterceptRules(t *testing.T) {
	for _, tc := range []struct {
		name        string
		allow, deny []string
		out, nat    []string
	}{
		{name: "hosts and cidr", allow: []string{"api.example.com", "10.0.0.0/8"}, deny: []string{"ALL_TRAFFIC"},
			out: []string{ruleLo, ruleLo4, ruleLo6, ruleIMDS4, ruleIMDS6, ruleAllow4, ruleDeny4, ruleDeny6},
			// The intercept redirect comes after the loopback and IMDS
			// returns and before the allow-set returns: an allowed
			// address on an intercepted port still reaches the proxy.
			nat: join([]string{ruleDNSRedirUDP, ruleDNSRedirTCP}, natReturns, []string{ruleIntercept, ruleAllow4Ret, ruleProxyPorts})},
		{name: "unrestricted",
			out: []string{ruleLo, ruleLo4, ruleLo6, ruleIMDS4, ruleIMDS6},
			nat: join(natReturns, []string{ruleIntercept})},
		{name: "deny-all", deny: []string{"ALL_TRAFFIC"},
			// No DNS reject: names resolve through the forwarder.
			out: []string{ruleLo, ruleLo4, ruleLo6, ruleIMDS4, ruleIMDS6, ruleDeny4, ruleDeny6},
			nat: join([]string{ruleDNSRedirUDP, ruleDNSRedirTCP}, natReturns, []string{ruleIntercept})},
		{name: "cidr only", allow: []string{"10.0.0.0/8"},
			out: []string{ruleLo, ruleLo4, ruleLo6, ruleIMDS4, ruleIMDS6, ruleAllow4},
			nat: join(natReturns, []string{ruleIntercept})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, f, _ := newTest(t)
			p := policy(t, tc.allow, tc.deny).WithIntercept([]uint16{443, 80, 443})
			if err := r.Set(t.Context(), p); err != nil {
				t.Fatal(err)
			}
			if got := elemKeys(f.elems(setInterceptPorts)); !slices.Equal(got, []string{"0050/false", "01bb/false"}) {
				t.Errorf("@intercept_ports = %q", got)
			}
			wantChain(t, f, chainSandboxOut, tc.out)
			wantChain(t, f, chainSandboxNAT, tc.nat)
			if err := r.Verify(t.Context()); err != nil {
				t.Errorf("Verify: %v", err)
			}
		})
	}
}

func TestInterceptPortsEmptyWithoutIntercept(t *testing.T) {
	r, f, _ := newTest(t)
	if err := r.Set(t.Context(), policy(t, nil, []string{"ALL_TRAFFIC"})); err != nil {
		t.Fatal(err)
	}
	// The set exists (verification expects it) but is empty, and nothing
	// is redirected; deny-all without intercept rejects DNS.
	if got := f.elems(setInterceptPorts); len(got) != 0 {
		t.Errorf("@intercept_ports = %v", got)
	}
	wantChain(t, f, chainSandboxNAT, nil)
	if out := renderChain(f, chainSandboxOut); !slices.Contains(out, ruleUDP53) || !slices.Contains(out, ruleTCP53) {
		t.Errorf("sandbox_out = %q", out)
	}
}

func TestInterceptNeedsPorts(t *testing.T) {
	f, fr := newFakeNFT(), &fakeRules{}
	r, err := New(Options{NFT: f, Rules: fr, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	err = r.Set(t.Context(), policy(t, nil, nil).WithIntercept([]uint16{443}))
	if !errors.Is(err, ErrInstall) {
		t.Fatalf("Set = %v, want ErrInstall", err)
	}
	assertLockdown(t, f)
	// Deny-all itself was installed, ip rules included, on the very first
	// Set: neither reported as failed nor IMDS left unblocked.
	if strings.Contains(err.Error(), "deny-all") || !r.IMDSBlocked() || len(fr.rules) != 2 {
		t.Errorf("Set = %v, IMDSBlocked %v, %d ip rules", err, r.IMDSBlocked(), len(fr.rules))
	}
}

func TestInterceptEqualReinstalls(t *testing.T) {
	r, f, _ := newTest(t)
	base := policy(t, []string{"api.example.com"}, []string{"ALL_TRAFFIC"})
	a := base.WithIntercept([]uint16{443})
	b := base.WithIntercept([]uint16{443, 8443})
	if a.Equal(b) || a.Equal(base) || !a.Equal(base.WithIntercept([]uint16{443, 443})) {
		t.Fatal("Equal does not compare the intercept ports")
	}
	if !base.Equal(base.WithIntercept(nil)) {
		t.Error("WithIntercept(nil) differs from no intercept")
	}
	if err := r.Set(t.Context(), a); err != nil {
		t.Fatal(err)
	}
	flushes := f.flushes
	if err := r.Set(t.Context(), base.WithIntercept([]uint16{443})); err != nil || f.flushes != flushes {
		t.Fatalf("the same policy reinstalled: %v, %d -> %d flushes", err, flushes, f.flushes)
	}
	if err := r.Set(t.Context(), b); err != nil {
		t.Fatal(err)
	}
	if f.flushes == flushes {
		t.Fatal("other intercept ports did not reinstall")
	}
	if got := elemKeys(f.elems(setInterceptPorts)); !slices.Equal(got, []string{"01bb/false", "20fb/false"}) {
		t.Errorf("@intercept_ports = %q", got)
	}
	// Back to no intercept: the redirect goes away.
	if err := r.Set(t.Context(), base); err != nil {
		t.Fatal(err)
	}
	if slices.Contains(renderChain(f, chainSandboxNAT), ruleIntercept) || len(f.elems(setInterceptPorts)) != 0 {
		t.Errorf("sandbox_nat = %q", renderChain(f, chainSandboxNAT))
	}
}

//go:build linux

package netcfg

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"

	"github.com/rayito-dev/rayito/rayd/internal/netpolicy"
)

// render prints a rule's expressions in a compact nft-like form.
func render(r *nftables.Rule) string {
	var out []string
	for i, e := range r.Exprs {
		afterNH := false
		if i > 0 {
			if p, ok := r.Exprs[i-1].(*expr.Payload); ok && p.Base == expr.PayloadBaseNetworkHeader {
				afterNH = true
			}
		}
		switch e := e.(type) {
		case *expr.Meta:
			out = append(out, map[expr.MetaKey]string{
				expr.MetaKeySKUID: "skuid", expr.MetaKeyOIFNAME: "oifname",
				expr.MetaKeyL4PROTO: "l4proto", expr.MetaKeyNFPROTO: "nfproto",
			}[e.Key])
		case *expr.Byteorder:
			out = append(out, "hton")
		case *expr.Range:
			out = append(out, fmt.Sprintf("range %x-%x", e.FromData, e.ToData))
		case *expr.Cmp:
			if afterNH {
				if a, ok := netip.AddrFromSlice(e.Data); ok {
					out = append(out, "== "+a.String())
					break
				}
			}
			out = append(out, fmt.Sprintf("== %q", strings.TrimRight(string(e.Data), "\x00")))
		case *expr.Payload:
			out = append(out, fmt.Sprintf("payload %d/%d/%d", e.Base, e.Offset, e.Len))
		case *expr.Lookup:
			out = append(out, "@"+e.SetName)
		case *expr.Verdict:
			switch e.Kind {
			case expr.VerdictAccept:
				out = append(out, "accept")
			case expr.VerdictReturn:
				out = append(out, "return")
			case expr.VerdictJump:
				out = append(out, "jump "+e.Chain)
			default:
				out = append(out, fmt.Sprint("verdict ", e.Kind))
			}
		case *expr.Reject:
			out = append(out, fmt.Sprintf("reject %d/%d", e.Type, e.Code))
		case *expr.Immediate:
			out = append(out, fmt.Sprintf("imm %x", e.Data))
		case *expr.Redir:
			out = append(out, "redir")
		default:
			out = append(out, fmt.Sprintf("%T", e))
		}
	}
	return strings.Join(out, " ")
}

func renderChain(f *fakeNFT, chain string) []string {
	var out []string
	for _, r := range f.rules(chain) {
		out = append(out, render(r))
	}
	return out
}

func newTest(t *testing.T) (*Reconciler, *fakeNFT, *fakeRules) {
	t.Helper()
	f, fr := newFakeNFT(), &fakeRules{}
	r, err := New(Options{ProxyPort: 8080, DNSPort: 5353, NFT: f, Rules: fr,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	return r, f, fr
}

func policy(t *testing.T, allow, deny []string) netpolicy.Policy {
	t.Helper()
	p, err := netpolicy.Parse(allow, deny)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

const (
	ruleLo      = `oifname == "lo" accept`
	ruleLo4     = `nfproto == "\x02" payload 1/16/1 == "\x7f" accept`
	ruleLo6     = `nfproto == "\n" payload 1/24/16 == ::1 accept`
	ruleIMDS4   = `nfproto == "\x02" payload 1/16/4 == 169.254.169.254 jump reject`
	ruleIMDS6   = `nfproto == "\n" payload 1/24/16 == fd00:ec2::254 jump reject`
	ruleUDP53   = `l4proto == "\x11" payload 2/2/2 == "\x005" jump reject`
	ruleTCP53   = `l4proto == "\x06" payload 2/2/2 == "\x005" jump reject`
	ruleAllow4  = `nfproto == "\x02" payload 1/16/4 @allow4 accept`
	ruleAllow6  = `nfproto == "\n" payload 1/24/16 @allow6 accept`
	ruleDeny4   = `nfproto == "\x02" payload 1/16/4 @deny4 jump reject`
	ruleDeny6   = `nfproto == "\n" payload 1/24/16 @deny6 jump reject`
	ruleJumpOut = `skuid hton range 000003e8-0000ffff jump sandbox_out`
	ruleJumpNAT = `skuid hton range 000003e8-0000ffff jump sandbox_nat`
)

func TestRulesPerPolicy(t *testing.T) {
	for _, tc := range []struct {
		name        string
		allow, deny []string
		out, nat    []string
		sets        map[string][]string
	}{
		{name: "unrestricted",
			out: []string{ruleLo, ruleLo4, ruleLo6, ruleIMDS4, ruleIMDS6}},
		{name: "deny-all", deny: []string{"ALL_TRAFFIC"},
			out:  []string{ruleUDP53, ruleTCP53, ruleLo, ruleLo4, ruleLo6, ruleIMDS4, ruleIMDS6, ruleDeny4, ruleDeny6},
			sets: map[string][]string{setDeny4: {"00000000/false"}, setDeny6: {"00000000000000000000000000000000/false"}}},
		{name: "allow-cidr", allow: []string{"10.99.0.2", "10.0.0.0/8", "11.0.0.0/8"}, deny: []string{"ALL_TRAFFIC"},
			out: []string{ruleLo, ruleLo4, ruleLo6, ruleIMDS4, ruleIMDS6, ruleAllow4, ruleDeny4, ruleDeny6},
			sets: map[string][]string{
				setAllow4: {"0a000000/false", "0c000000/true"}, // 10/8 and 11/8 merged, 10.99.0.2 inside
				setAllow6: {}}},
		{name: "hosts-deny-all", allow: []string{"api.example.com", "*.example.org:8443"}, deny: []string{"ALL_TRAFFIC"},
			out: []string{ruleLo, ruleLo4, ruleLo6, ruleIMDS4, ruleIMDS6, ruleDeny4, ruleDeny6},
			nat: []string{
				`l4proto == "\x11" payload 2/2/2 == "\x005" imm 14e9 redir`,
				`l4proto == "\x06" payload 2/2/2 == "\x005" imm 14e9 redir`,
				`oifname == "lo" return`,
				`nfproto == "\x02" payload 1/16/1 == "\x7f" return`,
				`nfproto == "\n" payload 1/24/16 == ::1 return`,
				`nfproto == "\x02" payload 1/16/4 == 169.254.169.254 return`,
				`nfproto == "\n" payload 1/24/16 == fd00:ec2::254 return`,
				`l4proto == "\x06" payload 2/2/2 @proxy_ports imm 1f90 redir`,
			},
			sets: map[string][]string{setProxyPorts: {"0050/false", "01bb/false", "20fb/false"}}},
		{name: "allow-everything", allow: []string{"ALL_TRAFFIC", "169.254.0.0/16"},
			out: []string{ruleLo, ruleLo4, ruleLo6, ruleIMDS4, ruleIMDS6, ruleAllow4, ruleAllow6}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, f, fr := newTest(t)
			if err := r.Set(t.Context(), policy(t, tc.allow, tc.deny)); err != nil {
				t.Fatal(err)
			}
			if got := renderChain(f, chainOutput); !slices.Equal(got, []string{ruleJumpOut}) {
				t.Errorf("output = %q", got)
			}
			if got := renderChain(f, chainNATOutput); !slices.Equal(got, []string{ruleJumpNAT}) {
				t.Errorf("nat_output = %q", got)
			}
			if got := renderChain(f, chainReject); !slices.Equal(got, []string{`l4proto == "\x06" reject 1/0`, "reject 2/3"}) {
				t.Errorf("reject = %q", got)
			}
			if got := renderChain(f, chainSandboxOut); !slices.Equal(got, tc.out) {
				t.Errorf("sandbox_out =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tc.out, "\n"))
			}
			if got := renderChain(f, chainSandboxNAT); !slices.Equal(got, tc.nat) {
				t.Errorf("sandbox_nat =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tc.nat, "\n"))
			}
			for set, want := range tc.sets {
				if got := elemKeys(f.elems(set)); !slices.Equal(got, want) && !(len(got) == 0 && len(want) == 0) {
					t.Errorf("@%s = %q, want %q", set, got, want)
				}
			}
			if !r.IMDSBlocked() || len(fr.rules) != 2 {
				t.Errorf("IMDSBlocked = %v, %d ip rules", r.IMDSBlocked(), len(fr.rules))
			}
			// The IMDS reject comes before any accept but loopback.
			out := renderChain(f, chainSandboxOut)
			if i := slices.Index(out, ruleIMDS4); i < 0 || slices.ContainsFunc(out[:i], func(s string) bool {
				return strings.HasSuffix(s, "accept") && s != ruleLo && s != ruleLo4 && s != ruleLo6
			}) {
				t.Errorf("IMDS not rejected first: %q", out)
			}
		})
	}
}

func TestIntervalElems(t *testing.T) {
	ps := []netip.Prefix{
		netip.MustParsePrefix("10.0.0.0/9"), netip.MustParsePrefix("10.128.0.0/9"), // adjacent
		netip.MustParsePrefix("10.1.0.0/16"), // inside
		netip.MustParsePrefix("255.255.255.0/24"),
		netip.MustParsePrefix("2001:db8::/32"),
	}
	got := elemKeys(intervalElems(ps, true))
	want := []string{"0a000000/false", "0b000000/true", "ffffff00/false"}
	if !slices.Equal(got, want) {
		t.Errorf("v4 = %q, want %q", got, want)
	}
	if got := elemKeys(intervalElems(ps, false)); !slices.Equal(got, []string{"20010db8000000000000000000000000/false", "20010db9000000000000000000000000/true"}) {
		t.Errorf("v6 = %q", got)
	}
}

func TestSetTwiceSendsNothing(t *testing.T) {
	r, f, fr := newTest(t)
	p := policy(t, []string{"10.0.0.0/8"}, []string{"ALL_TRAFFIC"})
	if err := r.Set(t.Context(), p); err != nil {
		t.Fatal(err)
	}
	flushes, sent, adds := f.flushes, f.sent, fr.adds
	if flushes != 1 {
		t.Errorf("first Set: %d flushes, want 1", flushes)
	}
	if err := r.Set(t.Context(), policy(t, []string{"10.0.0.0/8"}, []string{"ALL_TRAFFIC"})); err != nil {
		t.Fatal(err)
	}
	if f.flushes != flushes || f.sent != sent || fr.adds != adds {
		t.Errorf("second Set sent something: flushes %d->%d, msgs %d->%d", flushes, f.flushes, sent, f.sent)
	}
	// Verify with nothing changed sends nothing either.
	if err := r.Verify(t.Context()); err != nil || f.flushes != flushes {
		t.Errorf("Verify: %v, %d flushes", err, f.flushes)
	}
}

func assertLockdown(t *testing.T, f *fakeNFT) {
	t.Helper()
	want := []string{ruleUDP53, ruleTCP53, ruleLo, ruleLo4, ruleLo6, ruleIMDS4, ruleIMDS6, "jump reject"}
	if got := renderChain(f, chainSandboxOut); !slices.Equal(got, want) {
		t.Errorf("not deny-all: sandbox_out =\n%s", strings.Join(got, "\n"))
	}
	if got := renderChain(f, chainSandboxNAT); len(got) != 0 {
		t.Errorf("deny-all has nat rules: %q", got)
	}
}

func TestFlushFailureInstallsDenyAll(t *testing.T) {
	r, f, _ := newTest(t)
	if err := r.Set(t.Context(), netpolicy.Policy{}); err != nil {
		t.Fatal(err)
	}
	f.failFlush = 1
	p := policy(t, []string{"api.example.com"}, nil)
	err := r.Set(t.Context(), p)
	if !errors.Is(err, ErrInstall) || !errors.Is(err, errFakeFlush) {
		t.Fatalf("Set = %v, want ErrInstall", err)
	}
	assertLockdown(t, f)
	if !r.IMDSBlocked() {
		t.Error("IMDS not blocked under deny-all")
	}
	// The same policy again is retried (it was never installed).
	if err := r.Set(t.Context(), p); err != nil {
		t.Fatal(err)
	}
	if len(renderChain(f, chainSandboxNAT)) == 0 {
		t.Error("retry did not install the policy")
	}
}

func TestHostsWithoutPortsFailClosed(t *testing.T) {
	f, fr := newFakeNFT(), &fakeRules{}
	r, err := New(Options{NFT: f, Rules: fr, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Set(t.Context(), policy(t, []string{"api.example.com"}, nil)); !errors.Is(err, ErrInstall) {
		t.Fatalf("Set = %v", err)
	}
	assertLockdown(t, f)
}

func TestVerifyMismatchInstallsDenyAll(t *testing.T) {
	r, f, _ := newTest(t)
	// Something removes a set element right after every transaction.
	f.afterFlush = func(rs *fakeRuleset) {
		if t := rs.tables[TableName]; t != nil && t.sets[setAllow4] != nil && len(t.sets[setAllow4].elems) > 0 {
			t.sets[setAllow4].elems = t.sets[setAllow4].elems[:1]
		}
	}
	err := r.Set(t.Context(), policy(t, []string{"10.0.0.0/8"}, []string{"ALL_TRAFFIC"}))
	if !errors.Is(err, ErrVerify) {
		t.Fatalf("Set = %v, want ErrVerify", err)
	}
	assertLockdown(t, f)
}

func TestVerifyRepairsDrift(t *testing.T) {
	r, f, fr := newTest(t)
	p := policy(t, []string{"10.0.0.0/8"}, []string{"ALL_TRAFFIC"})
	if err := r.Set(t.Context(), p); err != nil {
		t.Fatal(err)
	}
	want := renderChain(f, chainSandboxOut)
	// A foreign rule appears and an ip rule goes.
	f.mu.Lock()
	tb := f.state.tables[TableName]
	tb.rules[chainSandboxOut] = append([]*nftables.Rule{{Exprs: []expr.Any{&expr.Verdict{Kind: expr.VerdictAccept}}}}, tb.rules[chainSandboxOut]...)
	f.mu.Unlock()
	fr.rules = fr.rules[:1]
	if err := r.Verify(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := renderChain(f, chainSandboxOut); !slices.Equal(got, want) || len(fr.rules) != 2 || !r.IMDSBlocked() {
		t.Errorf("not repaired: %q, %d ip rules", got, len(fr.rules))
	}
	// The table vanishes entirely.
	f.mu.Lock()
	delete(f.state.tables, TableName)
	f.mu.Unlock()
	if err := r.Verify(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := renderChain(f, chainSandboxOut); !slices.Equal(got, want) {
		t.Errorf("not repaired: %q", got)
	}
}

func TestCloseIdempotent(t *testing.T) {
	r, f, fr := newTest(t)
	if err := r.Set(t.Context(), policy(t, nil, []string{"ALL_TRAFFIC"})); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := r.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if len(f.state.tables) != 0 || len(fr.rules) != 0 || r.IMDSBlocked() {
		t.Errorf("left behind: %d tables, %d ip rules", len(f.state.tables), len(fr.rules))
	}
}

func TestProbe(t *testing.T) {
	r, _, fr := newTest(t)
	if err := r.Probe(t.Context()); err != nil {
		t.Fatal(err)
	}
	fr.listErr = fmt.Errorf("netlink: %w", errEPERM)
	if err := r.Probe(t.Context()); !errors.Is(err, ErrNoCapability) {
		t.Errorf("Probe = %v", err)
	}
}

func TestNewRejectsUID0(t *testing.T) {
	if _, err := New(Options{UIDMin: 0, UIDMax: 10, NFT: newFakeNFT(), Rules: &fakeRules{}}); err == nil {
		t.Error("uid range with 0 accepted")
	}
}

// The first Set creates the table exclusively (no delete: cheaper for the
// kernel); when a table of that name exists already, the kernel refuses
// that transaction whole and the table is replaced, foreign content and
// all.
func TestFirstSetReplacesAStaleTable(t *testing.T) {
	r, f, _ := newTest(t)
	stale := &nftables.Table{Name: TableName, Family: nftables.TableFamilyINet}
	f.AddTable(stale)
	f.AddChain(&nftables.Chain{Name: "foreign", Table: stale})
	f.AddRule(&nftables.Rule{Table: stale, Chain: &nftables.Chain{Name: "foreign", Table: stale}})
	if err := f.Flush(); err != nil {
		t.Fatal(err)
	}
	flushes := f.flushes
	if err := r.Set(t.Context(), policy(t, []string{"10.0.0.0/8"}, []string{"ALL_TRAFFIC"})); err != nil {
		t.Fatal(err)
	}
	if n := f.flushes - flushes; n != 2 {
		t.Errorf("%d transactions, want 2 (the refused exclusive create, then the replace)", n)
	}
	if got := f.rules("foreign"); len(got) != 0 {
		t.Errorf("the stale table's rules survived: %d", len(got))
	}

	// A fresh namespace: one transaction.
	r2, f2, _ := newTest(t)
	if err := r2.Set(t.Context(), policy(t, []string{"10.0.0.0/8"}, []string{"ALL_TRAFFIC"})); err != nil {
		t.Fatal(err)
	}
	if f2.flushes != 1 {
		t.Errorf("fresh: %d transactions, want 1", f2.flushes)
	}
}

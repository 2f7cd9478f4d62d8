//go:build linux

package netcfg

import (
	"fmt"
	"hash/fnv"
	"net/netip"
	"slices"
	"strings"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"github.com/google/nftables/userdata"
	"golang.org/x/sys/unix"

	"github.com/rayito-dev/rayito/rayd/internal/netpolicy"
)

// TableName is the nftables table (family inet) the reconciler owns.
const TableName = "rayd_egress"

const (
	chainReject     = "reject"
	chainOutput     = "output"
	chainSandboxOut = "sandbox_out"
	chainNATOutput  = "nat_output"
	chainSandboxNAT = "sandbox_nat"

	setAllow4         = "allow4"
	setAllow6         = "allow6"
	setDeny4          = "deny4"
	setDeny6          = "deny6"
	setProxyPorts     = "proxy_ports"
	setInterceptPorts = "intercept_ports"

	commentPrefix = TableName + ":"
)

var (
	imds4 = netip.MustParseAddr("169.254.169.254")
	imds6 = netip.MustParseAddr("fd00:ec2::254")
)

// state is a complete desired table: what one transaction installs and
// what verification expects to read back.
type state struct {
	table  *nftables.Table
	chains []*nftables.Chain // in creation order
	sets   []setSpec
	rules  []*nftables.Rule // in order; each names its chain
	tag    string           // the rules' comment
}

type setSpec struct {
	set   *nftables.Set
	elems []nftables.SetElement
}

// rulesOf returns the rules of chain name, in order.
func (s *state) rulesOf(name string) []*nftables.Rule {
	var out []*nftables.Rule
	for _, r := range s.rules {
		if r.Chain.Name == name {
			out = append(out, r)
		}
	}
	return out
}

// builder accumulates a state.
type builder struct {
	s      *state
	chains map[string]*nftables.Chain
	sets   map[string]*nftables.Set
}

func newBuilder() *builder {
	t := &nftables.Table{Name: TableName, Family: nftables.TableFamilyINet}
	return &builder{s: &state{table: t}, chains: map[string]*nftables.Chain{}, sets: map[string]*nftables.Set{}}
}

func (b *builder) chain(c *nftables.Chain) {
	c.Table = b.s.table
	b.s.chains = append(b.s.chains, c)
	b.chains[c.Name] = c
}

func (b *builder) set(name string, kt nftables.SetDatatype, interval bool, elems []nftables.SetElement) {
	s := &nftables.Set{Table: b.s.table, Name: name, ID: uint32(len(b.s.sets) + 1), KeyType: kt, Interval: interval}
	b.s.sets = append(b.s.sets, setSpec{set: s, elems: elems})
	b.sets[name] = s
}

func (b *builder) rule(chain string, parts ...[]expr.Any) {
	var ex []expr.Any
	for _, p := range parts {
		ex = append(ex, p...)
	}
	b.s.rules = append(b.s.rules, &nftables.Rule{Table: b.s.table, Chain: b.chains[chain], Exprs: ex})
}

// finish tags every rule with a digest of the whole state.
func (b *builder) finish() *state {
	h := fnv.New64a()
	for _, c := range b.s.chains {
		fmt.Fprintf(h, "c %s\n", c.Name)
	}
	for _, s := range b.s.sets {
		fmt.Fprintf(h, "s %s %d\n", s.set.Name, len(s.elems))
		for _, e := range s.elems {
			fmt.Fprintf(h, "%x %v\n", e.Key, e.IntervalEnd)
		}
	}
	for _, r := range b.s.rules {
		fmt.Fprintf(h, "r %s %d", r.Chain.Name, len(r.Exprs))
		for _, e := range r.Exprs {
			fmt.Fprintf(h, " %T%+v", e, e)
		}
		fmt.Fprintln(h)
	}
	b.s.tag = fmt.Sprintf("%s%016x", commentPrefix, h.Sum64())
	ud := userdata.AppendString(nil, userdata.TypeComment, b.s.tag)
	for _, r := range b.s.rules {
		r.UserData = ud
	}
	return b.s
}

// Expression helpers.

func verdict(k expr.VerdictKind) []expr.Any { return []expr.Any{&expr.Verdict{Kind: k}} }

func jump(chain string) []expr.Any {
	return []expr.Any{&expr.Verdict{Kind: expr.VerdictJump, Chain: chain}}
}

// skuidIn matches sockets of uids lo..hi. meta skuid is in host byte
// order and range compares bytes, so the uid is converted to big endian
// first (as nft does).
func skuidIn(lo, hi uint32) []expr.Any {
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeySKUID, Register: 1},
		&expr.Byteorder{SourceRegister: 1, DestRegister: 1, Op: expr.ByteorderHton, Len: 4, Size: 4},
		&expr.Range{Op: expr.CmpOpEq, Register: 1, FromData: binaryutil.BigEndian.PutUint32(lo), ToData: binaryutil.BigEndian.PutUint32(hi)},
	}
}

func oifLo() []expr.Any {
	name := make([]byte, unix.IFNAMSIZ)
	copy(name, "lo")
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyOIFNAME, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: name},
	}
}

// loopback accepts loopback traffic: by output interface, and by
// destination address, because a packet redirected to 127.0.0.1 or ::1 by
// the nat hook is rerouted through lo but the later filter hook still
// sees the interface it was first routed to.
func (b *builder) loopback(chain string, v []expr.Any) {
	b.rule(chain, oifLo(), v)
	b.rule(chain, []expr.Any{
		&expr.Meta{Key: expr.MetaKeyNFPROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{unix.NFPROTO_IPV4}},
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 16, Len: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{127}},
	}, v)
	b.rule(chain, daddrIs(netip.IPv6Loopback()), v)
}

func l4proto(proto byte) []expr.Any {
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{proto}},
	}
}

func dport() []expr.Any {
	return []expr.Any{&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2}}
}

func dportIs(port uint16) []expr.Any {
	return append(dport(), &expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binaryutil.BigEndian.PutUint16(port)})
}

// daddr loads the IPv4 or IPv6 destination address into register 1, after
// checking the family.
func daddr(v4 bool) []expr.Any {
	if v4 {
		return []expr.Any{
			&expr.Meta{Key: expr.MetaKeyNFPROTO, Register: 1},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{unix.NFPROTO_IPV4}},
			&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 16, Len: 4},
		}
	}
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyNFPROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{unix.NFPROTO_IPV6}},
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 24, Len: 16},
	}
}

func daddrIs(a netip.Addr) []expr.Any {
	return append(daddr(a.Is4()), &expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: a.AsSlice()})
}

func lookup(s *nftables.Set) []expr.Any {
	return []expr.Any{&expr.Lookup{SourceRegister: 1, SetName: s.Name, SetID: s.ID}}
}

func redirectTo(port uint16) []expr.Any {
	return []expr.Any{
		&expr.Immediate{Register: 1, Data: binaryutil.BigEndian.PutUint16(port)},
		&expr.Redir{RegisterProtoMin: 1, Flags: unix.NF_NAT_RANGE_PROTO_SPECIFIED},
	}
}

// intervalElems encodes the prefixes of one family as the elements of an
// interval set: the prefixes merged into disjoint, non-adjacent ranges,
// each a start element and an end element at last+1 (omitted when the
// range reaches the end of the address space).
func intervalElems(ps []netip.Prefix, v4 bool) []nftables.SetElement {
	type rng struct{ first, last netip.Addr }
	var rs []rng
	for _, p := range ps {
		if p.Addr().Is4() != v4 {
			continue
		}
		rs = append(rs, rng{p.Masked().Addr(), lastAddr(p)})
	}
	slices.SortFunc(rs, func(a, b rng) int { return a.first.Compare(b.first) })
	var merged []rng
	for _, r := range rs {
		if n := len(merged); n > 0 {
			m := &merged[n-1]
			next := m.last.Next()
			if !next.IsValid() || !next.Less(r.first) { // overlapping or adjacent
				if m.last.Less(r.last) {
					m.last = r.last
				}
				continue
			}
		}
		merged = append(merged, r)
	}
	var out []nftables.SetElement
	for _, r := range merged {
		out = append(out, nftables.SetElement{Key: r.first.AsSlice()})
		if end := r.last.Next(); end.IsValid() {
			out = append(out, nftables.SetElement{Key: end.AsSlice(), IntervalEnd: true})
		}
	}
	return out
}

func lastAddr(p netip.Prefix) netip.Addr {
	p = p.Masked()
	b := p.Addr().As16()
	off := 0
	if p.Addr().Is4() {
		off = 96
	}
	for i := off + p.Bits(); i < 128; i++ {
		b[i/8] |= 0x80 >> (i % 8)
	}
	a := netip.AddrFrom16(b)
	if p.Addr().Is4() {
		return a.Unmap()
	}
	return a
}

func portElems(ports []uint16) []nftables.SetElement {
	var out []nftables.SetElement
	for _, p := range ports {
		out = append(out, nftables.SetElement{Key: binaryutil.BigEndian.PutUint16(p)})
	}
	return out
}

// common adds the chains and sets every state has, and the base chains'
// uid match.
func (b *builder) common(o *Options, allow, deny []netip.Prefix, ports []uint16) {
	accept := nftables.ChainPolicyAccept
	b.chain(&nftables.Chain{Name: chainReject})
	b.chain(&nftables.Chain{Name: chainSandboxOut})
	b.chain(&nftables.Chain{Name: chainSandboxNAT})
	b.chain(&nftables.Chain{Name: chainOutput, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookOutput, Priority: nftables.ChainPriorityFilter, Policy: &accept})
	b.chain(&nftables.Chain{Name: chainNATOutput, Type: nftables.ChainTypeNAT,
		Hooknum: nftables.ChainHookOutput, Priority: nftables.ChainPriorityNATDest, Policy: &accept})
	b.set(setAllow4, nftables.TypeIPAddr, true, intervalElems(allow, true))
	b.set(setAllow6, nftables.TypeIP6Addr, true, intervalElems(allow, false))
	b.set(setDeny4, nftables.TypeIPAddr, true, intervalElems(deny, true))
	b.set(setDeny6, nftables.TypeIP6Addr, true, intervalElems(deny, false))
	b.set(setProxyPorts, nftables.TypeInetService, false, portElems(ports))

	b.rule(chainReject, l4proto(unix.IPPROTO_TCP), []expr.Any{&expr.Reject{Type: unix.NFT_REJECT_TCP_RST}})
	b.rule(chainReject, []expr.Any{&expr.Reject{Type: unix.NFT_REJECT_ICMPX_UNREACH, Code: unix.NFT_REJECT_ICMPX_ADMIN_PROHIBITED}})
	b.rule(chainOutput, skuidIn(o.UIDMin, o.UIDMax), jump(chainSandboxOut))
	b.rule(chainNATOutput, skuidIn(o.UIDMin, o.UIDMax), jump(chainSandboxNAT))
}

func (b *builder) rejectDNS() {
	b.rule(chainSandboxOut, l4proto(unix.IPPROTO_UDP), dportIs(53), jump(chainReject))
	b.rule(chainSandboxOut, l4proto(unix.IPPROTO_TCP), dportIs(53), jump(chainReject))
}

func (b *builder) imds(chain string, v []expr.Any) {
	b.rule(chain, daddrIs(imds4), v)
	b.rule(chain, daddrIs(imds6), v)
}

// buildPolicy returns the state that enforces p.
func buildPolicy(o *Options, p netpolicy.Policy) (*state, error) {
	hosts := len(p.Hosts()) > 0
	intercept := p.InterceptPorts()
	if (hosts || len(intercept) > 0) && (o.ProxyPort == 0 || o.DNSPort == 0) {
		return nil, fmt.Errorf("netcfg: the policy has host rules but ProxyPort or DNSPort is not set")
	}
	// DNS goes to the forwarder when names decide: with host rules, and
	// under deny-all when placeholders name hosts (otherwise names resolve
	// as they did, directly).
	forwardDNS := hosts || (len(intercept) > 0 && p.DenyAll())
	allow, deny := p.AllowCIDRs(), p.DenyCIDRs()
	b := newBuilder()
	b.common(o, allow, deny, p.HostPorts())
	b.set(setInterceptPorts, nftables.TypeInetService, false, portElems(intercept))

	if p.DenyAll() && !forwardDNS {
		b.rejectDNS()
	}
	b.loopback(chainSandboxOut, verdict(expr.VerdictAccept))
	b.imds(chainSandboxOut, jump(chainReject))
	if !p.Unrestricted() {
		for _, x := range []struct {
			set string
			v4  bool
			v   []expr.Any
		}{
			{setAllow4, true, verdict(expr.VerdictAccept)},
			{setAllow6, false, verdict(expr.VerdictAccept)},
			{setDeny4, true, jump(chainReject)},
			{setDeny6, false, jump(chainReject)},
		} {
			if s := b.sets[x.set]; len(b.s.sets[s.ID-1].elems) > 0 {
				b.rule(chainSandboxOut, daddr(x.v4), lookup(s), x.v)
			}
		}
	}
	if forwardDNS {
		b.rule(chainSandboxNAT, l4proto(unix.IPPROTO_UDP), dportIs(53), redirectTo(o.DNSPort))
		b.rule(chainSandboxNAT, l4proto(unix.IPPROTO_TCP), dportIs(53), redirectTo(o.DNSPort))
	}
	if hosts || len(intercept) > 0 {
		b.loopback(chainSandboxNAT, verdict(expr.VerdictReturn))
		b.imds(chainSandboxNAT, verdict(expr.VerdictReturn))
	}
	if len(intercept) > 0 {
		b.rule(chainSandboxNAT, l4proto(unix.IPPROTO_TCP), dport(), lookup(b.sets[setInterceptPorts]), redirectTo(o.ProxyPort))
	}
	if hosts {
		for _, x := range []struct {
			set string
			v4  bool
		}{{setAllow4, true}, {setAllow6, false}} {
			if s := b.sets[x.set]; len(b.s.sets[s.ID-1].elems) > 0 {
				b.rule(chainSandboxNAT, daddr(x.v4), lookup(s), verdict(expr.VerdictReturn))
			}
		}
		b.rule(chainSandboxNAT, l4proto(unix.IPPROTO_TCP), dport(), lookup(b.sets[setProxyPorts]), redirectTo(o.ProxyPort))
	}
	return b.finish(), nil
}

// buildLockdown returns the deny-all state installed after a failure:
// everything from the sandbox uids is rejected except loopback (DNS
// included, even on loopback).
func buildLockdown(o *Options) *state {
	b := newBuilder()
	b.common(o, nil, nil, nil)
	b.rejectDNS()
	b.loopback(chainSandboxOut, verdict(expr.VerdictAccept))
	b.imds(chainSandboxOut, jump(chainReject))
	b.rule(chainSandboxOut, jump(chainReject))
	return b.finish()
}

// elemKey identifies a set element for comparison.
func elemKey(e nftables.SetElement) string {
	return fmt.Sprintf("%x/%v", e.Key, e.IntervalEnd)
}

func elemKeys(es []nftables.SetElement) []string {
	out := make([]string, 0, len(es))
	for _, e := range es {
		out = append(out, elemKey(e))
	}
	slices.Sort(out)
	return out
}

func ruleComment(r *nftables.Rule) string {
	s, _ := userdata.GetString(r.UserData, userdata.TypeComment)
	return s
}

// describe summarizes a state for debug logs (no addresses).
func (s *state) describe() string {
	var sb strings.Builder
	for _, c := range s.chains {
		fmt.Fprintf(&sb, "%s=%d ", c.Name, len(s.rulesOf(c.Name)))
	}
	for _, st := range s.sets {
		fmt.Fprintf(&sb, "@%s=%d ", st.set.Name, len(st.elems))
	}
	return strings.TrimSpace(sb.String())
}

//go:build linux

package hostnet

import (
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// fakeNFT is an in-memory nftables table set: calls are queued and Flush
// applies them all or nothing, like the kernel's batch. calls records every
// call, in order.
type fakeNFT struct {
	mu     sync.Mutex
	queue  []func(*fakeRuleset) error
	state  *fakeRuleset
	calls  []string
	handle uint64
}

type fakeRuleset struct {
	tables map[string]*fakeTable
}

type fakeTable struct {
	chains []*nftables.Chain
	rules  map[string][]*nftables.Rule
}

var _ NFT = (*fakeNFT)(nil)

func newFakeNFT() *fakeNFT { return &fakeNFT{state: &fakeRuleset{tables: map[string]*fakeTable{}}} }

func (rs *fakeRuleset) clone() *fakeRuleset {
	out := &fakeRuleset{tables: map[string]*fakeTable{}}
	for k, t := range rs.tables {
		nt := &fakeTable{chains: slices.Clone(t.chains), rules: map[string][]*nftables.Rule{}}
		for c, r := range t.rules {
			nt.rules[c] = slices.Clone(r)
		}
		out.tables[k] = nt
	}
	return out
}

func (f *fakeNFT) record(call string, op func(*fakeRuleset) error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, call)
	if op != nil {
		f.queue = append(f.queue, op)
	}
}

// takeCalls returns the calls recorded since the last takeCalls.
func (f *fakeNFT) takeCalls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := f.calls
	f.calls = nil
	return c
}

func (rs *fakeRuleset) table(name string) (*fakeTable, error) {
	if t := rs.tables[name]; t != nil {
		return t, nil
	}
	return nil, unix.ENOENT
}

func (t *fakeTable) hasChain(name string) bool {
	return slices.ContainsFunc(t.chains, func(c *nftables.Chain) bool { return c.Name == name })
}

func (f *fakeNFT) AddTable(t *nftables.Table) *nftables.Table {
	f.record("AddTable "+t.Name, func(rs *fakeRuleset) error {
		if rs.tables[t.Name] == nil {
			rs.tables[t.Name] = &fakeTable{rules: map[string][]*nftables.Rule{}}
		}
		return nil
	})
	return t
}

func (f *fakeNFT) DelTable(t *nftables.Table) {
	f.record("DelTable "+t.Name, func(rs *fakeRuleset) error {
		if rs.tables[t.Name] == nil {
			return unix.ENOENT
		}
		delete(rs.tables, t.Name)
		return nil
	})
}

func (f *fakeNFT) AddChain(c *nftables.Chain) *nftables.Chain {
	f.record("AddChain "+c.Name, func(rs *fakeRuleset) error {
		t, err := rs.table(c.Table.Name)
		if err != nil {
			return err
		}
		if !t.hasChain(c.Name) {
			t.chains = append(t.chains, c)
		}
		return nil
	})
	return c
}

func (f *fakeNFT) FlushChain(c *nftables.Chain) {
	f.record("FlushChain "+c.Name, func(rs *fakeRuleset) error {
		t, err := rs.table(c.Table.Name)
		if err != nil || !t.hasChain(c.Name) {
			return unix.ENOENT
		}
		delete(t.rules, c.Name)
		return nil
	})
}

func (f *fakeNFT) AddRule(r *nftables.Rule) *nftables.Rule {
	f.record("AddRule "+r.Chain.Name, func(rs *fakeRuleset) error {
		t, err := rs.table(r.Table.Name)
		if err != nil || !t.hasChain(r.Chain.Name) {
			return unix.ENOENT
		}
		f.handle++
		nr := *r
		nr.Handle = f.handle
		t.rules[r.Chain.Name] = append(t.rules[r.Chain.Name], &nr)
		return nil
	})
	return r
}

func (f *fakeNFT) DelRule(r *nftables.Rule) error {
	if r.Handle == 0 {
		return fmt.Errorf("fake: DelRule without a handle")
	}
	f.record(fmt.Sprintf("DelRule %s %d", r.Chain.Name, r.Handle), func(rs *fakeRuleset) error {
		t, err := rs.table(r.Table.Name)
		if err != nil {
			return err
		}
		rules := t.rules[r.Chain.Name]
		i := slices.IndexFunc(rules, func(x *nftables.Rule) bool { return x.Handle == r.Handle })
		if i < 0 {
			return unix.ENOENT
		}
		t.rules[r.Chain.Name] = slices.Delete(rules, i, i+1)
		return nil
	})
	return nil
}

func (f *fakeNFT) Flush() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, "Flush")
	q := f.queue
	f.queue = nil
	next := f.state.clone()
	for i, op := range q {
		if err := op(next); err != nil {
			return fmt.Errorf("fake: message %d: %w", i, err)
		}
	}
	f.state = next
	return nil
}

func (f *fakeNFT) ListTablesOfFamily(nftables.TableFamily) ([]*nftables.Table, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, "ListTables")
	var out []*nftables.Table
	for name := range f.state.tables {
		out = append(out, &nftables.Table{Name: name, Family: nftables.TableFamilyINet})
	}
	return out, nil
}

func (f *fakeNFT) ListChainsOfTableFamily(nftables.TableFamily) ([]*nftables.Chain, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, "ListChains")
	var out []*nftables.Chain
	for _, t := range f.state.tables {
		out = append(out, t.chains...)
	}
	return out, nil
}

func (f *fakeNFT) GetRules(t *nftables.Table, c *nftables.Chain) ([]*nftables.Rule, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, "GetRules "+c.Name)
	ft, err := f.state.table(t.Name)
	if err != nil {
		return nil, err
	}
	if !ft.hasChain(c.Name) {
		return nil, unix.ENOENT
	}
	var out []*nftables.Rule
	for _, r := range ft.rules[c.Name] {
		nr := *r
		nr.Chain = &nftables.Chain{Name: c.Name, Table: t}
		out = append(out, &nr)
	}
	return out, nil
}

// rules returns the rules of a chain, rendered, with their comments.
func (f *fakeNFT) rules(table, chain string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	t := f.state.tables[table]
	if t == nil {
		return nil
	}
	var out []string
	for _, r := range t.rules[chain] {
		out = append(out, render(r.Exprs)+"  comment "+fmt.Sprintf("%q", ruleComment(r)))
	}
	return out
}

// render writes the expressions the firewall builds in nft's syntax ("?"
// for anything else), to compare rules with what they should say.
func render(es []expr.Any) string {
	var out []string
	for i := 0; i < len(es); i++ {
		next := func() expr.Any {
			if i+1 < len(es) {
				i++
				return es[i]
			}
			return nil
		}
		switch e := es[i].(type) {
		case *expr.Meta:
			cmp, ok := next().(*expr.Cmp)
			if !ok || cmp.Op != expr.CmpOpEq || e.Register != 1 || cmp.Register != 1 {
				out = append(out, "?meta")
				continue
			}
			switch e.Key {
			case expr.MetaKeyIIFNAME, expr.MetaKeyOIFNAME:
				kw := map[expr.MetaKey]string{expr.MetaKeyIIFNAME: "iifname", expr.MetaKeyOIFNAME: "oifname"}[e.Key]
				name := strings.TrimRight(string(cmp.Data), "\x00")
				if len(cmp.Data) < unix.IFNAMSIZ {
					name += "*"
				} else if len(cmp.Data) != unix.IFNAMSIZ {
					name = "?"
				}
				out = append(out, fmt.Sprintf("%s %q", kw, name))
			case expr.MetaKeyNFPROTO:
				if !slices.Equal(cmp.Data, []byte{unix.NFPROTO_IPV4}) {
					out = append(out, "?nfproto")
					continue
				}
				out = append(out, "ip")
			default:
				out = append(out, "?meta")
			}
		case *expr.Ct:
			bw, ok1 := next().(*expr.Bitwise)
			cmp, ok2 := next().(*expr.Cmp)
			want := binaryutil.NativeEndian.PutUint32(expr.CtStateBitESTABLISHED | expr.CtStateBitRELATED)
			if e.Key != expr.CtKeySTATE || !ok1 || !ok2 || !slices.Equal(bw.Mask, want) || bw.Len != 4 ||
				cmp.Op != expr.CmpOpNeq || !slices.Equal(cmp.Data, []byte{0, 0, 0, 0}) {
				out = append(out, "?ct")
				continue
			}
			out = append(out, "ct state established,related")
		case *expr.Payload:
			kw := map[uint32]string{12: "saddr", 16: "daddr"}[e.Offset]
			if e.Base != expr.PayloadBaseNetworkHeader || e.Len != 4 || kw == "" {
				out = append(out, "?payload")
				continue
			}
			bits := 32
			n := next()
			if bw, ok := n.(*expr.Bitwise); ok {
				ones, _ := net.IPMask(bw.Mask).Size()
				bits = ones
				n = next()
			}
			cmp, ok := n.(*expr.Cmp)
			if !ok || cmp.Op != expr.CmpOpEq || len(cmp.Data) != 4 {
				out = append(out, "?payload")
				continue
			}
			out = append(out, fmt.Sprintf("%s %s", kw, netip.PrefixFrom(netip.AddrFrom4([4]byte(cmp.Data)), bits)))
		case *expr.Verdict:
			switch e.Kind {
			case expr.VerdictAccept:
				out = append(out, "accept")
			case expr.VerdictDrop:
				out = append(out, "drop")
			case expr.VerdictJump:
				out = append(out, "jump "+e.Chain)
			default:
				out = append(out, "?verdict")
			}
		case *expr.Masq:
			out = append(out, "masquerade")
		default:
			out = append(out, fmt.Sprintf("?%T", e))
		}
	}
	return strings.Join(out, " ")
}

// fakeClock is a settable time.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// fakeNetlink is a network namespace: links by name, and the calls made.
type fakeNetlink struct {
	name  string // "host" or "ns", in calls
	links map[string]netlink.Link
	calls *[]string // shared by the namespaces of one test
	// fail makes the call with this name fail.
	fail string
	// peer gets the peer links of the veths LinkAdd creates.
	peer *fakeNetlink
}

var _ Netlink = (*fakeNetlink)(nil)

var errFakeNetlink = fmt.Errorf("fake: netlink call failed")

func (f *fakeNetlink) rec(op string, format string, args ...any) error {
	*f.calls = append(*f.calls, f.name+": "+op+" "+fmt.Sprintf(format, args...))
	if f.fail == op {
		return errFakeNetlink
	}
	return nil
}

func (f *fakeNetlink) addLink(name string) netlink.Link {
	la := netlink.NewLinkAttrs()
	la.Name = name
	la.Index = len(f.links) + 1
	l := &netlink.Dummy{LinkAttrs: la}
	f.links[name] = l
	return l
}

func (f *fakeNetlink) LinkAdd(l netlink.Link) error {
	v, ok := l.(*netlink.Veth)
	if !ok {
		return f.rec("LinkAdd", "%T", l)
	}
	if err := f.rec("LinkAdd", "veth %s peer %s in %v", v.Name, v.PeerName, v.PeerNamespace); err != nil {
		return err
	}
	f.addLink(v.Name)
	if f.peer != nil {
		f.peer.addLink(v.PeerName)
	}
	return nil
}

func (f *fakeNetlink) LinkByName(name string) (netlink.Link, error) {
	if err := f.rec("LinkByName", "%s", name); err != nil {
		return nil, err
	}
	if l := f.links[name]; l != nil {
		return l, nil
	}
	return nil, netlink.LinkNotFoundError{}
}

func (f *fakeNetlink) LinkSetUp(l netlink.Link) error {
	return f.rec("LinkSetUp", "%s", l.Attrs().Name)
}

func (f *fakeNetlink) LinkDel(l netlink.Link) error {
	if err := f.rec("LinkDel", "%s", l.Attrs().Name); err != nil {
		return err
	}
	delete(f.links, l.Attrs().Name)
	return nil
}

func (f *fakeNetlink) LinkList() ([]netlink.Link, error) {
	if err := f.rec("LinkList", ""); err != nil {
		return nil, err
	}
	var out []netlink.Link
	for _, l := range f.links {
		out = append(out, l)
	}
	return out, nil
}

func (f *fakeNetlink) AddrAdd(l netlink.Link, a *netlink.Addr) error {
	return f.rec("AddrAdd", "%s %s", l.Attrs().Name, a.IPNet)
}

func (f *fakeNetlink) AddrList(l netlink.Link, family int) ([]netlink.Addr, error) {
	if err := f.rec("AddrList", "%v %d", l, family); err != nil {
		return nil, err
	}
	return nil, nil
}

func (f *fakeNetlink) RouteAdd(r *netlink.Route) error {
	return f.rec("RouteAdd", "index %d via %s dst %v", r.LinkIndex, r.Gw, r.Dst)
}

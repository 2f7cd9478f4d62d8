//go:build linux

package netcfg

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"slices"
	"sync"

	"github.com/google/nftables"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/rayito-dev/rayito/rayd/internal/netpolicy"
)

// Errors wrapped by the reconciler's errors.
var (
	// ErrInstall: the policy could not be installed; deny-all was
	// installed instead (or attempted: see the joined error).
	ErrInstall = errors.New("netcfg: egress policy install failed")
	// ErrVerify: the policy was sent but reading it back did not match;
	// deny-all was installed instead.
	ErrVerify = errors.New("netcfg: egress policy verification failed")
	// ErrNoCapability: rayd cannot program the network (no CAP_NET_ADMIN
	// in its network namespace).
	ErrNoCapability = errors.New("netcfg: cannot program the network (CAP_NET_ADMIN)")
)

// RulePriority is the priority of the IMDS policy routing rules.
const RulePriority = 50

// NFT is the part of *nftables.Conn the reconciler uses.
type NFT interface {
	AddTable(*nftables.Table) *nftables.Table
	CreateTable(*nftables.Table) *nftables.Table
	DelTable(*nftables.Table)
	AddChain(*nftables.Chain) *nftables.Chain
	AddSet(*nftables.Set, []nftables.SetElement) error
	AddRule(*nftables.Rule) *nftables.Rule
	Flush() error
	ListTablesOfFamily(nftables.TableFamily) ([]*nftables.Table, error)
	ListChainsOfTableFamily(nftables.TableFamily) ([]*nftables.Chain, error)
	GetRules(*nftables.Table, *nftables.Chain) ([]*nftables.Rule, error)
	GetSets(*nftables.Table) ([]*nftables.Set, error)
	GetSetElements(*nftables.Set) ([]nftables.SetElement, error)
}

// RuleConn lists, adds and deletes policy routing rules (*netlink.Handle
// implements it).
type RuleConn interface {
	RuleList(family int) ([]netlink.Rule, error)
	RuleAdd(*netlink.Rule) error
	RuleDel(*netlink.Rule) error
}

// Options configure a Reconciler.
type Options struct {
	// UIDMin and UIDMax bound the uids whose sockets are filtered
	// (default 1000 and 65535). rayd (root) is never filtered.
	UIDMin, UIDMax uint32
	// ProxyPort and DNSPort are rayd's egress proxy and DNS forwarder on
	// 127.0.0.1 (and ::1). A policy with host rules needs both.
	ProxyPort, DNSPort uint16
	// NFT defaults to a non-lasting *nftables.Conn in rayd's network
	// namespace: each operation opens its own netlink socket, so a failed
	// or interrupted operation leaves no stale replies for the next one,
	// and the cost (a socket per Set, which is rare) does not matter.
	NFT NFT
	// Rules defaults to a *netlink.Handle on rayd's network namespace.
	Rules RuleConn
	// Logger defaults to slog.Default(). The reconciler logs counts,
	// never the policy's addresses or names.
	Logger *slog.Logger
}

// Reconciler makes the kernel's egress rules match a policy. Its methods
// are safe for concurrent use.
type Reconciler struct {
	opts  Options
	nft   NFT
	rules RuleConn
	log   *slog.Logger

	mu        sync.Mutex
	policy    netpolicy.Policy // last installed (valid when installed)
	installed bool             // policy is in place and verified
	lockdown  bool             // deny-all after a failure is in place
	want      *state           // what was last installed (policy or lockdown)
	imds      bool             // IMDSBlocked
}

// New returns a Reconciler. It changes nothing until Set.
func New(opts Options) (*Reconciler, error) {
	if opts.UIDMin == 0 && opts.UIDMax == 0 {
		opts.UIDMin, opts.UIDMax = 1000, 65535
	}
	if opts.UIDMin == 0 || opts.UIDMin > opts.UIDMax {
		return nil, fmt.Errorf("netcfg: invalid uid range %d-%d (uid 0 is never filtered)", opts.UIDMin, opts.UIDMax)
	}
	if opts.NFT == nil {
		c, err := nftables.New()
		if err != nil {
			return nil, fmt.Errorf("netcfg: nftables: %w", err)
		}
		opts.NFT = c
	}
	if opts.Rules == nil {
		opts.Rules = &netlink.Handle{} // a socket per request, in rayd's namespace
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	return &Reconciler{opts: opts, nft: opts.NFT, rules: opts.Rules, log: opts.Logger}, nil
}

// Set makes the installed rules enforce p. On failure deny-all is in
// place and the error wraps ErrInstall or ErrVerify.
func (r *Reconciler) Set(ctx context.Context, p netpolicy.Policy) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.installed && r.policy.Equal(p) {
		return nil
	}
	return r.apply(p)
}

// apply installs p and verifies it, or installs deny-all. r.mu is held.
func (r *Reconciler) apply(p netpolicy.Policy) error {
	s, err := buildPolicy(&r.opts, p)
	if err != nil {
		return r.fail(ErrInstall, err)
	}
	if err := r.install(s); err != nil {
		return r.fail(ErrInstall, err)
	}
	if err := r.ensureIPRules(); err != nil {
		return r.fail(ErrInstall, err)
	}
	if err := r.check(s); err != nil {
		return r.fail(ErrVerify, err)
	}
	r.policy, r.installed, r.lockdown, r.want, r.imds = p, true, false, s, true
	r.log.Info("egress policy installed",
		"allow_cidrs", len(p.AllowCIDRs()), "deny_cidrs", len(p.DenyCIDRs()), "hosts", len(p.Hosts()),
		"unrestricted", p.Unrestricted(), "deny_all", p.DenyAll())
	r.log.Debug("egress table", "shape", s.describe())
	return nil
}

// fail installs deny-all after cause and returns the error to report.
func (r *Reconciler) fail(kind, cause error) error {
	r.installed, r.policy = false, netpolicy.Policy{}
	r.log.Warn("egress policy failed, installing deny-all", "err", cause)
	err := fmt.Errorf("%w: %w", kind, cause)
	ld := buildLockdown(&r.opts)
	r.want, r.lockdown = ld, true
	ierr := r.install(ld)
	if ierr == nil {
		// The table only: the ip rules are added and checked below (on
		// a first Set they do not exist yet).
		ierr = r.checkTable(ld)
	}
	rerr := r.ensureIPRules()
	if rerr == nil {
		rerr = r.checkIPRules()
	}
	r.imds = ierr == nil && rerr == nil
	if ierr != nil {
		r.log.Error("deny-all install failed", "err", ierr)
		return errors.Join(err, fmt.Errorf("netcfg: deny-all: %w", ierr))
	}
	return err
}

// install sends s in one transaction: the table is created if missing,
// deleted and created again with all of s, so that the kernel swaps the
// old table for the new one atomically.
//
// Before the first install (the boot policy, which /run waits for) the
// table does not exist, and a transaction that deletes a table costs the
// kernel a grace period: 5–20 ms here against under 1 ms without it. So
// the first install creates the table exclusively instead (`nft create`):
// should the table exist after all, the kernel refuses that whole
// transaction, and install sends the replacing one as always.
func (r *Reconciler) install(s *state) error {
	if r.want == nil {
		if err := r.send(s, false); err == nil {
			return nil
		}
	}
	return r.send(s, true)
}

// send queues s and flushes: replacing the table (replace), or creating it
// exclusively, which fails when it exists.
func (r *Reconciler) send(s *state, replace bool) error {
	n := r.nft
	if replace {
		n.AddTable(s.table)
		n.DelTable(s.table)
		n.AddTable(s.table)
	} else {
		n.CreateTable(s.table)
	}
	for _, c := range s.chains {
		n.AddChain(c)
	}
	for _, st := range s.sets {
		if err := n.AddSet(st.set, st.elems); err != nil {
			// The queued messages go out with the next Flush; as that
			// batch starts by deleting the table again, the outcome is
			// still exactly the next state.
			return fmt.Errorf("netcfg: set %s: %w", st.set.Name, err)
		}
	}
	for _, rule := range s.rules {
		n.AddRule(rule)
	}
	if err := n.Flush(); err != nil {
		return fmt.Errorf("netcfg: nftables transaction: %w", err)
	}
	return nil
}

// check reads the table back and compares it with s.
func (r *Reconciler) check(s *state) error {
	if err := r.checkTable(s); err != nil {
		return err
	}
	return r.checkIPRules()
}

func (r *Reconciler) checkTable(s *state) error {
	n := r.nft
	tables, err := n.ListTablesOfFamily(nftables.TableFamilyINet)
	if err != nil {
		return fmt.Errorf("netcfg: list tables: %w", err)
	}
	if !slices.ContainsFunc(tables, func(t *nftables.Table) bool { return t.Name == TableName }) {
		return errors.New("netcfg: table missing")
	}
	chains, err := n.ListChainsOfTableFamily(nftables.TableFamilyINet)
	if err != nil {
		return fmt.Errorf("netcfg: list chains: %w", err)
	}
	var got []string
	for _, c := range chains {
		if c.Table != nil && c.Table.Name == TableName {
			got = append(got, chainSig(c))
		}
	}
	var want []string
	for _, c := range s.chains {
		want = append(want, chainSig(c))
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		return fmt.Errorf("netcfg: chains differ: have %v, want %v", got, want)
	}
	for _, c := range s.chains {
		rules, err := n.GetRules(s.table, c)
		if err != nil {
			return fmt.Errorf("netcfg: rules of %s: %w", c.Name, err)
		}
		if w := len(s.rulesOf(c.Name)); len(rules) != w {
			return fmt.Errorf("netcfg: chain %s has %d rules, want %d", c.Name, len(rules), w)
		}
		for _, rule := range rules {
			if ruleComment(rule) != s.tag {
				return fmt.Errorf("netcfg: chain %s has a foreign rule", c.Name)
			}
		}
	}
	sets, err := n.GetSets(s.table)
	if err != nil {
		return fmt.Errorf("netcfg: list sets: %w", err)
	}
	var gotSets, wantSets []string
	for _, st := range sets {
		gotSets = append(gotSets, st.Name)
	}
	for _, st := range s.sets {
		wantSets = append(wantSets, st.set.Name)
	}
	slices.Sort(gotSets)
	slices.Sort(wantSets)
	if !slices.Equal(gotSets, wantSets) {
		return fmt.Errorf("netcfg: sets differ: have %v, want %v", gotSets, wantSets)
	}
	for _, st := range s.sets {
		elems, err := n.GetSetElements(st.set)
		if err != nil {
			return fmt.Errorf("netcfg: elements of %s: %w", st.set.Name, err)
		}
		if !slices.Equal(elemKeys(elems), elemKeys(st.elems)) {
			return fmt.Errorf("netcfg: set %s has %d elements that differ from the %d wanted", st.set.Name, len(elems), len(st.elems))
		}
	}
	return nil
}

// chainSig identifies a chain: its name and, for a base chain, its hook.
func chainSig(c *nftables.Chain) string {
	if c.Hooknum == nil {
		return c.Name
	}
	prio := 0
	if c.Priority != nil {
		prio = int(*c.Priority)
	}
	return fmt.Sprintf("%s(%s,%d,%d)", c.Name, c.Type, *c.Hooknum, prio)
}

// ipRules returns the two IMDS policy routing rules.
func (r *Reconciler) ipRules() []*netlink.Rule {
	var out []*netlink.Rule
	for _, a := range []netip.Addr{imds4, imds6} {
		rule := netlink.NewRule()
		rule.Priority = RulePriority
		rule.Family = unix.AF_INET6
		if a.Is4() {
			rule.Family = unix.AF_INET
		}
		rule.Dst = &net.IPNet{IP: a.AsSlice(), Mask: net.CIDRMask(a.BitLen(), a.BitLen())}
		rule.UIDRange = netlink.NewRuleUIDRange(r.opts.UIDMin, r.opts.UIDMax)
		rule.Type = unix.FR_ACT_PROHIBIT
		out = append(out, rule)
	}
	return out
}

// sameRule reports whether got (as listed) is want.
func sameRule(got netlink.Rule, want *netlink.Rule) bool {
	return got.Priority == want.Priority && got.Family == want.Family &&
		got.Dst != nil && got.Dst.String() == want.Dst.String() &&
		got.UIDRange != nil && *got.UIDRange == *want.UIDRange &&
		got.Table == 0 && got.Goto < 0 && got.Src == nil && !got.Invert &&
		got.IifName == "" && got.OifName == "" && got.Mark == 0
}

// findIPRules reports which of the IMDS rules are present.
func (r *Reconciler) findIPRules() ([]*netlink.Rule, []bool, error) {
	want := r.ipRules()
	have := make([]bool, len(want))
	for i, w := range want {
		list, err := r.rules.RuleList(w.Family)
		if err != nil {
			return nil, nil, fmt.Errorf("netcfg: list ip rules: %w", err)
		}
		have[i] = slices.ContainsFunc(list, func(g netlink.Rule) bool { return sameRule(g, w) })
	}
	return want, have, nil
}

func (r *Reconciler) ensureIPRules() error {
	want, have, err := r.findIPRules()
	if err != nil {
		return err
	}
	for i, w := range want {
		if have[i] {
			continue
		}
		if err := r.rules.RuleAdd(w); err != nil && !errors.Is(err, unix.EEXIST) {
			return fmt.Errorf("netcfg: add ip rule: %w", err)
		}
	}
	return nil
}

func (r *Reconciler) checkIPRules() error {
	_, have, err := r.findIPRules()
	if err != nil {
		return err
	}
	if slices.Contains(have, false) {
		return errors.New("netcfg: IMDS ip rule missing")
	}
	return nil
}

// Verify re-reads the kernel's state and reinstalls the last policy (or
// deny-all, after a failure) if it drifted. It returns nil when the state
// was right or has been repaired, and does nothing before the first Set.
func (r *Reconciler) Verify(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.want == nil {
		return nil
	}
	err := r.check(r.want)
	if err == nil {
		r.imds = true
		return nil
	}
	r.imds = false
	r.log.Warn("egress rules drifted, reinstalling", "err", err)
	if r.lockdown {
		return r.fail(ErrVerify, err)
	}
	r.installed = false
	return r.apply(r.policy)
}

// IMDSBlocked reports whether the last verification saw both the nftables
// rules and the policy routing rules that block the metadata service.
func (r *Reconciler) IMDSBlocked() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.imds
}

// Close removes the table and the policy routing rules. It is idempotent.
func (r *Reconciler) Close(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.installed, r.lockdown, r.want, r.imds, r.policy = false, false, nil, false, netpolicy.Policy{}
	t := &nftables.Table{Name: TableName, Family: nftables.TableFamilyINet}
	r.nft.AddTable(t) // so that the delete cannot fail on a missing table
	r.nft.DelTable(t)
	var errs []error
	if err := r.nft.Flush(); err != nil {
		errs = append(errs, fmt.Errorf("netcfg: delete table: %w", err))
	}
	want, have, err := r.findIPRules()
	if err != nil {
		errs = append(errs, err)
	}
	for i, w := range want {
		if have[i] {
			if err := r.rules.RuleDel(w); err != nil && !errors.Is(err, unix.ENOENT) {
				errs = append(errs, fmt.Errorf("netcfg: delete ip rule: %w", err))
			}
		}
	}
	return errors.Join(errs...)
}

// Probe reports whether rayd can program the network: it lists nftables
// tables (which the kernel allows only with CAP_NET_ADMIN in the network
// namespace's user namespace) and policy routing rules. A permission error
// wraps ErrNoCapability.
func (r *Reconciler) Probe(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if _, err := r.nft.ListTablesOfFamily(nftables.TableFamilyINet); err != nil {
		return probeErr("nftables", err)
	}
	if _, err := r.rules.RuleList(unix.AF_INET); err != nil {
		return probeErr("ip rules", err)
	}
	return nil
}

func probeErr(what string, err error) error {
	if errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES) || errors.Is(err, os.ErrPermission) {
		return fmt.Errorf("%w: %s: %w", ErrNoCapability, what, err)
	}
	return fmt.Errorf("netcfg: probe %s: %w", what, err)
}

package hostnet

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"github.com/google/nftables/userdata"
	"golang.org/x/sys/unix"
)

// The firewall's nftables table (family inet), with the default names:
//
//	table inet rayito_localvm {
//	  chain input {        # filter, hook input, priority 0, policy accept
//	    ct state established,related accept         # first: no name match per packet
//	    iifname "rl-*" drop
//	  }
//	  chain forward {      # filter, hook forward, priority 0, policy accept
//	    oifname "rl-*" ct state established,related accept
//	    oifname "rl-*" drop                          # nothing forwarded into a sandbox
//	    iifname "rl-*" ip daddr 169.254.0.0/16 drop  # link-local, cloud metadata
//	    iifname "rl-*" jump egress
//	    iifname "rl-*" drop
//	  }
//	  chain egress {       # regular chain: one rule per sandbox with Internet
//	    iifname "rl-xxxxxxxx" ip saddr <guest> accept  comment "rayito-localvm:<id>"
//	  }
//	  chain postrouting {  # nat, hook postrouting, priority 100
//	    ip saddr <guest> masquerade                    comment "rayito-localvm:<id>"
//	  }
//	}
//
// The static rules carry the comment "<tag>static/2" (a table with older
// static rules is rebuilt); the per-sandbox rules "<tag><id>".
//
// The input chain accepts established traffic before it looks at interface
// names: comparing the "rl-*" wildcard costs a name copy per packet, which
// was a fifth of rayd's CPU time while it streamed output to the host. The
// forward chain keeps its order, so that a sandbox's established flows
// stop as soon as its egress rule goes. Installing a sandbox's rules is one batch (one Flush), so a
// failure leaves nothing of them behind.

// staticTag ends the comment of the static rules; it changes with them.
const staticTag = "static/2"

const (
	chainInput       = "input"
	chainForward     = "forward"
	chainEgress      = "egress"
	chainPostrouting = "postrouting"
)

// NFT is the part of *nftables.Conn the firewall uses. Each operation
// dials a fresh connection (see Firewall.Dial); the tests use a fake, or a
// real Conn over nftables.WithTestDial to see the netlink messages.
type NFT interface {
	AddTable(*nftables.Table) *nftables.Table
	DelTable(*nftables.Table)
	AddChain(*nftables.Chain) *nftables.Chain
	FlushChain(*nftables.Chain)
	AddRule(*nftables.Rule) *nftables.Rule
	DelRule(*nftables.Rule) error
	Flush() error
	ListTablesOfFamily(nftables.TableFamily) ([]*nftables.Table, error)
	ListChainsOfTableFamily(nftables.TableFamily) ([]*nftables.Chain, error)
	GetRules(*nftables.Table, *nftables.Chain) ([]*nftables.Rule, error)
}

var _ NFT = (*nftables.Conn)(nil)

// LockDir holds one lock file per table (machine-wide, like the table).
const LockDir = "/run/rayito/localvm/nft"

// Names are what a Firewall's table and rules are called.
type Names struct {
	Table      string // the nftables table (family inet)
	VethPrefix string // the host side of every sandbox's veth starts with it
	CommentTag string // prefix of the comment carried by the table's rules
}

// Firewall owns one nftables table of sandbox rules. Several Launchers may share
// one table: the tests' do in this process, and two platforms of one scope
// do across processes. Its changes are serialized by:
//
//   - mu, for this Launcher's goroutines;
//   - an flock on lockPath (one file per table), for every Launcher of the
//     table, in this process or another. An flock belongs to an open file
//     description, so two Launchers of one process exclude each other as
//     two processes do. A mutex alone would not do: Release checks that no
//     veth is left and drops the table under the lock, and an install must
//     not slip between the two. Each change is also one atomic batch, so a
//     concurrent one never sees half of it.
//
// The lock file holds a generation, a random value written when the file
// is made and replaced when the table is dropped: the cache of ensureBase
// (checked) is only trusted while the generation is the one it was made
// at, so a drop by another Launcher invalidates it as the process-wide map
// it replaces did. Release removes the lock file with the table (nothing
// of the scope is left on the machine then), under the flock; a Launcher
// that waited on the removed file sees that it is no longer at lockPath and
// locks the new one (see lock), whose fresh generation never matches a
// cache made before. When the lock file cannot be used (lockPath empty, or
// /run not writable) only mu serializes, and ensureBase never trusts its
// cache.
type Firewall struct {
	n        Names
	dial     func() (NFT, error) // a connection per operation
	lockPath string
	now      func() time.Time

	mu sync.Mutex
	// checked is when ensureBase last found or made the static rules, and
	// checkedGen the lock file's generation then (guarded by the lock).
	// Within baseCheckFor of it a new sandbox's install does not list them
	// again: during a burst of launches the listing cost more than the
	// launch's own rules.
	checked    time.Time
	checkedGen string
}

// NewFirewall returns the firewall of the table of n, on the kernel's
// nftables, with its lock file in LockDir.
func NewFirewall(n Names) *Firewall {
	return &Firewall{
		n:        n,
		dial:     func() (NFT, error) { return nftables.New() },
		lockPath: filepath.Join(LockDir, n.Table+".lock"),
		now:      time.Now,
	}
}

// Lock is a held firewall lock (see Firewall.Lock).
type Lock struct {
	fw  *Firewall
	f   *os.File // nil without a lock file
	gen string   // the lock file's generation ("" without one)
}

// maxLockTries bounds how often lock starts over on a lock file that was
// removed while it waited.
const maxLockTries = 16

// Lock takes the firewall's lock: mu, then the lock file's flock. The file
// may be removed by the Launcher that held it (RemoveFile) while this one
// waited on it: the flock is then on a file nobody else opens, so lock
// starts over on the file now at lockPath (as a scope claim does). The
// caller calls Unlock.
func (fw *Firewall) Lock() *Lock {
	fw.mu.Lock()
	h := &Lock{fw: fw}
	if fw.lockPath == "" {
		return h
	}
	for range maxLockTries {
		f, again := fw.lockFile()
		if f != nil {
			h.f = f
			h.gen = "gen:" + readGeneration(f)
			return h
		}
		if !again {
			return h
		}
	}
	return h
}

// lockFile opens and flocks the lock file: nil and again true when the
// locked file is no longer the one at lockPath (try again), nil and false
// when the file cannot be used.
func (fw *Firewall) lockFile() (f *os.File, again bool) {
	if err := os.MkdirAll(filepath.Dir(fw.lockPath), 0o700); err != nil {
		return nil, false
	}
	f, err := os.OpenFile(fw.lockPath, os.O_RDWR|os.O_CREATE|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, false
	}
	for {
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX)
		if !errors.Is(err, unix.EINTR) {
			break
		}
	}
	if err != nil {
		f.Close()
		return nil, false
	}
	var held, now unix.Stat_t
	if unix.Fstat(int(f.Fd()), &held) != nil || unix.Stat(fw.lockPath, &now) != nil || held.Ino != now.Ino || held.Dev != now.Dev {
		f.Close()
		return nil, true
	}
	return f, false
}

// readGeneration returns the lock file's generation, giving a new file
// (empty) one first. The caller holds the file's flock.
func readGeneration(f *os.File) string {
	var b [64]byte
	n, _ := f.ReadAt(b[:], 0)
	if g := strings.TrimSpace(string(b[:n])); g != "" {
		return g
	}
	g := newGeneration()
	_, _ = f.WriteAt([]byte(g+"\n"), 0)
	return g
}

// newGeneration is a random generation: a file made after another was
// removed never repeats the removed one's.
func newGeneration() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Unlock releases the lock (closing the file releases its flock).
func (h *Lock) Unlock() {
	if h.f != nil {
		h.f.Close()
	}
	h.fw.mu.Unlock()
}

// bumpGeneration records in the lock file that the table was dropped.
func (h *Lock) bumpGeneration() {
	if h.f == nil {
		return
	}
	g := newGeneration()
	if err := h.f.Truncate(0); err == nil {
		_, _ = h.f.WriteAt([]byte(g+"\n"), 0)
	}
	h.gen = "gen:" + g
}

// RemoveFile removes the lock file, still locked (see Lock): its owner
// does it once the table is gone (DropTableLocked) and nothing of the
// table's sandboxes is left.
func (h *Lock) RemoveFile() error {
	if h.f == nil {
		return nil
	}
	if err := os.Remove(h.fw.lockPath); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("launcher: nftables: removing the lock file: %w", err)
	}
	return nil
}

// SweepLockFiles removes from dir the lock files of tables that no longer
// exist: a platform that stopped without its Release (killed, or a
// version from before Release removed them) leaves its file behind, one
// per state dir ever used, until the machine reboots. A file is removed
// only when it is named like a table's lock (isTable accepts the table's
// name), is a regular file
// (not a symbolic link), nobody holds its flock (taken without waiting:
// a Launcher changing its table holds it), it is still the file at its
// path once locked, and its table is absent (every live sandbox's launch
// made its table). A Launcher that opened it meanwhile locks the new one
// (see lock). It returns how many it removed; any doubt keeps a file.
func SweepLockFiles(dir string, dial func() (NFT, error), isTable func(name string) bool) int {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return 0
	}
	c, err := dial()
	if err != nil {
		return 0
	}
	tables, err := c.ListTablesOfFamily(nftables.TableFamilyINet)
	if err != nil {
		return 0
	}
	live := map[string]bool{}
	for _, t := range tables {
		live[t.Name] = true
	}
	removed := 0
	for _, e := range ents {
		table, ok := strings.CutSuffix(e.Name(), ".lock")
		if !ok || !e.Type().IsRegular() || !isTable(table) || live[table] {
			continue
		}
		if removeUnusedLock(filepath.Join(dir, e.Name())) {
			removed++
		}
	}
	return removed
}

// removeUnusedLock removes the lock file at p if nobody holds its flock
// and it is still the file at p once locked.
func removeUnusedLock(p string) bool {
	f, err := os.OpenFile(p, os.O_RDWR|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	defer f.Close()
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		return false
	}
	var held, now unix.Stat_t
	if unix.Fstat(int(f.Fd()), &held) != nil || unix.Lstat(p, &now) != nil || held.Ino != now.Ino || held.Dev != now.Dev {
		return false
	}
	return os.Remove(p) == nil
}

// baseCheckFor is how long a check of the static rules is trusted.
const baseCheckFor = time.Second

func (fw *Firewall) table() *nftables.Table {
	return &nftables.Table{Name: fw.n.Table, Family: nftables.TableFamilyINet}
}

func (fw *Firewall) chains(t *nftables.Table) (input, forward, egress, post *nftables.Chain) {
	accept := nftables.ChainPolicyAccept
	input = &nftables.Chain{Name: chainInput, Table: t, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookInput, Priority: nftables.ChainPriorityFilter, Policy: &accept}
	forward = &nftables.Chain{Name: chainForward, Table: t, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookForward, Priority: nftables.ChainPriorityFilter, Policy: &accept}
	egress = &nftables.Chain{Name: chainEgress, Table: t}
	post = &nftables.Chain{Name: chainPostrouting, Table: t, Type: nftables.ChainTypeNAT,
		Hooknum: nftables.ChainHookPostrouting, Priority: nftables.ChainPriorityNATSource, Policy: &accept}
	return
}

func comment(s string) []byte { return userdata.AppendString(nil, userdata.TypeComment, s) }

func ruleComment(r *nftables.Rule) string {
	s, _ := userdata.GetString(r.UserData, userdata.TypeComment)
	return s
}

// ifname matches an interface name: a prefix ("rl-*") when wildcard is
// true, else the exact name.
func ifname(key expr.MetaKey, name string, wildcard bool) []expr.Any {
	data := []byte(name)
	if !wildcard {
		data = make([]byte, unix.IFNAMSIZ)
		copy(data, name)
	}
	return []expr.Any{
		&expr.Meta{Key: key, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: data},
	}
}

func ctEstablished() []expr.Any {
	return []expr.Any{
		&expr.Ct{Register: 1, Key: expr.CtKeySTATE},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4,
			Mask: binaryutil.NativeEndian.PutUint32(expr.CtStateBitESTABLISHED | expr.CtStateBitRELATED),
			Xor:  binaryutil.NativeEndian.PutUint32(0)},
		&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: binaryutil.NativeEndian.PutUint32(0)},
	}
}

func ipv4() []expr.Any {
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyNFPROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{unix.NFPROTO_IPV4}},
	}
}

// ipAddr matches the IPv4 source (offset 12) or destination (offset 16)
// against prefix.
func ipAddr(offset uint32, p netip.Prefix) []expr.Any {
	a := p.Masked().Addr().As4()
	var mask [4]byte
	for i := 0; i < p.Bits(); i++ {
		mask[i/8] |= 0x80 >> (i % 8)
	}
	out := append(ipv4(), &expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: offset, Len: 4})
	if p.Bits() < 32 {
		out = append(out, &expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: mask[:], Xor: []byte{0, 0, 0, 0}})
	}
	return append(out, &expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: a[:]})
}

func verdict(k expr.VerdictKind) expr.Any { return &expr.Verdict{Kind: k} }

func cat(parts ...[]expr.Any) []expr.Any {
	var out []expr.Any
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// staticRules returns the input and forward chains' rules.
func (fw *Firewall) staticRules(input, forward *nftables.Chain) []*nftables.Rule {
	t := input.Table
	p := fw.n.VethPrefix
	tag := comment(fw.n.CommentTag + staticTag)
	linkLocal := netip.MustParsePrefix("169.254.0.0/16")
	mk := func(c *nftables.Chain, e []expr.Any) *nftables.Rule {
		return &nftables.Rule{Table: t, Chain: c, Exprs: e, UserData: tag}
	}
	return []*nftables.Rule{
		mk(input, cat(ctEstablished(), []expr.Any{verdict(expr.VerdictAccept)})),
		mk(input, cat(ifname(expr.MetaKeyIIFNAME, p, true), []expr.Any{verdict(expr.VerdictDrop)})),
		mk(forward, cat(ifname(expr.MetaKeyOIFNAME, p, true), ctEstablished(), []expr.Any{verdict(expr.VerdictAccept)})),
		mk(forward, cat(ifname(expr.MetaKeyOIFNAME, p, true), []expr.Any{verdict(expr.VerdictDrop)})),
		mk(forward, cat(ifname(expr.MetaKeyIIFNAME, p, true), ipAddr(16, linkLocal), []expr.Any{verdict(expr.VerdictDrop)})),
		mk(forward, cat(ifname(expr.MetaKeyIIFNAME, p, true), []expr.Any{&expr.Verdict{Kind: expr.VerdictJump, Chain: chainEgress}})),
		mk(forward, cat(ifname(expr.MetaKeyIIFNAME, p, true), []expr.Any{verdict(expr.VerdictDrop)})),
	}
}

// sandboxRules returns the rules of a sandbox with Internet access.
func (fw *Firewall) sandboxRules(egress, post *nftables.Chain, id, veth string, guest netip.Addr) []*nftables.Rule {
	tag := comment(fw.n.CommentTag + id)
	g := netip.PrefixFrom(guest, 32)
	return []*nftables.Rule{
		{Table: egress.Table, Chain: egress, UserData: tag,
			Exprs: cat(ifname(expr.MetaKeyIIFNAME, veth, false), ipAddr(12, g), []expr.Any{verdict(expr.VerdictAccept)})},
		{Table: post.Table, Chain: post, UserData: tag,
			Exprs: cat(ipAddr(12, g), []expr.Any{&expr.Masq{}})},
	}
}

// baseOK reports whether the table has its chains and exactly its static
// rules.
func (fw *Firewall) baseOK(c NFT) bool {
	t := fw.table()
	input, forward, _, _ := fw.chains(t)
	want := fw.staticRules(input, forward)
	var got []*nftables.Rule
	for _, ch := range []*nftables.Chain{input, forward} {
		rs, err := c.GetRules(t, ch)
		if err != nil {
			return false
		}
		got = append(got, rs...)
	}
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		if ruleComment(got[i]) != fw.n.CommentTag+staticTag || got[i].Chain.Name != want[i].Chain.Name {
			return false
		}
	}
	chains, err := c.ListChainsOfTableFamily(nftables.TableFamilyINet)
	if err != nil {
		return false
	}
	n := 0
	for _, ch := range chains {
		if ch.Table.Name == t.Name {
			switch ch.Name {
			case chainEgress, chainPostrouting:
				n++
			}
		}
	}
	return n == 2
}

// ensureBase creates the table, its chains and its static rules if they are
// missing or incomplete, in one batch. Per-sandbox rules live in the
// egress and postrouting chains and survive a rebuild of the static ones.
// The caller holds h.
func (fw *Firewall) ensureBase(h *Lock, c NFT, trustRecent bool) error {
	if trustRecent && h.gen != "" && h.gen == fw.checkedGen && fw.now().Sub(fw.checked) < baseCheckFor {
		return nil
	}
	if fw.baseOK(c) {
		fw.checked, fw.checkedGen = fw.now(), h.gen
		return nil
	}
	t := fw.table()
	input, forward, egress, post := fw.chains(t)
	c.AddTable(t)
	c.AddChain(input)
	c.AddChain(forward)
	c.AddChain(egress)
	c.AddChain(post)
	c.FlushChain(input)
	c.FlushChain(forward)
	for _, r := range fw.staticRules(input, forward) {
		c.AddRule(r)
	}
	if err := c.Flush(); err != nil {
		return fmt.Errorf("launcher: nftables: installing table %s: %w", t.Name, err)
	}
	fw.checked, fw.checkedGen = fw.now(), h.gen
	return nil
}

// Install ensures the base table and adds the sandbox's rules (if it has
// Internet access), all or nothing. Rules already present for id are
// replaced, unless fresh says there can be none (a new sandbox id): the
// search lists every sandbox's rules.
func (fw *Firewall) Install(id, veth string, guest netip.Addr, internet, fresh bool) error {
	h := fw.Lock()
	defer h.Unlock()
	c, err := fw.dial()
	if err != nil {
		return fmt.Errorf("launcher: nftables: %w", err)
	}
	// A new sandbox trusts a recent check; an adopted one (after a restart
	// that may have lost the ruleset) always looks.
	if err := fw.ensureBase(h, c, fresh); err != nil {
		return err
	}
	if !internet {
		return nil
	}
	t := fw.table()
	_, _, egress, post := fw.chains(t)
	if !fresh {
		if err := fw.queueDelete(c, func(s string) bool { return s == id }); err != nil {
			return err
		}
	}
	for _, r := range fw.sandboxRules(egress, post, id, veth, guest) {
		c.AddRule(r)
	}
	if err := c.Flush(); err != nil {
		return fmt.Errorf("launcher: nftables: adding the sandbox's rules: %w", err)
	}
	return nil
}

// HasRules reports whether id has its two per-sandbox rules.
func (fw *Firewall) HasRules(id string) bool {
	return len(fw.RulesOf(id)) == 2
}

// sandboxRuleList lists the rules of the per-sandbox chains (none when the
// table does not exist).
func (fw *Firewall) sandboxRuleList(c NFT) ([]*nftables.Rule, error) {
	t := fw.table()
	_, _, egress, post := fw.chains(t)
	var out []*nftables.Rule
	for _, ch := range []*nftables.Chain{egress, post} {
		rs, err := c.GetRules(t, ch)
		if err != nil {
			if errors.Is(err, unix.ENOENT) || errors.Is(err, os.ErrNotExist) || strings.Contains(err.Error(), "no such file") {
				continue
			}
			return nil, fmt.Errorf("launcher: nftables: listing rules: %w", err)
		}
		out = append(out, rs...)
	}
	return out, nil
}

// queueDelete queues the deletion of every per-sandbox rule whose id
// matches.
func (fw *Firewall) queueDelete(c NFT, match func(id string) bool) error {
	rules, err := fw.sandboxRuleList(c)
	if err != nil {
		return err
	}
	for _, r := range rules {
		id, ok := strings.CutPrefix(ruleComment(r), fw.n.CommentTag)
		if !ok || !match(id) {
			continue
		}
		if err := c.DelRule(r); err != nil {
			return fmt.Errorf("launcher: nftables: %w", err)
		}
	}
	return nil
}

// Remove deletes the per-sandbox rules whose id matches, in one batch.
func (fw *Firewall) Remove(match func(id string) bool) error {
	h := fw.Lock()
	defer h.Unlock()
	c, err := fw.dial()
	if err != nil {
		return fmt.Errorf("launcher: nftables: %w", err)
	}
	if err := fw.queueDelete(c, match); err != nil {
		return err
	}
	if err := c.Flush(); err != nil {
		return fmt.Errorf("launcher: nftables: removing rules: %w", err)
	}
	return nil
}

// DropTableLocked deletes the firewall's table, if it exists, and bumps
// the lock file's generation (every Firewall's ensureBase then lists
// again). The caller holds h.
func (fw *Firewall) DropTableLocked(h *Lock) error {
	c, err := fw.dial()
	if err != nil {
		return fmt.Errorf("launcher: nftables: %w", err)
	}
	tables, err := c.ListTablesOfFamily(nftables.TableFamilyINet)
	if err != nil {
		return fmt.Errorf("launcher: nftables: %w", err)
	}
	t := fw.table()
	for _, have := range tables {
		if have.Name == t.Name {
			c.DelTable(t)
			if err := c.Flush(); err != nil {
				return fmt.Errorf("launcher: nftables: deleting table %s: %w", t.Name, err)
			}
			h.bumpGeneration()
			fw.checked = time.Time{}
			return nil
		}
	}
	return nil
}

// EnableForwarding turns net.ipv4.ip_forward on (never off: other
// sandboxes and the host may rely on it).
func EnableForwarding() error {
	const path = "/proc/sys/net/ipv4/ip_forward"
	b, err := os.ReadFile(path)
	if err == nil && bytes.Equal(bytes.TrimSpace(b), []byte("1")) {
		return nil
	}
	if err := os.WriteFile(path, []byte("1\n"), 0o644); err != nil {
		return fmt.Errorf("launcher: enabling net.ipv4.ip_forward: %w", err)
	}
	return nil
}

// Dial opens a connection to the firewall's nftables.
func (fw *Firewall) Dial() (NFT, error) { return fw.dial() }

// LockPath is the firewall's lock file.
func (fw *Firewall) LockPath() string { return fw.lockPath }

// BaseOK reports whether the table has its chains and exactly its static
// rules.
func (fw *Firewall) BaseOK() bool {
	c, err := fw.dial()
	return err == nil && fw.baseOK(c)
}

// RulesOf returns the chains of sandbox id's per-sandbox rules, one entry
// per rule (none when they cannot be listed).
func (fw *Firewall) RulesOf(id string) []string {
	h := fw.Lock()
	defer h.Unlock()
	c, err := fw.dial()
	if err != nil {
		return nil
	}
	rules, err := fw.sandboxRuleList(c)
	if err != nil {
		return nil
	}
	var out []string
	for _, r := range rules {
		if ruleComment(r) == fw.n.CommentTag+id {
			out = append(out, r.Chain.Name)
		}
	}
	return out
}

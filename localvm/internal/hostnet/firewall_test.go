//go:build linux

package hostnet

import (
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/nftables"
	mdnetlink "github.com/mdlayher/netlink"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// defaultNames are the launcher's names without a scope.
var defaultNames = Names{Table: "rayito_localvm", VethPrefix: "rl-", CommentTag: "rayito-localvm:"}

// fakeFirewall returns a firewall of the default names on nft, with a
// lock file in dir and a fake clock.
func fakeFirewall(t *testing.T, nft NFT, lockDir string) (*Firewall, *fakeClock) {
	t.Helper()
	clk := &fakeClock{t: time.Unix(1_700_000_000, 0)}
	fw := &Firewall{n: defaultNames, dial: func() (NFT, error) { return nft, nil },
		lockPath: filepath.Join(lockDir, defaultNames.Table+".lock"), now: clk.now}
	return fw, clk
}

var wantStatic = map[string][]string{
	chainInput: {
		`ct state established,related accept  comment "rayito-localvm:static/2"`,
		`iifname "rl-*" drop  comment "rayito-localvm:static/2"`,
	},
	chainForward: {
		`oifname "rl-*" ct state established,related accept  comment "rayito-localvm:static/2"`,
		`oifname "rl-*" drop  comment "rayito-localvm:static/2"`,
		`iifname "rl-*" ip daddr 169.254.0.0/16 drop  comment "rayito-localvm:static/2"`,
		`iifname "rl-*" jump egress  comment "rayito-localvm:static/2"`,
		`iifname "rl-*" drop  comment "rayito-localvm:static/2"`,
	},
}

var baseBatch = []string{
	"AddTable rayito_localvm", "AddChain input", "AddChain forward", "AddChain egress", "AddChain postrouting",
	"FlushChain input", "FlushChain forward",
	"AddRule input", "AddRule input",
	"AddRule forward", "AddRule forward", "AddRule forward", "AddRule forward", "AddRule forward",
	"Flush",
}

func checkStatic(t *testing.T, f *fakeNFT) {
	t.Helper()
	for ch, want := range wantStatic {
		if got := f.rules("rayito_localvm", ch); !slices.Equal(got, want) {
			t.Errorf("chain %s:\n got %q\nwant %q", ch, got, want)
		}
	}
}

func TestFirewallInternet(t *testing.T) {
	f := newFakeNFT()
	fw, _ := fakeFirewall(t, f, t.TempDir())
	guest := netip.MustParseAddr("10.201.0.2")
	if err := fw.Install("sb1", "rl-0a1b2c3d", guest, true, true); err != nil {
		t.Fatal(err)
	}
	// A missing table: listed (the first GetRules fails), built in one
	// batch, then the sandbox's rules in a second.
	want := append([]string{"GetRules input"}, baseBatch...)
	want = append(want, "AddRule egress", "AddRule postrouting", "Flush")
	if got := f.takeCalls(); !slices.Equal(got, want) {
		t.Errorf("calls:\n got %q\nwant %q", got, want)
	}
	checkStatic(t, f)
	if got, want := f.rules("rayito_localvm", chainEgress), []string{`iifname "rl-0a1b2c3d" ip saddr 10.201.0.2/32 accept  comment "rayito-localvm:sb1"`}; !slices.Equal(got, want) {
		t.Errorf("egress:\n got %q\nwant %q", got, want)
	}
	if got, want := f.rules("rayito_localvm", chainPostrouting), []string{`ip saddr 10.201.0.2/32 masquerade  comment "rayito-localvm:sb1"`}; !slices.Equal(got, want) {
		t.Errorf("postrouting:\n got %q\nwant %q", got, want)
	}
	if !fw.HasRules("sb1") || fw.HasRules("sb2") {
		t.Error("hasRules")
	}
}

func TestFirewallNoInternet(t *testing.T) {
	f := newFakeNFT()
	fw, _ := fakeFirewall(t, f, t.TempDir())
	if err := fw.Install("sb1", "rl-0a1b2c3d", netip.MustParseAddr("10.201.0.2"), false, true); err != nil {
		t.Fatal(err)
	}
	if got, want := f.takeCalls(), append([]string{"GetRules input"}, baseBatch...); !slices.Equal(got, want) {
		t.Errorf("calls:\n got %q\nwant %q", got, want)
	}
	checkStatic(t, f)
	if n := len(f.rules("rayito_localvm", chainEgress)) + len(f.rules("rayito_localvm", chainPostrouting)); n != 0 {
		t.Errorf("%d per-sandbox rules, want none", n)
	}
	if fw.HasRules("sb1") {
		t.Error("hasRules of a sandbox without Internet")
	}
}

func TestFirewallRemove(t *testing.T) {
	f := newFakeNFT()
	fw, _ := fakeFirewall(t, f, t.TempDir())
	for i, id := range []string{"sb1", "sb2"} {
		if err := fw.Install(id, "rl-0000000"+string(rune('1'+i)), netip.AddrFrom4([4]byte{10, 201, 0, byte(2 + 4*i)}), true, true); err != nil {
			t.Fatal(err)
		}
	}
	f.takeCalls()
	if err := fw.Remove(func(id string) bool { return id == "sb1" }); err != nil {
		t.Fatal(err)
	}
	calls := f.takeCalls()
	if calls[len(calls)-1] != "Flush" || slices.Index(calls, "Flush") != len(calls)-1 {
		t.Errorf("not one batch: %q", calls)
	}
	var dels []string
	for _, c := range calls {
		if strings.HasPrefix(c, "DelRule ") {
			dels = append(dels, strings.Fields(c)[1])
		}
	}
	if !slices.Equal(dels, []string{chainEgress, chainPostrouting}) {
		t.Errorf("deleted %q, want one rule in egress and one in postrouting", dels)
	}
	if fw.HasRules("sb1") || !fw.HasRules("sb2") {
		t.Error("sb1 kept its rules or sb2 lost them")
	}
	checkStatic(t, f)
	// An adopted sandbox's install replaces its rules rather than adding.
	if err := fw.Install("sb2", "rl-00000002", netip.MustParseAddr("10.201.0.6"), true, false); err != nil {
		t.Fatal(err)
	}
	if n := len(f.rules("rayito_localvm", chainEgress)); n != 1 {
		t.Errorf("%d egress rules after re-adopting sb2, want 1", n)
	}
}

func lists(calls []string) int {
	n := 0
	for _, c := range calls {
		if strings.HasPrefix(c, "GetRules ") || strings.HasPrefix(c, "List") {
			n++
		}
	}
	return n
}

func TestEnsureBaseCache(t *testing.T) {
	f := newFakeNFT()
	dir := t.TempDir()
	fw, clk := fakeFirewall(t, f, dir)
	g := netip.MustParseAddr("10.201.0.2")
	if err := fw.Install("sb1", "rl-00000001", g, false, true); err != nil {
		t.Fatal(err)
	}
	f.takeCalls()
	clk.advance(baseCheckFor / 2)
	if err := fw.Install("sb2", "rl-00000002", g, false, true); err != nil {
		t.Fatal(err)
	}
	if c := f.takeCalls(); len(c) != 0 {
		t.Errorf("a second install within the check window called %q", c)
	}
	// An adopted sandbox always looks.
	if err := fw.Install("sb3", "rl-00000003", g, false, false); err != nil {
		t.Fatal(err)
	}
	if c := f.takeCalls(); lists(c) == 0 || slices.Contains(c, "Flush") {
		t.Errorf("adoption: calls %q, want a listing and no change", c)
	}
	clk.advance(baseCheckFor)
	if err := fw.Install("sb4", "rl-00000004", g, false, true); err != nil {
		t.Fatal(err)
	}
	if c := f.takeCalls(); lists(c) == 0 || slices.Contains(c, "Flush") {
		t.Errorf("after the window: calls %q, want a listing and no change", c)
	}
	// Another Launcher of the table drops it: this one's cache no longer
	// holds, and its next install rebuilds the table.
	other, _ := fakeFirewall(t, f, dir)
	h := other.Lock()
	if err := other.DropTableLocked(h); err != nil {
		t.Fatal(err)
	}
	h.Unlock()
	f.takeCalls()
	if err := fw.Install("sb5", "rl-00000005", g, true, true); err != nil {
		t.Fatal(err)
	}
	if c := f.takeCalls(); lists(c) == 0 || !slices.Contains(c, "AddTable rayito_localvm") {
		t.Errorf("after another's drop: calls %q, want a listing and a rebuild", c)
	}
	checkStatic(t, f)
	// Without a lock file the cache is never trusted.
	fw.lockPath = ""
	f.takeCalls()
	if err := fw.Install("sb6", "rl-00000006", g, false, true); err != nil {
		t.Fatal(err)
	}
	if c := f.takeCalls(); lists(c) == 0 {
		t.Errorf("without a lock file: calls %q, want a listing", c)
	}
}

// TestFirewallLockShared checks that two firewalls of one table exclude
// each other (in one process, as two processes would).
func TestFirewallLockShared(t *testing.T) {
	dir := t.TempDir()
	a, _ := fakeFirewall(t, newFakeNFT(), dir)
	b, _ := fakeFirewall(t, newFakeNFT(), dir)
	ha := a.Lock()
	if ha.f == nil {
		t.Fatal("no lock file")
	}
	got := make(chan struct{})
	go func() {
		hb := b.Lock()
		close(got)
		hb.Unlock()
	}()
	select {
	case <-got:
		t.Fatal("the second firewall took the lock while the first held it")
	case <-time.After(100 * time.Millisecond):
	}
	ha.Unlock()
	select {
	case <-got:
	case <-time.After(5 * time.Second):
		t.Fatal("the second firewall did not get the lock")
	}
}

// TestInstallOneBatch drives a real *nftables.Conn whose netlink socket is
// a recorder: a sandbox's rules go in one send, batch begin, the two
// rules, batch end.
func TestInstallOneBatch(t *testing.T) {
	var sends [][]mdnetlink.Message
	c, err := nftables.New(nftables.WithTestDial(func(req []mdnetlink.Message) ([]mdnetlink.Message, error) {
		if len(req) == 0 {
			return nil, nil
		}
		sends = append(sends, req)
		return req, nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	fw, _ := fakeFirewall(t, c, t.TempDir())
	// The static rules were checked just now (the recorder cannot answer
	// a listing).
	h := fw.Lock()
	fw.checked, fw.checkedGen = fw.now(), h.gen
	h.Unlock()
	if err := fw.Install("sb1", "rl-0a1b2c3d", netip.MustParseAddr("10.201.0.2"), true, true); err != nil {
		t.Fatal(err)
	}
	if len(sends) != 1 {
		t.Fatalf("%d sends, want 1", len(sends))
	}
	typ := func(m mdnetlink.Message) uint16 { return uint16(m.Header.Type) }
	newRule := uint16(unix.NFNL_SUBSYS_NFTABLES<<8 | unix.NFT_MSG_NEWRULE)
	var got []uint16
	for _, m := range sends[0] {
		got = append(got, typ(m))
	}
	want := []uint16{unix.NFNL_MSG_BATCH_BEGIN, newRule, newRule, unix.NFNL_MSG_BATCH_END}
	if !slices.Equal(got, want) {
		t.Errorf("messages %#x, want %#x", got, want)
	}
}

// fakeVeths returns a hostNet on fake namespaces: the host's and the
// sandbox's (nsfd 42), sharing one call log.
func fakeVeths() (*Veths, *fakeNetlink, *fakeNetlink, *[]string) {
	calls := &[]string{}
	ns := &fakeNetlink{name: "ns", links: map[string]netlink.Link{}, calls: calls}
	ns.addLink("lo")
	host := &fakeNetlink{name: "host", links: map[string]netlink.Link{}, calls: calls, peer: ns}
	host.addLink("lo")
	host.addLink("eth0")
	hn := &Veths{
		host: host,
		openNS: func(pid int) (int, error) {
			*calls = append(*calls, "open ns of pid "+itoa(pid))
			return 42, nil
		},
		closeNS: func(nsfd int) { *calls = append(*calls, "close ns "+itoa(nsfd)) },
		inNS: func(nsfd int) (Netlink, func(), error) {
			*calls = append(*calls, "handle in ns "+itoa(nsfd))
			return ns, func() { *calls = append(*calls, "close handle") }, nil
		},
	}
	return hn, host, ns, calls
}

func itoa(i int) string { return strconv.Itoa(i) }

func TestSetupNetworkSequence(t *testing.T) {
	hn, host, _, calls := fakeVeths()
	if err := hn.Setup(1234, "rl-0a1b2c3d", netip.MustParseAddr("10.201.0.1"), netip.MustParseAddr("10.201.0.2")); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"open ns of pid 1234",
		"host: LinkAdd veth rl-0a1b2c3d peer eth0 in 42",
		"host: LinkByName rl-0a1b2c3d",
		"host: AddrAdd rl-0a1b2c3d 10.201.0.1/30",
		"host: LinkSetUp rl-0a1b2c3d",
		"handle in ns 42",
		"ns: LinkByName lo",
		"ns: LinkSetUp lo",
		"ns: LinkByName eth0",
		"ns: AddrAdd eth0 10.201.0.2/30",
		"ns: LinkSetUp eth0",
		"ns: RouteAdd index 2 via 10.201.0.1 dst <nil>",
		"close handle",
		"close ns 42",
	}
	if !slices.Equal(*calls, want) {
		t.Errorf("calls:\n got %q\nwant %q", *calls, want)
	}
	if host.links["rl-0a1b2c3d"] == nil {
		t.Error("no host-side veth")
	}
}

func TestSetupNetworkFailureDeletesVeth(t *testing.T) {
	hn, host, ns, calls := fakeVeths()
	ns.fail = "RouteAdd"
	if err := hn.Setup(1234, "rl-0a1b2c3d", netip.MustParseAddr("10.201.0.1"), netip.MustParseAddr("10.201.0.2")); err == nil {
		t.Fatal("no error")
	}
	if host.links["rl-0a1b2c3d"] != nil {
		t.Error("veth left after a failure")
	}
	tail := (*calls)[len(*calls)-5:]
	want := []string{"ns: RouteAdd index 2 via 10.201.0.1 dst <nil>", "close handle", "host: LinkByName rl-0a1b2c3d", "host: LinkDel rl-0a1b2c3d", "close ns 42"}
	if !slices.Equal(tail, want) {
		t.Errorf("last calls:\n got %q\nwant %q", tail, want)
	}
}

func TestVethListAndDelete(t *testing.T) {
	hn, host, _, _ := fakeVeths()
	host.addLink("rl-00000001")
	host.addLink("rl-bad")
	isVeth := func(name string) bool { return name == "rl-00000001" }
	got, err := hn.List(isVeth)
	if err != nil || !slices.Equal(got, []string{"rl-00000001"}) {
		t.Fatalf("listVeths: %q %v", got, err)
	}
	if err := hn.Delete("rl-00000001"); err != nil {
		t.Fatal(err)
	}
	if err := hn.Delete("rl-00000001"); err != nil {
		t.Errorf("deleting a missing veth: %v", err)
	}
}

// TestFirewallLockFileRemoved: a firewall waiting on the lock file while
// its holder removes it (Release) locks the file made anew at the same
// path, so it still excludes every later firewall of the table; the new
// file's generation is not the removed one's, so a cache made before the
// removal is not trusted.
func TestFirewallLockFileRemoved(t *testing.T) {
	dir := t.TempDir()
	a, _ := fakeFirewall(t, newFakeNFT(), dir)
	b, _ := fakeFirewall(t, newFakeNFT(), dir)
	c, _ := fakeFirewall(t, newFakeNFT(), dir)
	ha := a.Lock()
	if ha.f == nil || ha.gen == "gen:" {
		t.Fatalf("lock file %v, generation %q", ha.f, ha.gen)
	}
	removed := ha.gen
	got := make(chan *Lock)
	go func() { got <- b.Lock() }()
	time.Sleep(50 * time.Millisecond) // b waits on a's file
	if err := ha.RemoveFile(); err != nil {
		t.Fatal(err)
	}
	// Gone while a holds the lock (once a unlocks, b may make a new one at
	// once: checking after the unlock raced with it).
	if _, err := os.Stat(a.lockPath); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("lock file after removeFile: %v", err)
	}
	ha.Unlock()
	var hb *Lock
	select {
	case hb = <-got:
	case <-time.After(5 * time.Second):
		t.Fatal("the waiting firewall did not get the lock")
	}
	if hb.f == nil {
		t.Fatal("the waiting firewall went on without a lock file")
	}
	var held, at unix.Stat_t
	if err := unix.Fstat(int(hb.f.Fd()), &held); err != nil {
		t.Fatal(err)
	}
	if err := unix.Stat(b.lockPath, &at); err != nil || held.Ino != at.Ino {
		t.Fatalf("the waiting firewall holds a file no longer at %s: %v", b.lockPath, err)
	}
	if hb.gen == removed || hb.gen == "gen:" {
		t.Fatalf("generation %q after the removal of %q", hb.gen, removed)
	}
	// c excludes b: they lock the same file.
	cgot := make(chan struct{})
	go func() {
		hc := c.Lock()
		close(cgot)
		hc.Unlock()
	}()
	select {
	case <-cgot:
		t.Fatal("a third firewall took the lock while the second held it")
	case <-time.After(100 * time.Millisecond):
	}
	hb.Unlock()
	select {
	case <-cgot:
	case <-time.After(5 * time.Second):
		t.Fatal("the third firewall did not get the lock")
	}
}

// TestSweepLockFiles: the lock files of tables that no longer exist go;
// a live table's, one somebody holds, and anything that is not a
// launcher's lock file (another name, a symbolic link) stay.
func TestSweepLockFiles(t *testing.T) {
	dir := t.TempDir()
	f := newFakeNFT()
	f.AddTable(&nftables.Table{Name: "rayito_localvm_live", Family: nftables.TableFamilyINet})
	if err := f.Flush(); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"rayito_localvm_live.lock", "rayito_localvm_dead.lock", "rayito_localvm.lock",
		"rayito_localvm_held.lock", "other.lock", "rayito_localvm_dead.txt", "rayito_localvm_BAD!.lock", "target"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("gen\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(filepath.Join(dir, "target"), filepath.Join(dir, "rayito_localvm_lnk.lock")); err != nil {
		t.Fatal(err)
	}
	isTable := func(name string) bool { // what the launcher names its tables
		return slices.Contains([]string{"rayito_localvm", "rayito_localvm_live", "rayito_localvm_dead", "rayito_localvm_held", "rayito_localvm_lnk"}, name)
	}
	held, err := os.Open(filepath.Join(dir, "rayito_localvm_held.lock"))
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	if err := unix.Flock(int(held.Fd()), unix.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	if n := SweepLockFiles(dir, func() (NFT, error) { return f, nil }, isTable); n != 2 {
		t.Errorf("swept %d files, want 2", n)
	}
	var left []string
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		left = append(left, e.Name())
	}
	want := []string{"other.lock", "rayito_localvm_BAD!.lock", "rayito_localvm_dead.txt", "rayito_localvm_held.lock", "rayito_localvm_live.lock", "rayito_localvm_lnk.lock", "target"}
	if !slices.Equal(left, want) {
		t.Errorf("left %q, want %q", left, want)
	}
	// Without a table listing nothing goes.
	if err := os.WriteFile(filepath.Join(dir, "rayito_localvm_dead.lock"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if n := SweepLockFiles(dir, func() (NFT, error) { return nil, errors.New("no netlink") }, isTable); n != 0 {
		t.Errorf("swept %d files without a table listing", n)
	}
}

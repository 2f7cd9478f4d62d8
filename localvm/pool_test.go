package localvm

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/nftables"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/rayito-dev/rayito/localvm/internal/registry"
	"github.com/rayito-dev/rayito/proto/microvmsapi"
)

// These tests run the pool of pre-booted sandboxes (Options.Prebooted)
// with real sandboxes. They need root: the pool needs the root platform.

// newPoolPlatform is newRealPlatform with a pool of n pre-booted
// sandboxes.
func newPoolPlatform(t *testing.T, dir, subnet string, n int) *realPlatform {
	t.Helper()
	if testing.Short() {
		t.Skip("launches real sandboxes")
	}
	if os.Geteuid() != 0 {
		t.Skip("the pool of pre-booted sandboxes needs the root platform (run the tests as root)")
	}
	if dir == "" {
		dir = t.TempDir()
	}
	s, err := openPoolPlatform(t.Context(), dir, subnet, n, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	if !s.Privileged() {
		_ = s.Close(context.Background())
		t.Skip("the pool needs a privileged platform (namespaces and cgroups)")
	}
	p := &realPlatform{s: s, dir: dir}
	p.base, p.stop = serve(t, s)
	return p
}

// openPoolPlatform opens a platform with n pre-booted sandboxes on dir and
// subnet (log nil: the platform's logs go to stderr).
func openPoolPlatform(ctx context.Context, dir, subnet string, n int, log *slog.Logger) (*Server, error) {
	if log == nil {
		log = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	opts, err := normalize(Options{StateDir: dir, Prebooted: n, Logger: log})
	if err != nil {
		return nil, err
	}
	return open(ctx, opts, func(scope string) (deps, error) {
		return wire(opts, wireConfig{scope: scope, subnet: netip.MustParsePrefix(subnet)})
	})
}

// waitPool waits until the pool holds n ready sandboxes.
func waitPool(t *testing.T, s *Server, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if ready, _ := s.Prebooted(); ready == n {
			return
		}
		if time.Now().After(deadline) {
			ready, target := s.Prebooted()
			t.Fatalf("pool: %d ready of %d, want %d", ready, target, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// pidsRoot is the directory of the scope's sandbox cgroups in the pids
// hierarchy (cgroup v1) or the unified one (v2).
func pidsRoot(scope string) string {
	if _, err := os.Stat("/sys/fs/cgroup/pids"); err == nil {
		return "/sys/fs/cgroup/pids/rayito-localvm-" + scope
	}
	return "/sys/fs/cgroup/rayito-localvm-" + scope
}

// sandboxIDs lists the ids of the scope's sandboxes that have a cgroup.
func sandboxIDs(scope string) []string {
	ents, _ := os.ReadDir(pidsRoot(scope))
	var out []string
	for _, e := range ents {
		if e.IsDir() && strings.HasPrefix(e.Name(), "microvm-") {
			out = append(out, e.Name())
		}
	}
	return out
}

// poolIDs lists the pooled sandboxes: those with a cgroup that the
// registry does not know as microVMs.
func poolIDs(s *Server) []string {
	var out []string
	for _, id := range sandboxIDs(s.Scope()) {
		if _, err := s.reg.Get(id); errors.Is(err, registry.ErrNotFound) {
			out = append(out, id)
		}
	}
	return out
}

// cgroupPids lists the processes of sandbox id.
func cgroupPids(scope, id string) []int {
	b, _ := os.ReadFile(filepath.Join(pidsRoot(scope), id, "cgroup.procs"))
	var out []int
	for _, f := range strings.Fields(string(b)) {
		if n, err := strconv.Atoi(f); err == nil {
			out = append(out, n)
		}
	}
	return out
}

// vethOf is the host-side veth of sandbox id (the launcher's naming).
func vethOf(scope, id string) string {
	sum := sha256.Sum256([]byte(id))
	return "rs" + scope + "-" + hex.EncodeToString(sum[:4])
}

// uidBlocksOf lists the machine-wide uid block files naming id.
func uidBlocksOf(id string) []string {
	ents, _ := os.ReadDir("/run/rayito/localvm/uids")
	var out []string
	for _, e := range ents {
		if b, err := os.ReadFile(filepath.Join("/run/rayito/localvm/uids", e.Name())); err == nil && bytes.Contains(b, []byte(id)) {
			out = append(out, e.Name())
		}
	}
	return out
}

// nftRulesOf counts the per-sandbox nftables rules of id in the scope's
// table.
func nftRulesOf(t *testing.T, scope, id string) int {
	t.Helper()
	c, err := nftables.New()
	if err != nil {
		t.Fatal(err)
	}
	tbl := &nftables.Table{Name: "rayito_localvm_" + scope, Family: nftables.TableFamilyINet}
	n := 0
	for _, ch := range []string{"egress", "postrouting"} {
		rules, err := c.GetRules(tbl, &nftables.Chain{Name: ch, Table: tbl})
		if err != nil {
			continue // no table, no chain: no rule
		}
		for _, r := range rules {
			if bytes.Contains(r.UserData, []byte(id)) {
				n++
			}
		}
	}
	return n
}

// conntrackOf lists the conntrack entries whose original source or
// destination is addr.
func conntrackOf(t *testing.T, addr string) []*netlink.ConntrackFlow {
	t.Helper()
	flows, err := netlink.ConntrackTableList(netlink.ConntrackTable, unix.AF_INET)
	if err != nil {
		t.Fatalf("conntrack: %v", err)
	}
	ip := net.ParseIP(addr)
	var out []*netlink.ConntrackFlow
	for _, f := range flows {
		if f.Forward.SrcIP.Equal(ip) || f.Forward.DstIP.Equal(ip) {
			out = append(out, f)
		}
	}
	return out
}

// leftovers lists what is left of sandbox id on the machine.
func leftovers(t *testing.T, scope, dir, id string, pids []int) []string {
	t.Helper()
	var left []string
	if _, err := os.Stat(filepath.Join(pidsRoot(scope), id)); err == nil {
		left = append(left, "cgroup")
	}
	for _, pid := range pids {
		if syscall.Kill(pid, 0) == nil {
			left = append(left, "process "+strconv.Itoa(pid))
		}
	}
	if _, err := net.InterfaceByName(vethOf(scope, id)); err == nil {
		left = append(left, "veth "+vethOf(scope, id))
	}
	if n := nftRulesOf(t, scope, id); n > 0 {
		left = append(left, fmt.Sprintf("%d nft rules", n))
	}
	if b := uidBlocksOf(id); len(b) > 0 {
		left = append(left, "uid block "+strings.Join(b, ","))
	}
	if _, err := os.Stat(filepath.Join(dir, "vms", id)); err == nil {
		left = append(left, "directory")
	}
	return left
}

// scopeLeftovers lists what is left on the machine of a platform's scope
// once it closed with no sandbox: its nftables table and the table's lock
// file, its scope claim, its cgroup parents, its veths.
func scopeLeftovers(t *testing.T, scope string) []string {
	t.Helper()
	var left []string
	c, err := nftables.New()
	if err != nil {
		t.Fatal(err)
	}
	tables, err := c.ListTablesOfFamily(nftables.TableFamilyINet)
	if err != nil {
		t.Fatal(err)
	}
	for _, tbl := range tables {
		if tbl.Name == "rayito_localvm_"+scope {
			left = append(left, "nftables table "+tbl.Name)
		}
	}
	for _, p := range []string{"/run/rayito/localvm/nft/rayito_localvm_" + scope + ".lock", "/run/rayito/localvm/scopes/" + scope} {
		if _, err := os.Lstat(p); err == nil {
			left = append(left, p)
		}
	}
	cgroups, _ := filepath.Glob("/sys/fs/cgroup/*/rayito-localvm-" + scope)
	if _, err := os.Stat("/sys/fs/cgroup/rayito-localvm-" + scope); err == nil {
		cgroups = append(cgroups, "/sys/fs/cgroup/rayito-localvm-"+scope)
	}
	left = append(left, cgroups...)
	links, err := dumpAgain(netlink.LinkList)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range links {
		if strings.HasPrefix(l.Attrs().Name, "rs"+scope+"-") {
			left = append(left, "veth "+l.Attrs().Name)
		}
	}
	return left
}

// dumpAgain asks a netlink dump again when links or routes changed under
// it (NLM_F_DUMP_INTR: other tests' sandboxes come and go meanwhile).
func dumpAgain[T any](dump func() (T, error)) (T, error) {
	for i := 0; ; i++ {
		out, err := dump()
		if !errors.Is(err, netlink.ErrDumpInterrupted) || i == 9 {
			return out, err
		}
	}
}

// waitGone waits until nothing of the sandboxes is left.
func waitGone(t *testing.T, scope, dir string, pids map[string][]int) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		var left []string
		for id, ps := range pids {
			for _, l := range leftovers(t, scope, dir, id, ps) {
				left = append(left, id+": "+l)
			}
		}
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("left behind: %v", left)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// exec runs `sh -c script` in the sandbox through the proxy and returns
// its stdout and exit code.
func (p *realPlatform) exec(t *testing.T, v vm, script string) (string, int) {
	t.Helper()
	res := p.start(t, v, script)
	defer res.Body.Close()
	var out bytes.Buffer
	code := -1
	for {
		var hdr [5]byte
		if _, err := io.ReadFull(res.Body, hdr[:]); err != nil {
			t.Fatalf("exec %q: %v", script, err)
		}
		msg := make([]byte, binary.BigEndian.Uint32(hdr[1:]))
		if _, err := io.ReadFull(res.Body, msg); err != nil {
			t.Fatalf("exec %q: %v", script, err)
		}
		if hdr[0]&2 != 0 { // end of the stream
			if code < 0 {
				t.Fatalf("exec %q: no end event (%s)", script, msg)
			}
			return out.String(), code
		}
		var ev struct {
			Data *struct {
				Stdout []byte `json:"stdout"`
			} `json:"data"`
			End *struct {
				ExitCode int `json:"exitCode"`
			} `json:"end"`
		}
		if err := json.Unmarshal(msg, &ev); err != nil {
			t.Fatalf("exec %q: %v", script, err)
		}
		if ev.Data != nil {
			out.Write(ev.Data.Stdout)
		}
		if ev.End != nil {
			code = ev.End.ExitCode
		}
	}
}

// guestIP is the guest address in the microVM's state file.
func (p *realPlatform) guestIP(t *testing.T, id string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(p.dir, "vms", id+".json"))
	if err != nil {
		t.Fatal(err)
	}
	var sf struct {
		Record struct {
			GuestIP string `json:"guest_ip"`
		} `json:"record"`
	}
	if err := json.Unmarshal(b, &sf); err != nil || sf.Record.GuestIP == "" {
		t.Fatalf("state file: %v %s", err, b)
	}
	return sf.Record.GuestIP
}

// internet is the microVM input asking for Internet access.
var internet = microvmsapi.RunMicrovmInput{EgressNetworkConnectors: []string{microvmsapi.ConnectorARN("us-east-1", microvmsapi.ConnectorInternet)}}

// TestPrebootedHandOut: RunMicrovm hands out a pre-booted sandbox (one of
// the pool's, not a new one), which answers commands; the pool refills;
// pooled sandboxes are not listed.
func TestPrebootedHandOut(t *testing.T) {
	p := newPoolPlatform(t, "", "10.219.9.0/24", 2)
	defer p.close(t, false)
	waitPool(t, p.s, 2)
	pool := poolIDs(p.s)
	if len(pool) != 2 {
		t.Fatalf("pooled sandboxes %v", pool)
	}
	if _, body := do(t, http.DefaultClient, "GET", p.base+microvmsapi.PathMicrovms, "", ""); strings.Contains(body, pool[0]) || strings.Contains(body, pool[1]) {
		t.Fatalf("pooled sandboxes listed: %s", body)
	}

	start := time.Now()
	v := p.runVM(t, microvmsapi.RunMicrovmInput{}, nil)
	out, code := p.exec(t, v, "echo ok")
	took := time.Since(start)
	if out != "ok\n" || code != 0 {
		t.Fatalf("echo ok: %q %d", out, code)
	}
	if !slices.Contains(pool, v.MicrovmID) {
		t.Fatalf("%s is not one of the pool's %v", v.MicrovmID, pool)
	}
	t.Logf("pre-booted: create (with an auth token) → echo ok in %s", took.Round(time.Microsecond))
	if took > 2*time.Second {
		t.Fatalf("a hand-out took %s", took)
	}
	waitPool(t, p.s, 2)

	// For comparison, a sandbox booted on request (the pool is bypassed
	// while it is empty: take both first).
	a := p.runVM(t, microvmsapi.RunMicrovmInput{}, nil)
	b := p.runVM(t, microvmsapi.RunMicrovmInput{}, nil)
	start = time.Now()
	c := p.runVM(t, microvmsapi.RunMicrovmInput{}, nil)
	if out, _ := p.exec(t, c, "echo ok"); out != "ok\n" {
		t.Fatalf("echo ok: %q", out)
	}
	t.Logf("booted on request (pool empty): create → echo ok in %s", time.Since(start).Round(time.Microsecond))
	for _, x := range []vm{a, b} {
		if out, _ := p.exec(t, x, "echo ok"); out != "ok\n" {
			t.Fatalf("echo ok: %q", out)
		}
	}
}

// TestPrebootedShareNothing: two successive users of pre-booted sandboxes
// share nothing. The subnet has one /30, so the second sandbox gets the
// first's freed address: the first had Internet access, the second asked
// for none and has none, and no nftables rule or conntrack entry of the
// first is left.
func TestPrebootedShareNothing(t *testing.T) {
	p := newPoolPlatform(t, "", "10.219.10.0/30", 1)
	defer p.close(t, false)
	scope := p.s.Scope()
	// An address out there (TEST-NET-3): the connection attempt leaves
	// the host when the sandbox has Internet access (whether anything
	// answers does not matter: conntrack sees the flow).
	gw := ""
	if hasDefaultRoute(t) {
		gw = "203.0.113.1"
	}

	waitPool(t, p.s, 1)
	u1 := p.runVM(t, internet, nil)
	ip := p.guestIP(t, u1.MicrovmID)
	host1, _ := p.exec(t, u1, "hostname")
	if out, code := p.exec(t, u1, "echo secret > /home/user/secret && echo secret > /tmp/secret && cat /home/user/secret"); code != 0 || out != "secret\n" {
		t.Fatalf("write: %q %d", out, code)
	}
	sleeper := p.start(t, u1, "exec sleep 1000")
	defer sleeper.Body.Close()
	if n := nftRulesOf(t, scope, u1.MicrovmID); n != 2 {
		t.Fatalf("the first sandbox (Internet access) has %d nft rules, want 2", n)
	}
	if gw != "" {
		// A connection attempt to the Internet leaves the sandbox:
		// conntrack has its flow.
		p.exec(t, u1, "timeout 1 bash -c 'exec 3<>/dev/tcp/"+gw+"/9' 2>/dev/null; true")
		if !hasEgressFlow(t, ip) {
			t.Fatalf("no conntrack entry from the first sandbox (%s) with Internet access", ip)
		}
	}
	var before []uint16 // the platform's connections to the first rayd
	for _, f := range conntrackOf(t, ip) {
		before = append(before, f.Forward.SrcPort)
	}

	pids1 := cgroupPids(scope, u1.MicrovmID)
	if _, body := do(t, http.DefaultClient, "DELETE", p.base+microvmsapi.MicrovmPath(u1.MicrovmID), "", ""); body != "{}" {
		t.Fatalf("DELETE: %s", body)
	}
	waitState(t, p.base, u1.MicrovmID, microvmsapi.StateTerminated)
	if n := nftRulesOf(t, scope, u1.MicrovmID); n != 0 {
		t.Fatalf("%d nft rules of the first sandbox left", n)
	}
	if hasEgressFlow(t, ip) {
		t.Fatalf("conntrack entries of the first sandbox's egress left: %v", conntrackOf(t, ip))
	}
	for _, f := range conntrackOf(t, ip) {
		if slices.Contains(before, f.Forward.SrcPort) && f.Forward.DstIP.Equal(net.ParseIP(ip)) {
			t.Fatalf("a conntrack entry of the first sandbox left: %v", f)
		}
	}
	for _, pid := range pids1 {
		if syscall.Kill(pid, 0) == nil {
			t.Fatalf("process %d of the first sandbox alive", pid)
		}
	}

	// The pool refills on the freed /30.
	waitPool(t, p.s, 1)
	u2 := p.runVM(t, microvmsapi.RunMicrovmInput{}, nil)
	if u2.MicrovmID == u1.MicrovmID {
		t.Fatal("one id twice")
	}
	if ip2 := p.guestIP(t, u2.MicrovmID); ip2 != ip {
		t.Fatalf("the second sandbox got %s, not the first's %s (the subnet has one /30)", ip2, ip)
	}
	if host2, _ := p.exec(t, u2, "hostname"); host2 == host1 || host2 == "" {
		t.Fatalf("hostnames %q and %q", host1, host2)
	}
	if out, code := p.exec(t, u2, "cat /home/user/secret /tmp/secret 2>/dev/null"); code == 0 || out != "" {
		t.Fatalf("the first user's files are readable: %q %d", out, code)
	}
	if out, _ := p.exec(t, u2, "ls -a /home/user /tmp"); strings.Contains(out, "secret") {
		t.Fatalf("the first user's files are visible: %q", out)
	}
	if out, _ := p.exec(t, u2, "for f in /proc/[0-9]*/cmdline; do tr '\\0' ' ' < $f; echo; done"); strings.Contains(out, "sleep 1000") {
		t.Fatalf("the first user's process is visible: %q", out)
	}
	if n := nftRulesOf(t, scope, u2.MicrovmID); n != 0 {
		t.Fatalf("the second sandbox (no Internet access) has %d nft rules", n)
	}
	if gw != "" {
		if _, code := p.exec(t, u2, "timeout 1 bash -c 'exec 3<>/dev/tcp/"+gw+"/9'"); code == 0 {
			t.Fatal("the second sandbox connected out without Internet access")
		}
		if hasEgressFlow(t, ip) {
			t.Fatalf("a flow of the second sandbox (no Internet access) left the host: %v", conntrackOf(t, ip))
		}
	}
}

// hasEgressFlow reports whether conntrack has a flow from addr (a
// sandbox's guest address) to anywhere but its host side.
func hasEgressFlow(t *testing.T, addr string) bool {
	t.Helper()
	ip := net.ParseIP(addr)
	for _, f := range conntrackOf(t, addr) {
		if f.Forward.SrcIP.Equal(ip) {
			return true
		}
	}
	return false
}

// hasDefaultRoute reports whether the host has an IPv4 default route.
func hasDefaultRoute(t *testing.T) bool {
	t.Helper()
	routes, err := dumpAgain(func() ([]netlink.Route, error) { return netlink.RouteList(nil, netlink.FAMILY_V4) })
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range routes {
		if r.Dst == nil || r.Dst.IP.IsUnspecified() {
			return true
		}
	}
	t.Log("no IPv4 default route: the egress checks are skipped")
	return false
}

// TestPrebootedCloseLeavesNothing: Close terminates the pool and leaves no
// process, cgroup, veth, nftables rule, uid block or directory of it.
func TestPrebootedCloseLeavesNothing(t *testing.T) {
	p := newPoolPlatform(t, "", "10.219.11.0/24", 2)
	waitPool(t, p.s, 2)
	scope := p.s.Scope()
	pids := map[string][]int{}
	for _, id := range poolIDs(p.s) {
		pids[id] = cgroupPids(scope, id)
		if len(pids[id]) == 0 || len(uidBlocksOf(id)) != 1 {
			t.Fatalf("pooled sandbox %s: pids %v, uid blocks %v", id, pids[id], uidBlocksOf(id))
		}
	}
	if len(pids) != 2 {
		t.Fatalf("pool %v", pids)
	}
	p.close(t, false)
	waitGone(t, scope, p.dir, pids) // Close waited: nothing to wait for
	if ids := sandboxIDs(scope); len(ids) != 0 {
		t.Fatalf("cgroups left: %v", ids)
	}
	if left := scopeLeftovers(t, scope); len(left) > 0 {
		t.Fatalf("the closed platform left %v", left)
	}
}

// TestCloseLeavesNothingOfTheScope: a platform that ran a sandbox, ended
// it and closed (what `rayito local down` does) leaves nothing
// machine-wide: no nftables table or its lock file, no scope claim, no
// cgroup parent, no veth.
func TestCloseLeavesNothingOfTheScope(t *testing.T) {
	p := newRealPlatform(t, "", "10.219.14.0/24", 0)
	scope := p.s.Scope()
	v := p.runVM(t, microvmsapi.RunMicrovmInput{}, nil)
	if out, _ := p.exec(t, v, "echo ok"); out != "ok\n" {
		t.Fatalf("echo ok: %q", out)
	}
	if left := scopeLeftovers(t, scope); len(left) == 0 {
		t.Fatal("a running platform shows nothing of its scope: the check sees nothing")
	}
	p.close(t, false)
	if left := scopeLeftovers(t, scope); len(left) > 0 {
		t.Fatalf("the closed platform left %v", left)
	}
}

// TestPrebootedRaydKilled: a pooled sandbox whose rayd is killed is
// dropped and replaced, never handed out.
func TestPrebootedRaydKilled(t *testing.T) {
	p := newPoolPlatform(t, "", "10.219.12.0/24", 1)
	defer p.close(t, false)
	waitPool(t, p.s, 1)
	scope := p.s.Scope()
	dead := poolIDs(p.s)
	if len(dead) != 1 {
		t.Fatalf("pool %v", dead)
	}
	pids := cgroupPids(scope, dead[0])
	for _, pid := range pids {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	waitGone(t, scope, p.dir, map[string][]int{dead[0]: pids})
	waitPool(t, p.s, 1)
	v := p.runVM(t, microvmsapi.RunMicrovmInput{}, nil)
	if v.MicrovmID == dead[0] {
		t.Fatal("the killed sandbox was handed out")
	}
	if out, _ := p.exec(t, v, "echo ok"); out != "ok\n" {
		t.Fatalf("echo ok: %q", out)
	}
}

// Environment of the helper process of TestPrebootedKilledPlatformSwept:
// a platform with a pool, on the state dir and subnet they name.
const (
	poolChildDirEnv    = "LOCALVM_TEST_POOL_CHILD_DIR"
	poolChildSubnetEnv = "LOCALVM_TEST_POOL_CHILD_SUBNET"
)

// runPoolChild is the helper process: it opens a platform with two
// pre-booted sandboxes, says "ready" once they are, and waits to be
// killed.
func runPoolChild() {
	dir, subnet := os.Getenv(poolChildDirEnv), os.Getenv(poolChildSubnetEnv)
	s, err := openPoolPlatform(context.Background(), dir, subnet, 2, nil)
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	for {
		if ready, _ := s.Prebooted(); ready == 2 {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	fmt.Println("ready")
	select {}
}

// TestPrebootedKilledPlatformSwept: a platform killed (SIGKILL) with its
// pool leaves pre-booted sandboxes running; the next platform on the state
// dir sweeps them at start.
func TestPrebootedKilledPlatformSwept(t *testing.T) {
	if testing.Short() {
		t.Skip("launches real sandboxes")
	}
	if os.Geteuid() != 0 {
		t.Skip("the pool of pre-booted sandboxes needs the root platform (run the tests as root)")
	}
	dir, subnet := t.TempDir(), "10.219.13.0/24"
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), poolChildDirEnv+"="+dir, poolChildSubnetEnv+"="+subnet)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, _ := bufio.NewReader(out).ReadString('\n')
	if line != "ready\n" {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatalf("helper platform: %q", line)
	}
	b, err := os.ReadFile(filepath.Join(dir, "scope"))
	if err != nil {
		t.Fatal(err)
	}
	scope := strings.TrimSpace(string(b))
	pids := map[string][]int{}
	for _, id := range sandboxIDs(scope) {
		pids[id] = cgroupPids(scope, id)
	}
	if len(pids) != 2 {
		t.Fatalf("pool of the helper platform: %v", pids)
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	time.Sleep(100 * time.Millisecond)
	for id, ps := range pids {
		if l := leftovers(t, scope, dir, id, ps); len(l) == 0 {
			t.Fatalf("%s vanished with its platform: nothing for the sweep to do", id)
		}
	}

	p := newPoolPlatform(t, dir, subnet, 0)
	defer p.close(t, false)
	if p.s.Scope() != scope {
		t.Fatalf("scope %s, was %s", p.s.Scope(), scope)
	}
	waitGone(t, scope, dir, pids)
}

//go:build linux

package launcher

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// TestAssign: a sandbox launched without Internet access and with the
// default limits gets Internet access and its limits written at Assign;
// other limits are refused; its conntrack entries go with it.
func TestAssign(t *testing.T) {
	l := privileged(t, "")
	if err := l.PoolSupport(); err != nil {
		t.Fatal(err)
	}
	inst := launch(t, l, newSpec(t, l))
	rec := inst.Record()
	if rec.Internet || l.fw.HasRules(rec.ID) {
		t.Fatal("launched with Internet access")
	}
	ctx := context.Background()
	if err := inst.Assign(ctx, Assignment{MemoryBytes: 1 << 30}); !errors.Is(err, ErrAssignLimits) {
		t.Fatalf("other limits: %v", err)
	}
	if l.fw.HasRules(rec.ID) {
		t.Fatal("a refused Assign changed the sandbox")
	}
	// Something changed a limit behind the launcher's back: Assign writes
	// them again.
	pidsMax := filepath.Join(pidsDir(t, l, rec.ID), "pids.max")
	if err := os.WriteFile(pidsMax, []byte("5"), 0); err != nil {
		t.Fatal(err)
	}
	if err := inst.Assign(ctx, Assignment{Internet: true}); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(pidsMax); strings.TrimSpace(string(b)) != strconv.Itoa(DefaultPidsMax) {
		t.Fatalf("pids.max %s after Assign", b)
	}
	if rec := inst.Record(); !rec.Internet || !l.fw.HasRules(rec.ID) {
		t.Fatalf("no Internet access after Assign: %+v", rec)
	}
	if err := inst.Assign(ctx, Assignment{}); err == nil {
		t.Fatal("Assign took Internet access away")
	}

	// A conntrack entry of the guest address (as the platform's
	// connections to rayd leave) goes with the sandbox.
	token := install(t, inst)
	_ = token
	guest := netip.MustParseAddr(rec.GuestIP)
	if n := flows(t, guest); n == 0 {
		t.Fatal("no conntrack entry of the sandbox's address")
	}
	if err := inst.Terminate(ctx); err != nil {
		t.Fatal(err)
	}
	if n := flows(t, guest); n != 0 {
		t.Fatalf("%d conntrack entries of %s left", n, guest)
	}
	if err := inst.Assign(ctx, Assignment{}); !errors.Is(err, ErrGone) {
		t.Fatalf("Assign after Terminate: %v", err)
	}
}

// pidsDir is the sandbox's cgroup directory holding pids.max.
func pidsDir(t *testing.T, l *Launcher, id string) string {
	t.Helper()
	for _, d := range l.cg.Dirs(id) {
		if _, err := os.Stat(filepath.Join(d, "pids.max")); err == nil {
			return d
		}
	}
	t.Fatal("no pids.max")
	return ""
}

// flows counts the conntrack entries whose original source or destination
// is addr.
func flows(t *testing.T, addr netip.Addr) int {
	t.Helper()
	list, err := netlink.ConntrackTableList(netlink.ConntrackTable, unix.AF_INET)
	if err != nil {
		t.Fatal(err)
	}
	ip := net.IP(addr.AsSlice())
	n := 0
	for _, f := range list {
		if f.Forward.SrcIP.Equal(ip) || f.Forward.DstIP.Equal(ip) {
			n++
		}
	}
	return n
}

// TestSweepConntrack: Sweep deletes the conntrack entries of the subnet's
// free addresses (what a killed platform left) and keeps those of live
// sandboxes.
func TestSweepConntrack(t *testing.T) {
	l := privileged(t, "")
	inst := launch(t, l, newSpec(t, l))
	install(t, inst) // the platform's connections to rayd
	live := netip.MustParseAddr(inst.Record().GuestIP)
	stale := netip.MustParseAddr("10.214.255.250") // a /30 no sandbox has
	flow := &netlink.ConntrackFlow{
		FamilyType: unix.AF_INET,
		Forward:    netlink.IPTuple{SrcIP: net.IP(stale.AsSlice()), DstIP: net.ParseIP("203.0.113.9").To4(), Protocol: unix.IPPROTO_TCP, SrcPort: 40000, DstPort: 80},
		Reverse:    netlink.IPTuple{SrcIP: net.ParseIP("203.0.113.9").To4(), DstIP: net.IP(stale.AsSlice()), Protocol: unix.IPPROTO_TCP, SrcPort: 80, DstPort: 40000},
		TimeOut:    300,
		ProtoInfo:  &netlink.ProtoInfoTCP{State: 3}, // ESTABLISHED
	}
	if err := netlink.ConntrackCreate(netlink.ConntrackTable, unix.AF_INET, flow); err != nil {
		t.Skipf("cannot create a conntrack entry here: %v", err)
	}
	if flows(t, stale) != 1 || flows(t, live) == 0 {
		t.Fatalf("before the sweep: %d stale, %d live entries", flows(t, stale), flows(t, live))
	}
	if err := l.Sweep([]Record{inst.Record()}); err != nil {
		t.Fatal(err)
	}
	if n := flows(t, stale); n != 0 {
		t.Fatalf("%d entries of a free address left", n)
	}
	if flows(t, live) == 0 {
		t.Fatal("the sweep deleted a live sandbox's entries")
	}
}

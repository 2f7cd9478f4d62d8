//go:build linux

package launcher

import (
	"net/netip"
	"os"
	"strconv"
	"strings"
	"testing"
)

func TestParseStat(t *testing.T) {
	line := "1234 (we) ird (name)) S 42 1234 1234 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000 10"
	ppid, start, err := parseStat([]byte(line))
	if err != nil || ppid != 42 || start != 987654 {
		t.Fatalf("got %d %d %v", ppid, start, err)
	}
	for _, bad := range []string{"", "1 (x", "1 (x) S 2 3", "1 (x) S notanumber 1 1 0 -1 0 0 0 0 0 0 0 0 0 0 0 0 0 5"} {
		if _, _, err := parseStat([]byte(bad)); err == nil {
			t.Errorf("parseStat(%q) succeeded", bad)
		}
	}
}

func TestValidID(t *testing.T) {
	for _, ok := range []string{"microvm-0b0c8a34-7d36-4a63-9b1f-3f0f1f2f3f4f", "a", "A.b_c-1"} {
		if err := validID(ok); err != nil {
			t.Errorf("validID(%q): %v", ok, err)
		}
	}
	for _, bad := range []string{"", "-x", ".x", "../x", "a/b", "a b", "a\x00", strings.Repeat("a", maxIDLen+1), "é"} {
		if validID(bad) == nil {
			t.Errorf("validID(%q) succeeded", bad)
		}
	}
}

func TestNames(t *testing.T) {
	n, err := namesFor("")
	if err != nil || n.cgroupParent != "rayito-localvm" || n.vethPrefix != "rl-" || n.table != "rayito_localvm" {
		t.Fatalf("default names %+v %v", n, err)
	}
	v := n.vethName("microvm-1")
	if len(v) != 11 || !strings.HasPrefix(v, "rl-") || !n.isVeth(v) || n.vethName("microvm-1") != v || n.vethName("microvm-2") == v {
		t.Fatalf("veth name %q", v)
	}
	if n.isVeth("rl-zzzzzzzz") || n.isVeth("rl-abc") || n.isVeth("eth0") {
		t.Fatal("isVeth accepts foreign names")
	}
	s, err := namesFor("abc")
	if err != nil || len(s.vethName("x")) > 15 || s.isVeth(n.vethName("x")) || n.isVeth(s.vethName("x")) {
		t.Fatalf("scoped names %+v %v", s, err)
	}
	// A platform's scope (4 characters, derived from its state dir) and a
	// test scope of 3 never claim each other's veths.
	d, err := namesFor("abcd")
	if err != nil || len(d.vethName("x")) != 15 || d.isVeth(s.vethName("x")) || s.isVeth(d.vethName("x")) || d.table == s.table || d.cgroupParent == s.cgroupParent {
		t.Fatalf("derived-scope names %+v %v", d, err)
	}
	for _, bad := range []string{"abcde", "A", "a-", "l "} {
		if _, err := namesFor(bad); err == nil {
			t.Errorf("namesFor(%q) succeeded", bad)
		}
	}
}

func TestSubnetSlots(t *testing.T) {
	p := netip.MustParsePrefix("10.213.0.0/16")
	if slotCount(p) != 16384 {
		t.Fatal(slotCount(p))
	}
	slot, host, guest := subnetSlot(p, 0)
	if slot.String() != "10.213.0.0/30" || host.String() != "10.213.0.1" || guest.String() != "10.213.0.2" {
		t.Fatal(slot, host, guest)
	}
	slot, host, guest = subnetSlot(p, 16383)
	if slot.String() != "10.213.255.252/30" || host.String() != "10.213.255.253" || guest.String() != "10.213.255.254" {
		t.Fatal(slot, host, guest)
	}
	for _, bad := range []string{"10.0.0.0/31", "fd00::/64", "10.0.0.0/7"} {
		if _, err := checkSubnet(netip.MustParsePrefix(bad)); err == nil {
			t.Errorf("checkSubnet(%s) succeeded", bad)
		}
	}
	if got, _ := checkSubnet(netip.Prefix{}); got != DefaultSubnet {
		t.Fatal(got)
	}
}

func TestCheckDir(t *testing.T) {
	for _, ok := range []string{"/var/lib/x/sb/1", "/var/lib/x/a"} {
		if err := checkDir("/var/lib/x", ok); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "/var/lib/x", "/var/lib", "/", "/var/lib/xy/1", "/var/lib/x/../y", "rel/x", "/var/lib/x/a/"} {
		if checkDir("/var/lib/x", bad) == nil {
			t.Errorf("checkDir(%q) succeeded", bad)
		}
	}
}

// TestTableName: the names of the launcher's tables, whose lock files
// the start-up sweep may remove, and nothing else.
func TestTableName(t *testing.T) {
	for _, scope := range []string{"", "a", "tst", "z9z9"} {
		n, err := namesFor(scope)
		if err != nil || !isTableName(n.table) {
			t.Errorf("scope %q: table %q not recognized (%v)", scope, n.table, err)
		}
	}
	for _, name := range []string{"rayito_localvm_", "rayito_localvm_BAD!", "rayito_localvm_toolong", "rayito_localvmx", "other", "rayd_egress"} {
		if isTableName(name) {
			t.Errorf("%q taken for a launcher's table", name)
		}
	}
}

// exists reports whether path exists (without following a last symlink).
func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

// FuzzParseStat: whatever a sandbox names its processes (the comm field,
// spaces, parentheses and newlines included), the ppid and start time
// are read from the fields after it.
func FuzzParseStat(f *testing.F) {
	f.Add("bash", 42, uint64(987654))
	f.Add("a) S 1 2 (b", 1, uint64(0))
	f.Fuzz(func(t *testing.T, comm string, ppid int, start uint64) {
		if ppid < 0 || len(comm) > 64 {
			return
		}
		line := "7 (" + comm + ") S " + strconv.Itoa(ppid) + " 7 7 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 " +
			strconv.FormatUint(start, 10) + " 0 0\n"
		gotPpid, gotStart, err := parseStat([]byte(line))
		if err != nil || gotPpid != ppid || gotStart != start {
			t.Fatalf("parseStat(%q) = %d, %d, %v", line, gotPpid, gotStart, err)
		}
		_, _, _ = parseStat([]byte(comm)) // no panic on anything
	})
}

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
	"syscall"
	"testing"
	"time"

	"github.com/google/nftables"

	"github.com/rayito-dev/rayito/localvm/internal/cgroup"
)

// TestIsolatedSandbox launches a sandbox and checks, from inside, what its
// code sees: identity, hostname, filesystem, pid namespace.
func TestIsolatedSandbox(t *testing.T) {
	l := privileged(t, "")
	spec := newSpec(t, l)
	spec.Env = []string{"RAYITO_TEST_ENV=1", "RAYITO_ALLOW_ROOT=1"}
	inst := launch(t, l, spec)
	rec := inst.Record()
	if !rec.Privileged || rec.Pid <= 1 || rec.PidStartTime == 0 || rec.Veth != testNames.vethName(spec.ID) || len(rec.Cgroups) == 0 {
		t.Fatalf("record %+v", rec)
	}
	if inst.APIAddr() != rec.GuestIP+":8080" || inst.HooksAddr() != rec.GuestIP+":9000" {
		t.Fatalf("addresses %s %s", inst.APIAddr(), inst.HooksAddr())
	}
	if a, err := inst.GuestAddr(3000); err != nil || a != rec.GuestIP+":3000" {
		t.Fatalf("GuestAddr(3000) = %q, %v", a, err)
	}
	if !testSubnet.Contains(netip4(t, rec.GuestIP)) {
		t.Fatalf("guest %s outside %s", rec.GuestIP, testSubnet)
	}

	h := health(t, inst.APIAddr())
	if len(h) == 0 {
		t.Fatal("empty Health answer")
	}
	token := install(t, inst)

	// The brief's probe, then more.
	out, end := run(t, inst.APIAddr(), token, `id -un; cat /etc/hostname; ls /root /home 2>&1; cat /proc/1/cmdline | tr '\0' ' '; echo; ls /sys 2>&1`)
	if end == nil || end["exited"] != true {
		t.Fatalf("end %v", end)
	}
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	want := []string{
		"user",
		hostnameFor(spec.ID),
		// /root is root's home, private (nothing of the host's).
		"/home:",
		"user",
		"ls: cannot open directory '/root': Permission denied",
		InitArgv0 + " " + spec.ID + " ",
		"ls: cannot access '/sys': No such file or directory",
	}
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Fatalf("sandbox sees:\n%s\nwant:\n%s", out, strings.Join(want, "\n"))
	}

	script := `
echo "== uname =="; uname -n
echo "== state =="; ls ` + l.opts.StateDir + ` 2>&1
echo "== dir =="; ls ` + spec.Dir + ` 2>&1
echo "== ps =="; ps -e -o pid=,comm=
echo "== home =="; touch /home/user/f && stat -c '%u:%g %a' /home/user /home/user/f
echo "== usr =="; touch /usr/x 2>&1; touch /etc/x 2>&1; touch /x 2>&1
echo "== tmp =="; touch /tmp/x /var/tmp/x /dev/shm/x && stat -c '%a' /tmp /var/tmp /dev/shm
echo "== dev =="; ls /dev | tr '\n' ' '; echo; echo hi > /dev/null && echo null-ok
echo "== pts =="; ls -l /dev/ptmx | cut -c1; ls /dev/pts | tr '\n' ' '; echo
echo "== resolv =="; grep -c '^nameserver ' /etc/resolv.conf
echo "== env =="; cat /proc/1/environ 2>&1 | head -c 200; echo
echo "== mounts =="; grep -c . /proc/self/mountinfo; grep -E ' (/work|/home/user/[^ ]) ' /proc/self/mountinfo || echo none
echo "== roothome =="; grep ' /root ' /proc/self/mountinfo | grep -c ' - tmpfs '
echo "== localbin =="; grep ' /usr/local/bin ' /proc/self/mountinfo | grep -c ' ro,.* - overlay '; stat -c '%a' /usr/local/bin/sudo; sudo id -u 2>&1
echo "== passwd =="; getent passwd user
echo "== net =="; cat /sys/class/net 2>&1 | head -1; grep -c . /proc/net/dev
echo "== end =="
`
	out, _ = run(t, inst.APIAddr(), token, script)
	check := func(name string, ok func(string) bool) {
		t.Helper()
		if s := section(out, name); !ok(s) {
			t.Errorf("%s: %q", name, s)
		}
	}
	check("uname", func(s string) bool { return s == hostnameFor(spec.ID) })
	check("state", func(s string) bool { return strings.Contains(s, "No such file or directory") })
	check("dir", func(s string) bool { return strings.Contains(s, "No such file or directory") })
	check("ps", func(s string) bool {
		// Only the sandbox's own processes: rayd (pid 1), sh and ps.
		fields := strings.Fields(s)
		if len(fields) < 4 || len(fields) > 8 || fields[0] != "1" || fields[1] != "rayd" {
			return false
		}
		for i := 0; i < len(fields); i += 2 {
			if pid, err := strconv.Atoi(fields[i]); err != nil || pid > 100 {
				return false
			}
		}
		return true
	})
	check("home", func(s string) bool { return s == "1000:1000 750\n1000:1000 644" })
	check("usr", func(s string) bool {
		return strings.Count(s, "Read-only file system") == 2 && strings.Contains(s, "touch: cannot touch '/x': Permission denied")
	})
	check("tmp", func(s string) bool { return s == "1777\n1777\n1777" })
	check("dev", func(s string) bool {
		for _, n := range []string{"null", "zero", "full", "random", "urandom", "tty", "pts", "ptmx", "shm", "fd", "stdin", "stdout", "stderr", "null-ok"} {
			if !strings.Contains(s, n) {
				return false
			}
		}
		return !strings.Contains(s, "sda") && !strings.Contains(s, "kmsg")
	})
	check("pts", func(s string) bool { return strings.Join(strings.Fields(s), " ") == "l ptmx" })
	check("resolv", func(s string) bool { return s != "0" && s != "" })
	check("env", func(s string) bool { return strings.Contains(s, "Permission denied") }) // uid 1000 cannot read rayd's environment
	check("mounts", func(s string) bool { return strings.HasSuffix(s, "\nnone") })
	// root's home: a tmpfs of its own, nothing of the host's /root.
	check("roothome", func(s string) bool { return s == "1" })
	// /usr/local/bin: the host's, read-only, with the sandbox's sudo
	// (this binary), which works: the spec allows root.
	check("localbin", func(s string) bool { return s == "1\n755\n0" })
	check("passwd", func(s string) bool { return s == "user:x:1000:1000:user:/home/user:/bin/bash" })
	check("net", func(s string) bool { return strings.HasSuffix(s, "\n4") }) // header lines, lo, eth0
	if t.Failed() {
		t.Logf("sandbox output:\n%s", out)
	}

	// Spec.Env reached rayd: it lets clients run as root.
	if out, _ := runAs(t, inst.APIAddr(), token, "root", "id -u"); out != "0\n" {
		t.Errorf("as root with RAYITO_ALLOW_ROOT: %q", out)
	}

	// The init's environment was built from scratch plus Spec.Env (which
	// travelled over the config pipe, not through exec).
	env, err := os.ReadFile("/proc/" + strconv.Itoa(rec.Pid) + "/environ")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(env), "RAYITO_TEST_ENV") || strings.Contains(string(env), "HOSTNAME=") {
		t.Fatalf("init environment carries more than the base: %q", env)
	}

	// The log received rayd's output.
	if log, err := os.ReadFile(spec.LogPath); err != nil || !strings.Contains(string(log), "rayd listening") {
		t.Fatalf("log: %v\n%s", err, log)
	}
	if fi, err := os.Stat(spec.LogPath); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("log mode: %v %v", fi.Mode(), err)
	}

	// Terminate removes the launcher's files and keeps the platform's.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := inst.Terminate(ctx); err != nil {
		t.Fatal(err)
	}
	if err := inst.Terminate(ctx); err != nil {
		t.Fatalf("second Terminate: %v", err)
	}
	if _, err := os.Stat(launcherDir(spec.Dir)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("launcher dir survives: %v", err)
	}
	if _, err := os.Stat(spec.LogPath); err != nil {
		t.Fatalf("log removed: %v", err)
	}
	if code, ok := inst.ExitCode(); !ok || code != 128+int(syscall.SIGKILL) {
		t.Fatalf("ExitCode = %d, %v", code, ok)
	}
}

func netip4(t *testing.T, s string) netip.Addr {
	t.Helper()
	a, err := netip.ParseAddr(s)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// TestNetworkPolicy checks that the sandbox cannot reach the host (input
// from its veth is dropped) while the host reaches the guest, and that the
// table's rules are in place.
func TestNetworkPolicy(t *testing.T) {
	l := privileged(t, "")
	inst := launch(t, l, newSpec(t, l))
	rec := inst.Record()
	token := install(t, inst)

	ln, err := net.Listen("tcp", net.JoinHostPort(rec.HostIP, "0"))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan struct{}, 1)
	go func() {
		if c, err := ln.Accept(); err == nil {
			c.Close()
			accepted <- struct{}{}
		}
	}()
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	out, _ := run(t, inst.APIAddr(), token, `
echo "== self =="; bash -c 'echo > /dev/tcp/127.0.0.1/8080' 2>&1 && echo self-ok
echo "== host =="; timeout 1 bash -c 'echo hi > /dev/tcp/`+rec.HostIP+`/`+port+`' 2>&1; echo "rc=$?"
echo "== route =="; ip route 2>/dev/null || cat /proc/net/route | tail -n +2 | cut -f1,2,3
echo "== end =="`)
	if s := section(out, "self"); !strings.Contains(s, "self-ok") {
		t.Fatalf("the sandbox cannot reach its own loopback: %q", s)
	}
	t.Logf("sandbox output:\n%s", out)
	if s := section(out, "host"); !strings.HasSuffix(s, "rc=124") {
		t.Fatalf("the sandbox reached the host's %s:%s: %q", rec.HostIP, port, s)
	}
	select {
	case <-accepted:
		t.Fatal("the host accepted a connection from the sandbox")
	default:
	}
	if s := section(out, "route"); !strings.Contains(s, "default") && !strings.Contains(s, "00000000") {
		t.Errorf("no default route: %q", s)
	}

	// Sandboxes cannot reach each other, even with Internet access (whose
	// accept rule comes after the drop of everything forwarded into rl-*).
	specB := newSpec(t, l)
	specB.Internet = true
	instB := launch(t, l, specB)
	recB := instB.Record()
	tokenB := install(t, instB)
	probe := func(api, token, target string) string {
		out, _ := run(t, api, token, `timeout 1 bash -c 'echo > /dev/tcp/`+target+`' 2>&1; echo "rc=$?"`)
		return strings.TrimSpace(out)
	}
	if got := probe(instB.APIAddr(), tokenB, rec.GuestIP+"/8080"); got != "rc=124" {
		t.Errorf("sandbox with Internet -> other sandbox: %q", got)
	}
	if got := probe(inst.APIAddr(), token, recB.GuestIP+"/8080"); got != "rc=124" {
		t.Errorf("sandbox -> other sandbox: %q", got)
	}
	if got := probe(instB.APIAddr(), tokenB, rec.HostIP+"/"+port); got != "rc=124" {
		t.Errorf("sandbox with Internet -> another sandbox's host side: %q", got)
	}

	c, err := nftables.New()
	if err != nil {
		t.Fatal(err)
	}
	tbl := &nftables.Table{Name: testNames.table, Family: nftables.TableFamilyINet}
	counts := map[string]int{}
	for _, ch := range tableChains {
		rules, err := c.GetRules(tbl, &nftables.Chain{Name: ch, Table: tbl})
		if err != nil {
			t.Fatalf("listing %s: %v", ch, err)
		}
		for _, r := range rules {
			switch commentOf(r) {
			case testNames.commentTag + rec.ID:
				t.Errorf("a sandbox without Internet has a rule in %s", ch)
			case testNames.commentTag + recB.ID:
				counts[ch+"/B"]++
			}
		}
		counts[ch] = len(rules)
	}
	if counts["input"] != 2 || counts["forward"] != 5 || counts["egress/B"] != 1 || counts["postrouting/B"] != 1 {
		t.Fatalf("rule counts %v", counts)
	}
}

// TestLimits reads the sandbox's limits back from its cgroups.
func TestLimits(t *testing.T) {
	l := privileged(t, "")
	spec := newSpec(t, l)
	spec.MemoryBytes = 384 << 20
	spec.PidsMax = 321
	inst := launch(t, l, spec)
	rec := inst.Record()
	read := func(dir, file string) string {
		b, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(b))
	}
	var memFile, pidsFile string
	switch l.cg.Version() {
	case cgroup.V2:
		memFile, pidsFile = filepath.Join(rec.Cgroups[0], "memory.max"), filepath.Join(rec.Cgroups[0], "pids.max")
	case cgroup.V1:
		for _, d := range rec.Cgroups {
			switch filepath.Base(filepath.Dir(filepath.Dir(d))) {
			case "memory":
				memFile = filepath.Join(d, "memory.limit_in_bytes")
			case "pids":
				pidsFile = filepath.Join(d, "pids.max")
			}
		}
	}
	if got := read(filepath.Dir(memFile), filepath.Base(memFile)); got != strconv.Itoa(384<<20) {
		t.Errorf("memory limit %s", got)
	}
	if got := read(filepath.Dir(pidsFile), filepath.Base(pidsFile)); got != "321" {
		t.Errorf("pids limit %s", got)
	}
	for _, d := range rec.Cgroups {
		if !strings.Contains(" "+strings.Join(strings.Fields(read(d, "cgroup.procs")), " ")+" ", " "+strconv.Itoa(rec.Pid)+" ") {
			t.Errorf("init %d is not in %s", rec.Pid, d)
		}
	}
	// The pids limit holds inside the sandbox.
	token := install(t, inst)
	// (The output is not checked: with every pid taken, even rayd may fail
	// to start a thread to relay it.)
	run(t, inst.APIAddr(), token, `for i in $(seq 400); do sleep 30 & done 2>/dev/null; echo spawned`)
	var pidsDir string
	for _, d := range rec.Cgroups {
		if exists(filepath.Join(d, "pids.current")) {
			pidsDir = d
		}
	}
	if n, err := strconv.Atoi(read(pidsDir, "pids.current")); err != nil || n > 321 || n < 300 {
		t.Errorf("pids.current %d (%v) in a sandbox with pids.max 321", n, err)
	}
}

// TestIsolatedOnCgroupV2 runs a whole privileged sandbox on the cgroup2
// code path (CLONE_INTO_CGROUP with the namespaces, cgroup.kill on
// Terminate), on the unified hierarchy of a hybrid machine.
func TestIsolatedOnCgroupV2(t *testing.T) {
	l := privileged(t, "")
	if l.cg.Version() == cgroup.V2 {
		t.Skip("the other tests already run on cgroup v2 here")
	}
	cg := useUnifiedV2(t, l)
	spec := newSpec(t, l)
	inst := launch(t, l, spec)
	rec := inst.Record()
	if len(rec.Cgroups) != 1 || !strings.HasPrefix(rec.Cgroups[0], cg.Roots()[0]+"/") {
		t.Fatalf("cgroups %v", rec.Cgroups)
	}
	token := install(t, inst)
	_, body := startedPid(t, inst.APIAddr(), token, "sh", "-c", "sleep 600 & sleep 600 & wait")
	body.Close()
	time.Sleep(100 * time.Millisecond)
	if pids, _ := cgroup.Pids(rec.Cgroups[0]); len(pids) < 4 {
		t.Fatalf("cgroup members %v", pids)
	}
	if err := inst.Terminate(context.Background()); err != nil {
		t.Fatal(err)
	}
	if left := leftovers(l, rec); len(left) != 0 {
		t.Fatalf("left %q", left)
	}
}

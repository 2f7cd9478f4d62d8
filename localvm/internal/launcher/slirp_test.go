//go:build linux

package launcher

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// The tests of rootless Internet access (slirp4netns) run as an ordinary
// user, under TestRootless. They never send anything beyond this machine:
// the only destinations they try are the host's loopback (10.0.2.2), and
// 169.254.169.254 and the host's own addresses only once a prohibit route
// is seen to cover them (the kernel then refuses the connect, nothing is
// sent).

// rootlessWithSlirp returns a rootless launcher whose HTTP client dials
// through it, or skips when slirp4netns cannot run here.
func rootlessWithSlirp(t *testing.T) *Launcher {
	t.Helper()
	asUser(t)
	l := newLauncher(t, "", nil)
	if l.Isolation() != IsolationRootless {
		t.Skipf("unprivileged user namespaces are not usable here (isolation %q)", l.Isolation())
	}
	if _, err := l.slirpPath(); err != nil {
		t.Skipf("rootless Internet access cannot be tested here (make deps installs slirp4netns): %v", err)
	}
	useDialers(t, l)
	return l
}

// useDialers makes the test's HTTP client reach rootless sandboxes through
// whichever of ls knows them.
func useDialers(t *testing.T, ls ...*Launcher) {
	orig := httpClient.Transport
	httpClient.Transport = &http.Transport{DisableKeepAlives: true, DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		var err error
		for _, l := range ls {
			var c net.Conn
			if c, err = l.DialContext(ctx, network, addr); err == nil || !strings.Contains(err.Error(), "no such rootless sandbox") {
				return c, err
			}
		}
		return nil, err
	}}
	t.Cleanup(func() { httpClient.Transport = orig })
}

// slirpCount is how many slirp4netns processes of this user run.
func slirpCount(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || !isSlirp(pid) {
			continue
		}
		if st := procState(pid); st != "" && st != "Z" {
			n++
		}
	}
	return n
}

// TestAsUserRootlessNoSlirp: without slirp4netns, Internet access is
// refused, naming the package; without Internet nothing changes.
func TestAsUserRootlessNoSlirp(t *testing.T) {
	asUser(t)
	l := newLauncher(t, "", func(o *Options) { o.noSlirp = true })
	if l.Isolation() != IsolationRootless {
		t.Skipf("unprivileged user namespaces are not usable here (isolation %q)", l.Isolation())
	}
	spec := newSpec(t, l)
	spec.Internet = true
	err := l.Check(spec)
	if !errors.Is(err, ErrNeedsPrivilege) || !strings.Contains(err.Error(), "slirp4netns") || !strings.Contains(err.Error(), "package") || !strings.Contains(err.Error(), "--no-internet") {
		t.Fatalf("Check with Internet, no slirp4netns: %v, want ErrNeedsPrivilege naming the package and the ways out", err)
	}
	if _, err := l.Launch(t.Context(), spec); !errors.Is(err, ErrNeedsPrivilege) {
		t.Fatalf("Launch with Internet, no slirp4netns: %v", err)
	}
	spec.Internet = false
	if err := l.Check(spec); err != nil {
		t.Fatalf("Check without Internet: %v", err)
	}
}

// TestAsUserRootlessInternet: a rootless sandbox with Internet access has
// tap0 (10.0.2.x, default route), resolv.conf naming slirp's DNS, cannot
// reach the host's loopback through 10.0.2.2, link-local addresses or the
// host's own addresses; terminating it leaves no slirp4netns.
func TestAsUserRootlessInternet(t *testing.T) {
	l := rootlessWithSlirp(t)
	before := slirpCount(t)

	// A service on the host's loopback, which the sandbox must not reach.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var accepted atomic.Int32
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			c.Close()
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port

	spec := newSpec(t, l)
	spec.Internet = true
	inst := launch(t, l, spec)
	rec := inst.Record()
	if !rec.Internet || rec.SlirpPid == 0 || !isSlirp(rec.SlirpPid) || !sameProcess(rec.SlirpPid, rec.SlirpStartTime) {
		t.Fatalf("record %+v: no live slirp4netns", rec)
	}
	hostAddr := ""
	for _, r := range slirpRejects() {
		if r != linkLocal.String() {
			hostAddr = strings.TrimSuffix(r, "/32")
			break
		}
	}
	token := install(t, inst)
	out, end := run(t, inst.APIAddr(), token, `
echo "== tap =="; ip -4 -o addr show dev tap0 | awk '{print $4}'
echo "== route =="; ip route show default
echo "== resolv =="; grep '^nameserver' /etc/resolv.conf
echo "== prohibit =="; ip route show type prohibit
python3 - <<'PY'
import errno, ipaddress, socket, subprocess
def rejected(addr):
    out = subprocess.run(["ip", "route", "show", "type", "prohibit"], capture_output=True, text=True).stdout
    return any(ipaddress.ip_address(addr) in ipaddress.ip_network(l.split()[1]) for l in out.splitlines() if l.startswith("prohibit"))
def tcp(addr, port, guard):
    if guard and not rejected(addr):
        return "no-prohibit-route"   # never send anything beyond this machine
    s = socket.socket()
    s.settimeout(5)
    try:
        s.connect((addr, port))
        return "connected"
    except socket.timeout:
        return "timeout"
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e.errno))
    finally:
        s.close()
print("== hostlo ==")
print(tcp("10.0.2.2", `+strconv.Itoa(port)+`, False))
print("== imds ==")
print(tcp("169.254.169.254", 80, True))
print("== hostaddr ==")
print(tcp("`+hostAddr+`", `+strconv.Itoa(port)+`, True) if "`+hostAddr+`" else "none")
PY
`)
	if code, _ := end["exitCode"].(float64); code != 0 {
		t.Fatalf("script: %v\n%s", end, out)
	}
	t.Logf("%s", out)
	if tap := section(out, "tap"); !strings.HasPrefix(tap, "10.0.2.") {
		t.Errorf("tap0's address: %q, want 10.0.2.x", tap)
	}
	if r := section(out, "route"); !strings.HasPrefix(r, "default via 10.0.2.2 dev tap0") {
		t.Errorf("default route: %q", r)
	}
	if r := section(out, "resolv"); r != "nameserver "+slirpDNS {
		t.Errorf("resolv.conf: %q, want slirp's DNS only", r)
	}
	if r := section(out, "prohibit"); !strings.Contains(r, "prohibit 169.254.0.0/16") {
		t.Errorf("prohibit routes: %q, want link-local", r)
	}
	if r := section(out, "hostlo"); r == "connected" {
		t.Errorf("the sandbox reached the host's loopback through 10.0.2.2")
	}
	if r := section(out, "imds"); r != "EACCES" {
		t.Errorf("connecting to 169.254.169.254: %q, want EACCES (a prohibit route)", r)
	}
	if r := section(out, "hostaddr"); r != "EACCES" && r != "none" {
		t.Errorf("connecting to the host's address %s: %q, want EACCES", hostAddr, r)
	}
	if n := accepted.Load(); n != 0 {
		t.Errorf("the host's loopback service accepted %d connections from the sandbox", n)
	}

	if err := inst.Terminate(t.Context()); err != nil {
		t.Fatal(err)
	}
	if sameProcess(rec.SlirpPid, rec.SlirpStartTime) || procState(rec.SlirpPid) == "Z" {
		t.Errorf("slirp4netns (pid %d) left after Terminate (state %q)", rec.SlirpPid, procState(rec.SlirpPid))
	}
	if n := slirpCount(t); n != before {
		t.Errorf("%d slirp4netns processes after Terminate, %d before", n, before)
	}
}

// TestAsUserRootlessInternetCycles: 20 launches and kills leave no
// slirp4netns, no descriptor and no file behind; a sandbox whose rayd dies
// on its own takes its slirp4netns along.
func TestAsUserRootlessInternetCycles(t *testing.T) {
	l := rootlessWithSlirp(t)
	n := 20
	if testing.Short() {
		n = 3
	}
	before := slirpCount(t)
	fds := func() int { e, _ := os.ReadDir("/proc/self/fd"); return len(e) }
	fdsBefore := fds()
	for k := 0; k < n; k++ {
		spec := newSpec(t, l)
		spec.Internet = true
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		inst, err := l.Launch(ctx, spec)
		cancel()
		if err != nil {
			log, _ := os.ReadFile(spec.LogPath)
			t.Fatalf("cycle %d: %v\n%s", k, err, log)
		}
		if k == n-1 {
			// The last one: rayd dies by itself (as on /terminate).
			rec := inst.Record()
			_ = syscall.Kill(rec.Pid, syscall.SIGKILL)
			waitDone(t, inst, 20*time.Second)
			deadline := time.Now().Add(10 * time.Second)
			for sameProcess(rec.SlirpPid, rec.SlirpStartTime) && time.Now().Before(deadline) {
				time.Sleep(50 * time.Millisecond)
			}
			if sameProcess(rec.SlirpPid, rec.SlirpStartTime) {
				t.Errorf("slirp4netns outlived its sandbox's rayd")
			}
		}
		if err := inst.Terminate(t.Context()); err != nil {
			t.Fatalf("cycle %d: Terminate: %v", k, err)
		}
		if _, err := os.Stat(launcherDir(spec.Dir)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("cycle %d: launcher dir left: %v", k, err)
		}
	}
	if got := slirpCount(t); got != before {
		t.Errorf("%d slirp4netns processes after %d cycles, %d before", got, n, before)
	}
	if got := fds(); got > fdsBefore+3 {
		t.Errorf("%d descriptors after %d cycles, %d before", got, n, fdsBefore)
	}
}

// TestAsUserRootlessInternetAdopt: a platform that restarts adopts the
// sandbox's slirp4netns (it outlives platforms); when that one is gone,
// Adopt starts another, and the sandbox has its network again; Terminate
// ends it.
func TestAsUserRootlessInternetAdopt(t *testing.T) {
	a := rootlessWithSlirp(t)
	spec := newSpec(t, a)
	spec.Internet = true
	inst := launch(t, a, spec)
	rec := inst.Record()

	b := newLauncher(t, a.opts.StateDir, nil)
	useDialers(t, b, a)
	adopted, err := b.Adopt(rec)
	if err != nil {
		t.Fatal(err)
	}
	if got := adopted.Record(); got.SlirpPid != rec.SlirpPid {
		t.Fatalf("adopted slirp4netns pid %d, want the running %d", got.SlirpPid, rec.SlirpPid)
	}
	token := install(t, adopted)
	tap := func() string {
		out, _ := run(t, adopted.APIAddr(), token, `ip -4 -o addr show dev tap0 | awk '{print $4}'; ip route show default | cut -d' ' -f1-5`)
		return strings.TrimSpace(out)
	}
	if got := tap(); !strings.HasPrefix(got, "10.0.2.") || !strings.Contains(got, "default via 10.0.2.2 dev tap0") {
		t.Fatalf("adopted sandbox's network: %q", got)
	}

	// Its slirp4netns dies: a third platform starts another one.
	_ = syscall.Kill(rec.SlirpPid, syscall.SIGKILL)
	deadline := time.Now().Add(10 * time.Second)
	for sameProcess(rec.SlirpPid, rec.SlirpStartTime) && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	c := newLauncher(t, a.opts.StateDir, nil)
	useDialers(t, c, b, a)
	again, err := c.Adopt(rec)
	if err != nil {
		t.Fatal(err)
	}
	rec2 := again.Record()
	if rec2.SlirpPid == 0 || rec2.SlirpPid == rec.SlirpPid || !isSlirp(rec2.SlirpPid) {
		t.Fatalf("no new slirp4netns after re-adoption: %+v", rec2)
	}
	out, _ := run(t, again.APIAddr(), token, `ip -4 -o addr show dev tap0 | awk '{print $4}'`)
	if !strings.HasPrefix(strings.TrimSpace(out), "10.0.2.") {
		t.Fatalf("re-adopted sandbox's tap0: %q", out)
	}
	if err := again.Terminate(t.Context()); err != nil {
		t.Fatal(err)
	}
	if sameProcess(rec2.SlirpPid, rec2.SlirpStartTime) {
		t.Errorf("the restarted slirp4netns survived Terminate")
	}
	waitDone(t, inst, 20*time.Second)
}

// TestSlirpArgs: the host's loopback is always disabled, readiness and
// exit go through fds 3 and 4; the rejected prefixes hold link-local and
// never loopback nor slirp's own network.
func TestSlirpArgs(t *testing.T) {
	args := strings.Join(slirpArgs(1234), " ")
	for _, want := range []string{"--configure", "--disable-host-loopback", "--enable-seccomp", "--mtu=65520", "--ready-fd=3", "--exit-fd=4", "1234 tap0"} {
		if !strings.Contains(args, want) {
			t.Errorf("slirp4netns arguments %q lack %q", args, want)
		}
	}
	rej := slirpRejects()
	if len(rej) == 0 || rej[0] != "169.254.0.0/16" {
		t.Fatalf("rejected prefixes %v: link-local first", rej)
	}
	for _, r := range rej[1:] {
		p, err := netip.ParsePrefix(r)
		if err != nil || p.Bits() != 32 || p.Addr().IsLoopback() || slirpNetwork.Contains(p.Addr()) {
			t.Errorf("rejected prefix %q", r)
		}
	}
}

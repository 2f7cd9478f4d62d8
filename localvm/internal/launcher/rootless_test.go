//go:build linux

package launcher

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The rootless tests run as an ordinary user: as root, TestRootless
// creates a throwaway user and re-runs this test binary as that user with
// -test.run selecting the TestAsUser* tests (which skip unless they run as
// a non-root user).

// asUserEnv marks the re-run test binary.
const asUserEnv = "RAYITO_LAUNCHER_AS_USER"

// throwawayUser creates a user that is removed when the test ends, and a
// directory it owns. It skips with a reason when that is impossible.
func throwawayUser(t *testing.T) (uid, gid uint32, home string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("creating a throwaway user needs root (this test runs the launcher as that user)")
	}
	useradd, err := exec.LookPath("useradd")
	if err != nil {
		t.Skip("useradd is not installed: cannot create a throwaway user")
	}
	name := "rlx" + strconv.FormatInt(time.Now().UnixNano()%1e9, 36)
	if out, err := exec.Command(useradd, "-M", "-s", "/bin/sh", name).CombinedOutput(); err != nil {
		t.Skipf("useradd %s: %v: %s", name, err, out)
	}
	t.Cleanup(func() {
		if userdel, err := exec.LookPath("userdel"); err == nil {
			_ = exec.Command(userdel, name).Run()
		}
	})
	u, err := user.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	id, _ := strconv.Atoi(u.Uid)
	g, _ := strconv.Atoi(u.Gid)
	home, err = os.MkdirTemp("", "rlx-home-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(home) })
	if err := os.Chown(home, id, g); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(home, 0o700); err != nil {
		t.Fatal(err)
	}
	return uint32(id), uint32(g), home
}

// TestRootless re-runs the TestAsUser tests as a throwaway user.
func TestRootless(t *testing.T) {
	uid, gid, home := throwawayUser(t)
	// The test binary lives in a directory only root may enter.
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(home, "launcher.test")
	copyFile(t, exe, bin, 0o755)
	if err := os.Chown(bin, int(uid), int(gid)); err != nil {
		t.Fatal(err)
	}
	args := []string{"-test.run", "^TestAsUser", "-test.v", "-test.count=1"}
	if testing.Short() {
		args = append(args, "-test.short")
	}
	cmd := exec.Command(bin, args...)
	cmd.Dir = home
	cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + home, "TMPDIR=" + home, asUserEnv + "=1"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: gid}}
	out, err := cmd.CombinedOutput()
	t.Logf("as uid %d:\n%s", uid, out)
	if err != nil {
		t.Fatalf("the tests as an ordinary user failed: %v", err)
	}
	if !strings.Contains(string(out), "--- PASS: TestAsUserRootless") && !strings.Contains(string(out), "--- SKIP: TestAsUserRootless") {
		t.Fatal("TestAsUserRootless did not run")
	}
}

// rootlessLauncher returns a rootless launcher (newLauncher with mod) and
// points the tests' HTTP client at its sandboxes through its dialer for
// the test's duration, or skips the test where unprivileged user
// namespaces are not usable.
func rootlessLauncher(t *testing.T, mod func(*Options)) *Launcher {
	t.Helper()
	l := newLauncher(t, "", mod)
	if l.Isolation() != IsolationRootless {
		t.Skipf("unprivileged user namespaces are not usable here (isolation %q)", l.Isolation())
	}
	orig := httpClient.Transport
	httpClient.Transport = &http.Transport{DisableKeepAlives: true, DialContext: l.DialContext}
	t.Cleanup(func() { httpClient.Transport = orig })
	return l
}

func asUser(t *testing.T) {
	t.Helper()
	if os.Getenv(asUserEnv) != "1" || os.Geteuid() == 0 {
		t.Skip("runs as an ordinary user, under TestRootless")
	}
}

// TestAsUserGate: without isolation and without the opt-in, New refuses,
// naming the privilege and the ways out; with it, a spec without
// Internet is refused (the host's network cannot be taken away).
func TestAsUserGate(t *testing.T) {
	asUser(t)
	_, err := New(Options{StateDir: t.TempDir(), Scope: testScope, noRootless: true, Logger: testLogger(t)})
	if !errors.Is(err, ErrUnisolated) || !strings.Contains(err.Error(), "root") || !strings.Contains(err.Error(), "opt in") {
		t.Fatalf("New without isolation: %v, want ErrUnisolated naming root and the opt-in", err)
	}
	l := newLauncher(t, "", func(o *Options) { o.noRootless, o.AllowUnisolated = true, true })
	if l.Isolation() != IsolationNone {
		t.Fatalf("isolation %q", l.Isolation())
	}
	spec := newSpec(t, l)
	if _, err := l.Launch(t.Context(), spec); !errors.Is(err, ErrNeedsPrivilege) || !strings.Contains(err.Error(), "network namespace") {
		t.Fatalf("Launch without Internet, unisolated: %v", err)
	}
	spec.Internet, spec.MemoryBytes = true, 1<<30
	if _, err := l.Launch(t.Context(), spec); !errors.Is(err, ErrNeedsPrivilege) || !strings.Contains(err.Error(), "cgroups") {
		t.Fatalf("Launch with a memory limit, unisolated: %v", err)
	}
	spec.MemoryBytes = 0
	inst := launch(t, l, spec)
	h := health(t, inst.APIAddr())
	if h["isolation"] != "ISOLATION_NONE" {
		t.Fatalf("health of an unisolated sandbox does not say so: %v", h)
	}
}

// TestAsUserRootless launches a rootless sandbox and checks what it
// isolates.
func TestAsUserRootless(t *testing.T) {
	asUser(t)
	l := rootlessLauncher(t, nil)

	spec := newSpec(t, l)
	spec.Internet = true
	if _, serr := l.slirpPath(); serr != nil { // else: TestAsUserRootlessInternet
		if _, err := l.Launch(t.Context(), spec); !errors.Is(err, ErrNeedsPrivilege) {
			t.Fatalf("rootless Launch with Internet, without slirp4netns: %v, want ErrNeedsPrivilege", err)
		}
	}
	spec.Internet, spec.PidsMax = false, 10
	if _, err := l.Launch(t.Context(), spec); !errors.Is(err, ErrNeedsPrivilege) {
		t.Fatalf("rootless Launch with a pids limit: %v, want ErrNeedsPrivilege", err)
	}
	spec.PidsMax = 0
	inst := launch(t, l, spec)
	t.Cleanup(func() { _ = inst.Terminate(t.Context()) })
	if h := health(t, inst.APIAddr()); h["isolation"] != "ISOLATION_ROOTLESS" || h["limits"] != nil {
		t.Fatal("health does not report rootless isolation")
	}
	token := install(t, inst)
	home, _ := os.UserHomeDir()
	out, end := run(t, inst.APIAddr(), token, `
echo "== id =="; id -u; id -g
echo "== host =="; cat /proc/sys/kernel/hostname
echo "== pids =="; ls /proc | grep -E '^[0-9]+$' | wc -l
echo "== pid1 =="; cat /proc/1/comm
echo "== home =="; echo "$HOME"; ls -d `+home+` 2>&1 || echo nohosthome
echo "== net =="; cat /proc/net/dev | tail -n +3 | cut -d: -f1 | tr -d ' '
echo "== usr =="; touch /usr/rlx 2>&1 || echo usr-ro
echo "== root =="; mkdir /rlx 2>&1 || echo root-ro
echo "== caps =="; grep CapEff /proc/self/status
echo "== dial =="; ls /proc/1/root/ 2>&1 | grep -c dial.sock || true
echo "== rayd =="; cat /proc/1/environ >/dev/null 2>&1 && echo environ-readable; ls /proc/1/fd >/dev/null 2>&1 && echo fds-readable; echo done
`)
	if code, _ := end["exitCode"].(float64); code != 0 {
		t.Fatalf("script: %v\n%s", end, out)
	}
	t.Logf("%s", out)
	want := map[string]string{"id": "1000\n1000", "host": hostnameFor(spec.ID), "pid1": "rayd", "net": "lo", "caps": "CapEff:\t0000000000000000", "dial": "0",
		// rayd is non-dumpable: sandbox code, of rayd's own uid, can neither
		// read its environment nor open its descriptors (nor ptrace it).
		"rayd": "done"}
	for k, v := range want {
		if got := section(out, k); got != v {
			t.Errorf("%s: %q, want %q", k, got, v)
		}
	}
	if n, _ := strconv.Atoi(section(out, "pids")); n < 1 || n > 6 {
		t.Errorf("the sandbox sees %s processes: not its own pid namespace", section(out, "pids"))
	}
	for k, v := range map[string]string{"home": "/home/user", "usr": "usr-ro", "root": "root-ro"} {
		if !strings.Contains(section(out, k), v) {
			t.Errorf("%s: %q, want %q in it", k, section(out, k), v)
		}
	}
	if !strings.Contains(section(out, "home"), "nohosthome") {
		t.Errorf("the sandbox sees the user's real home: %q", section(out, "home"))
	}
	// Its home is bounded too (half the default memory: no cgroup
	// limits here, so the size is the only bound).
	checkHomeBounded(t, inst, token, spec, tmpfsSizes(0).Home)
	// Another user is refused with a clear error.
	if msg := startError(t, inst.APIAddr(), token, "nobody"); !strings.Contains(msg, "own user") {
		t.Errorf("running as nobody: %q, want a refusal naming rayd's own user", msg)
	}
	if msg := startError(t, inst.APIAddr(), token, "root"); !strings.Contains(msg, "user not allowed") {
		t.Errorf("running as root: %q, want a refusal", msg)
	}
	if err := inst.Terminate(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(launcherDir(spec.Dir)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("launcher dir left after Terminate: %v", err)
	}
}

// startError starts id as user and returns the error Start ends with.
func startError(t *testing.T, apiAddr, token, user string) string {
	t.Helper()
	resp := openStartAs(t, apiAddr, token, user, "id")
	defer resp.Body.Close()
	r := bufio.NewReader(resp.Body)
	for {
		flags, msg, err := readEnvelope(r)
		if err != nil {
			t.Fatalf("stream ended without an end-of-stream message: %v", err)
		}
		if flags&2 != 0 {
			var eos struct {
				Error *struct{ Code, Message string } `json:"error"`
			}
			_ = json.Unmarshal(msg, &eos)
			if eos.Error == nil {
				return ""
			}
			return eos.Error.Code + ": " + eos.Error.Message
		}
	}
}

// TestAsUserRootlessHooks: in a rootless sandbox, the platform, rayd and
// the sandbox's code share one uid, so the hooks must not trust the
// sandbox's loopback. Sandbox code calling 127.0.0.1:9000 gets 200
// "illegal" for /terminate, /run, /validate and /ready and changes nothing;
// its /suspend and /resume are accepted, as the security model says (they
// only hurt its own sandbox); each call counts as an anomaly. It finds
// no way to the platform's hooks socket (not in its filesystem, not
// inherited, not connectable through /proc), and the platform's own calls,
// over the hooks socket, still work, /terminate included.
func TestAsUserRootlessHooks(t *testing.T) {
	asUser(t)
	l := rootlessLauncher(t, nil)
	inst := launch(t, l, newSpec(t, l))
	t.Cleanup(func() { _ = inst.Terminate(t.Context()) })
	if !strings.HasSuffix(strings.Split(inst.HooksAddr(), ":")[0], rootlessHooksHostSuffix) {
		t.Fatalf("hooks address %q does not name the hooks socket", inst.HooksAddr())
	}
	token := install(t, inst) // the platform's /run, over the hooks socket

	// The platform cannot reach port 9000 through the dial socket either:
	// what listens there is the decoy.
	if c, err := l.DialContext(t.Context(), "tcp", inst.ID()+rootlessHostSuffix+":9000"); err == nil {
		c.Close()
		t.Error("the dial socket connected port 9000")
	} else if !strings.Contains(err.Error(), hooksSockName) {
		t.Errorf("dialing port 9000 through the dial socket: %v, want a refusal naming %s", err, hooksSockName)
	}
	if c, err := l.DialContext(t.Context(), "tcp", inst.ID()+rootlessHooksHostSuffix+":8080"); err == nil {
		c.Close()
		t.Error("the hooks address dialed port 8080")
	}

	// A forged /suspend cuts every stream, the one running the script
	// too: the forged calls run in the background, into a file, and the
	// script below waits for it.
	if out, end := run(t, inst.APIAddr(), token, `
( sleep 0.3
for h in terminate run suspend resume validate ready; do
  echo "== $h =="
  curl -sS -m 5 -X POST -H 'Content-Type: application/json' \
    -d '{"microvmId":"forged","runHookPayload":"forged"}' \
    http://127.0.0.1:9000/aws/lambda-microvms/runtime/v1/$h 2>&1 || echo "curl failed"
done > /tmp/forged.out; touch /tmp/forged.done ) </dev/null >/dev/null 2>&1 &
`); end["exitCode"] != nil {
		t.Fatalf("starting the forged calls: %v\n%s", end, out)
	}
	var forged string
	for deadline := time.Now().Add(30 * time.Second); ; {
		// Refused (Unavailable) while the forged /suspend holds rayd.
		if out, err := tryRun(inst.APIAddr(), token, "cat /tmp/forged.done >/dev/null 2>&1 && cat /tmp/forged.out"); err == nil && out != "" {
			forged = out
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the forged hook calls did not finish")
		}
		time.Sleep(100 * time.Millisecond)
	}
	out, end := run(t, inst.APIAddr(), token, `
echo "== sockfiles =="
{ ls -a /proc/1/root/ /proc/1/cwd/ /proc/self/cwd/; find / -xdev -name '*.sock' 2>/dev/null; } | grep -c '\.sock$' || true
echo "== proc =="
python3 - <<'PY'
import os, socket
inherited = connected = 0
for fd in os.listdir('/proc/self/fd'):
    try:
        s = socket.socket(fileno=os.dup(int(fd)))
    except OSError:
        continue
    try:
        if s.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN):
            inherited += 1
    except OSError:
        pass
    s.detach()
for pid in [d for d in os.listdir('/proc') if d.isdigit()]:
    try:
        fds = os.listdir('/proc/%s/fd' % pid)
    except OSError:
        continue
    for fd in fds:
        c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        c.settimeout(2)
        try:
            c.connect('/proc/%s/fd/%s' % (pid, fd))
            connected += 1
        except OSError:
            pass
        c.close()
print("listeners inherited:", inherited)
print("connected through /proc:", connected)
PY
`)
	if code, _ := end["exitCode"].(float64); code != 0 {
		t.Fatalf("script: %v\n%s", end, out)
	}
	t.Logf("%s%s", forged, out)
	for _, w := range []struct{ hook, outcome, phase string }{
		{"terminate", "illegal", "running"}, {"run", "illegal", "running"},
		{"suspend", "changed", "suspending"}, {"resume", "changed", "resumed"},
		{"validate", "illegal", "resumed"}, {"ready", "illegal", "resumed"},
	} {
		var r struct{ Hook, Outcome, Phase string }
		if err := json.Unmarshal([]byte(section(forged, w.hook)), &r); err != nil {
			t.Errorf("sandbox code's /%s: %q, want a JSON reply", w.hook, section(forged, w.hook))
			continue
		}
		if r.Outcome != w.outcome || r.Phase != w.phase {
			t.Errorf("sandbox code's /%s: outcome %q phase %q, want %s, %s", w.hook, r.Outcome, r.Phase, w.outcome, w.phase)
		}
	}
	if got := section(out, "sockfiles"); got != "0" {
		t.Errorf("the sandbox sees %s socket files of the platform's", got)
	}
	if got := section(out, "proc"); got != "listeners inherited: 0\nconnected through /proc: 0" {
		t.Errorf("sandbox code reaches rayd's sockets: %q", got)
	}

	// The sandbox still runs, and Health counts the forged calls.
	if out, _ := run(t, inst.APIAddr(), token, "echo alive"); out != "alive\n" {
		t.Fatalf("after the forged hooks: %q", out)
	}
	h := health(t, inst.APIAddr())
	if n, _ := strconv.Atoi(fmt.Sprint(h["hookAnomalies"])); n < 6 {
		t.Errorf("hook anomalies %v, want at least 6: %v", h["hookAnomalies"], h)
	}
	select {
	case <-inst.Done():
		t.Fatal("the sandbox ended after sandbox code's /terminate")
	default:
	}

	// The platform's /run is no longer accepted (already ran), and its
	// /terminate ends the sandbox.
	if r := postJSON(t, "http://"+inst.HooksAddr()+"/aws/lambda-microvms/runtime/v1/run", map[string]string{"microvmId": inst.ID(), "runHookPayload": "x"}); r["outcome"] != "already_ran" {
		t.Errorf("the platform's second /run: %v", r)
	}
	if r := postJSON(t, "http://"+inst.HooksAddr()+"/aws/lambda-microvms/runtime/v1/terminate", map[string]any{}); r["outcome"] != "terminating" {
		t.Fatalf("the platform's /terminate: %v", r)
	}
	waitDone(t, inst, 20*time.Second)
}

//go:build linux

package launcher

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
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
	src, err := os.Open(exe)
	if err != nil {
		t.Fatal(err)
	}
	dst, err := os.OpenFile(bin, os.O_CREATE|os.O_WRONLY, 0o755)
	if err == nil {
		_, err = io.Copy(dst, src)
		dst.Close()
	}
	src.Close()
	if err != nil {
		t.Fatal(err)
	}
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
	if !strings.Contains(strings.Join(services(h), ","), "isolation:none") {
		t.Fatalf("health of an unisolated sandbox does not say so: %v", h)
	}
}

func services(h map[string]any) []string {
	f, _ := h["features"].(map[string]any)
	list, _ := f["services"].([]any)
	var out []string
	for _, s := range list {
		if s, ok := s.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

// TestAsUserRootless launches a rootless sandbox and checks what it
// isolates.
func TestAsUserRootless(t *testing.T) {
	asUser(t)
	l := newLauncher(t, "", nil)
	if l.Isolation() != IsolationRootless {
		t.Skipf("unprivileged user namespaces are not usable here (isolation %q)", l.Isolation())
	}
	// The test's HTTP client reaches rootless sandboxes through the
	// launcher's dialer.
	orig := httpClient.Transport
	httpClient.Transport = &http.Transport{DisableKeepAlives: true, DialContext: l.DialContext}
	t.Cleanup(func() { httpClient.Transport = orig })

	spec := newSpec(t, l)
	spec.Internet = true
	if _, err := l.Launch(t.Context(), spec); !errors.Is(err, ErrNeedsPrivilege) {
		t.Fatalf("rootless Launch with Internet: %v, want ErrNeedsPrivilege", err)
	}
	spec.Internet, spec.PidsMax = false, 10
	if _, err := l.Launch(t.Context(), spec); !errors.Is(err, ErrNeedsPrivilege) {
		t.Fatalf("rootless Launch with a pids limit: %v, want ErrNeedsPrivilege", err)
	}
	spec.PidsMax = 0
	inst := launch(t, l, spec)
	t.Cleanup(func() { _ = inst.Terminate(t.Context()) })
	if !strings.Contains(strings.Join(services(health(t, inst.APIAddr())), ","), "isolation:rootless") {
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
`)
	if code, _ := end["exitCode"].(float64); code != 0 {
		t.Fatalf("script: %v\n%s", end, out)
	}
	t.Logf("%s", out)
	want := map[string]string{"id": "1000\n1000", "host": hostnameFor(spec.ID), "pid1": "rayd", "net": "lo", "caps": "CapEff:\t0000000000000000", "dial": "0"}
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

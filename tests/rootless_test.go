package tests

import (
	"bytes"
	"io"
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

// The tests of this file run the real rayito binary as an ordinary user:
// as root they create a throwaway user (removed at the end) and run the
// CLI with its uid, HOME and XDG_STATE_HOME in a directory it owns.

type ordinaryUser struct {
	uid, gid uint32
	home     string
	bin      string // a copy of rayito the user may run
}

func newOrdinaryUser(t *testing.T) *ordinaryUser {
	t.Helper()
	if !isRoot() {
		t.Skip("needs root to create a throwaway user (these tests run rayito as that user)")
	}
	useradd, err := exec.LookPath("useradd")
	if err != nil {
		t.Skip("useradd is not installed: cannot create a throwaway user")
	}
	name := "rly" + strconv.FormatInt(time.Now().UnixNano()%1e9, 36)
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
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	home, err := os.MkdirTemp("", "rly-home-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(home) })
	bin := filepath.Join(home, "rayito")
	src, err := os.Open(rayitoBin(t))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := os.OpenFile(bin, os.O_CREATE|os.O_WRONLY, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	dst.Close()
	for _, p := range []string{home, bin} {
		if err := os.Chown(p, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(home, 0o700); err != nil {
		t.Fatal(err)
	}
	return &ordinaryUser{uid: uint32(uid), gid: uint32(gid), home: home, bin: bin}
}

// run runs rayito as the user with extra environment variables.
func (u *ordinaryUser) run(t *testing.T, env []string, args ...string) cliResult {
	t.Helper()
	cmd := exec.Command(u.bin, args...)
	cmd.Dir = u.home
	cmd.Env = append([]string{
		"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + u.home, "XDG_STATE_HOME=" + filepath.Join(u.home, "state"),
		"TMPDIR=" + u.home, "RAYITO_ENDPOINT=http://127.0.0.1:1", "RAYITO_BACKEND=",
	}, env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: u.uid, Gid: u.gid}}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return cliResult{code: code, stdout: stdout.String(), stderr: stderr.String()}
}

// userNamespacesUsable reports whether this kernel lets an ordinary user
// create user namespaces (the rootless mode).
func userNamespacesUsable(t *testing.T, u *ordinaryUser) bool {
	t.Helper()
	if _, err := exec.LookPath("unshare"); err != nil {
		return false
	}
	cmd := exec.Command("unshare", "--user", "--pid", "--fork", "--mount", "--net", "/bin/true")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: u.uid, Gid: u.gid}}
	return cmd.Run() == nil
}

// TestRootlessCLIRun: as an ordinary user, `rayito run` isolates the
// command (rootless mode), refuses Internet access it cannot give, and
// refuses another user.
func TestRootlessCLIRun(t *testing.T) {
	u := newOrdinaryUser(t)
	if !userNamespacesUsable(t, u) {
		t.Skip("this kernel does not let an ordinary user create user namespaces: the rootless mode cannot run (TestUnisolatedCLIGate covers the fallback)")
	}
	r := u.run(t, nil, "run", "--no-internet", "--", "sh", "-c", `
echo "== id =="; id -un; id -u
echo "== host =="; hostname
echo "== procs =="; ls /proc | grep -cE '^[0-9]+$'
echo "== home =="; echo "$HOME"; ls `+u.home+` >/dev/null 2>&1 && echo sees-real-home || echo own-home
echo "== net =="; tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '
`)
	t.Logf("run: %+v", r)
	if r.code != 0 {
		t.Fatalf("rootless run failed: %+v", r)
	}
	host, _ := os.Hostname()
	sec := func(name string) string {
		_, rest, _ := strings.Cut(r.stdout, "== "+name+" ==\n")
		if i := strings.Index(rest, "== "); i >= 0 {
			rest = rest[:i]
		}
		return strings.TrimSpace(rest)
	}
	if got := sec("id"); got != "user\n1000" {
		t.Errorf("id: %q, want user/1000", got)
	}
	if got := sec("host"); got == host || got == "" {
		t.Errorf("hostname %q: the host's", got)
	}
	if n, _ := strconv.Atoi(sec("procs")); n < 1 || n > 8 {
		t.Errorf("the sandbox sees %s processes: not a pid namespace of its own", sec("procs"))
	}
	if got := sec("home"); got != "/home/user\nown-home" {
		t.Errorf("home: %q", got)
	}
	if got := sec("net"); got != "lo" {
		t.Errorf("network interfaces %q: want only lo (no view of the host's network)", got)
	}
	if strings.Contains(r.stderr, "NOT isolated") {
		t.Errorf("a rootless sandbox warns it is not isolated: %q", r.stderr)
	}
	// Internet access (the default) goes through slirp4netns: tap0, a
	// default route and slirp's DNS; link-local is blocked. Without
	// slirp4netns it is refused, naming the package.
	if slirpUsable() {
		r = u.run(t, nil, "run", "--", "sh", "-c", "ip -4 -o addr show dev tap0 | awk '{print $4}'; ip route show default | cut -d' ' -f1-5; grep '^nameserver' /etc/resolv.conf; ip route show type prohibit | grep -c 169.254.0.0/16")
		if want := "default via 10.0.2.2 dev tap0\nnameserver 10.0.2.3\n1\n"; r.code != 0 || !strings.HasPrefix(r.stdout, "10.0.2.") || !strings.HasSuffix(r.stdout, want) {
			t.Errorf("run with Internet, rootless: %+v, want tap0 on 10.0.2.x, %q", r, want)
		}
	} else {
		t.Logf("slirp4netns is not usable here (make deps installs it): only its absence is tested")
	}
	r = u.run(t, []string{"PATH=/nonexistent"}, "run", "--", "true")
	if r.code == 0 || !strings.Contains(r.stderr, "Internet") || !strings.Contains(r.stderr, "slirp4netns") || !strings.Contains(r.stderr, "--no-internet") {
		t.Errorf("run with Internet, rootless, no slirp4netns in PATH: %+v, want a refusal naming Internet, slirp4netns and --no-internet", r)
	}
	// Another user than rayd's own is refused.
	r = u.run(t, nil, "run", "--no-internet", "--user", "nobody", "--", "id")
	if r.code == 0 || !strings.Contains(r.stderr, "own user") {
		t.Errorf("run --user nobody, rootless: %+v, want a refusal naming rayd's own user", r)
	}
}

// slirpUsable reports whether slirp4netns is installed and an ordinary
// user may open the tun device (what rootless Internet access needs).
func slirpUsable() bool {
	if _, err := exec.LookPath("slirp4netns"); err != nil {
		return false
	}
	fi, err := os.Stat("/dev/net/tun")
	return err == nil && fi.Mode().Perm()&0o006 == 0o006
}

// TestUnisolatedCLIGate: where sandboxes cannot be isolated, `rayito run`
// refuses without the opt-in, and with it runs the command and warns on
// stderr; --no-internet is refused then, never ignored.
func TestUnisolatedCLIGate(t *testing.T) {
	u := newOrdinaryUser(t)
	noUserns := []string{"RAYITO_LOCALVM_NO_USERNS=1"} // as on a kernel that forbids them
	r := u.run(t, noUserns, "run", "--", "id", "-u")
	if r.code == 0 || !strings.Contains(r.stderr, "cannot be isolated") || !strings.Contains(r.stderr, "--unisolated") || !strings.Contains(r.stderr, "root") {
		t.Fatalf("run without isolation or opt-in: %+v, want a refusal naming root and --unisolated", r)
	}
	for _, opt := range [][]string{{"run", "--unisolated"}, {"run"}} {
		env := noUserns
		if len(opt) == 1 {
			env = append(env, "RAYITO_UNISOLATED=1")
		}
		r = u.run(t, env, append(opt, "--", "id", "-u")...)
		if r.code != 0 || strings.TrimSpace(r.stdout) != strconv.Itoa(int(u.uid)) {
			t.Fatalf("%v %v: %+v", env, opt, r)
		}
		if !strings.Contains(r.stderr, "NOT isolated") {
			t.Errorf("%v %v: no warning on stderr: %q", env, opt, r.stderr)
		}
	}
	r = u.run(t, noUserns, "run", "--unisolated", "--no-internet", "--", "true")
	if r.code == 0 || !strings.Contains(r.stderr, "network namespace") {
		t.Errorf("run --unisolated --no-internet: %+v, want a refusal (the host's network cannot be taken away)", r)
	}
	r = u.run(t, noUserns, "run", "--unisolated", "--user", "nobody", "--", "id")
	if r.code == 0 || !strings.Contains(r.stderr, "own user") {
		t.Errorf("run --unisolated --user nobody: %+v, want a refusal naming rayd's own user", r)
	}
}

package tests

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/rayito-dev/rayito/localvm"
)

// TestCLISandboxBinary: the local platforms rayito starts (`local up`,
// and `run`'s own) run their sandboxes from the rayito-sandbox beside
// rayito, as releases ship it; without one, or with one the platform must
// refuse (others can write it or its directory), from rayito itself,
// saying why.
// --sandbox-binary and RAYITO_SANDBOX_BINARY name one, and a bad one
// fails the start with the reason. Which binary a sandbox runs shows in
// its sudo (/usr/local/bin/sudo is that binary).
func TestCLISandboxBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("starts local platforms")
	}
	bin := rayitoBin(t)
	sbx := filepath.Join(filepath.Dir(bin), localvm.SandboxBinaryName)
	size := func(p string) string {
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		return strconv.FormatInt(st.Size(), 10)
	}
	// sudoSize runs a command in a sandbox with rayito binary b and
	// returns the size of the sandbox's sudo, and the run's stderr.
	sudoSize := func(b string, env []string) (string, string) {
		t.Helper()
		r := runBinInput(t, b, env, "", "run", "--", "stat", "-L", "-c", "%s", "/usr/local/bin/sudo")
		if r.code != 0 {
			t.Fatalf("%s run: %+v", b, r)
		}
		return strings.TrimSpace(r.stdout), r.stderr
	}
	// alone returns a directory holding a link to rayito, and extra.
	alone := func(extra func(dir string)) string {
		dir := t.TempDir()
		b := filepath.Join(dir, "rayito")
		if err := os.Link(bin, b); err != nil {
			t.Fatal(err)
		}
		if extra != nil {
			extra(dir)
		}
		return b
	}

	// The release layout: rayito-sandbox beside rayito.
	if got, _ := sudoSize(bin, cliEnv(t)); got != size(sbx) {
		t.Errorf("run beside rayito-sandbox: the sandbox's binary has %s bytes, want rayito-sandbox's %s", got, size(sbx))
	}
	env := cliEnv(t)
	state := t.TempDir()
	if r := runCLI(t, env, "local", "up", "--state-dir", state, "--prebooted", "0"); r.code != 0 {
		t.Fatalf("local up: %+v", r)
	}
	if got, _ := sudoSize(bin, env); got != size(sbx) {
		t.Errorf("local up beside rayito-sandbox: the sandbox's binary has %s bytes, want %s", got, size(sbx))
	}
	if r := runCLI(t, env, "local", "down", "--state-dir", state); r.code != 0 {
		t.Fatalf("local down: %+v", r)
	}
	if log, _ := os.ReadFile(filepath.Join(state, "serve.log")); !strings.Contains(string(log), "sandboxes start from "+sbx) {
		t.Errorf("serve.log does not say where sandboxes start from:\n%s", log)
	}

	// rayito alone: sandboxes start from rayito itself.
	lone := alone(nil)
	if got, _ := sudoSize(lone, cliEnv(t)); got != size(bin) {
		t.Errorf("rayito alone: the sandbox's binary has %s bytes, want rayito's %s", got, size(bin))
	}
	// ... unless RAYITO_SANDBOX_BINARY names one.
	if got, _ := sudoSize(lone, append(cliEnv(t), "RAYITO_SANDBOX_BINARY="+sbx)); got != size(sbx) {
		t.Errorf("RAYITO_SANDBOX_BINARY: the sandbox's binary has %s bytes, want %s", got, size(sbx))
	}

	// A rayito-sandbox beside rayito that others can write is not used,
	// and the user is told why.
	unsafe := alone(func(dir string) {
		b, err := os.ReadFile(sbx)
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, localvm.SandboxBinaryName)
		if err := os.WriteFile(p, b, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, 0o777); err != nil {
			t.Fatal(err)
		}
	})
	got, stderr := sudoSize(unsafe, cliEnv(t))
	if got != size(bin) || !strings.Contains(stderr, "not using") || !strings.Contains(stderr, "writable by its group or others") {
		t.Errorf("a writable rayito-sandbox beside rayito: the sandbox's binary has %s bytes (want rayito's %s), stderr %q", got, size(bin), stderr)
	}

	// Nor is one in a directory others can write (rayito run from /tmp).
	shared := alone(func(dir string) {
		if err := os.Link(sbx, filepath.Join(dir, localvm.SandboxBinaryName)); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(dir, 0o777); err != nil {
			t.Fatal(err)
		}
	})
	got, stderr = sudoSize(shared, cliEnv(t))
	if got != size(bin) || !strings.Contains(stderr, "its directory is writable by others") {
		t.Errorf("a rayito-sandbox in a directory others can write: the sandbox's binary has %s bytes (want rayito's %s), stderr %q", got, size(bin), stderr)
	}

	// A binary named by the user that the platform cannot use fails the
	// start, with the reason.
	notInit := filepath.Join(t.TempDir(), "true")
	tb, err := os.ReadFile("/bin/true")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(notInit, tb, 0o755); err != nil {
		t.Fatal(err)
	}
	r := runCLI(t, cliEnv(t), "local", "up", "--state-dir", t.TempDir(), "--prebooted", "0", "--sandbox-binary", notInit)
	if r.code == 0 || !strings.Contains(r.stderr, "the local platform exited at start: unusable sandbox binary: "+notInit+": the binary does not answer as a sandbox init") {
		t.Errorf("local up --sandbox-binary /bin/true: %+v", r)
	}
	r = runCLI(t, append(cliEnv(t), "RAYITO_SANDBOX_BINARY=no/such/file"), "run", "--", "true")
	if r.code == 0 || !strings.Contains(r.stderr, "unusable sandbox binary") || !strings.Contains(r.stderr, "no such file or directory") {
		t.Errorf("RAYITO_SANDBOX_BINARY=no/such/file: %+v", r)
	}
}

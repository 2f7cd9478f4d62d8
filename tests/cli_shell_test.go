package tests

import (
	"bytes"
	"errors"
	"io"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"
)

// termOutput collects what the CLI writes on its terminal.
type termOutput struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (o *termOutput) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.Write(p)
}

func (o *termOutput) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.String()
}

// waitFor waits until the output holds want after offset, at most d.
func (o *termOutput) waitFor(t *testing.T, offset int, want string, d time.Duration) int {
	t.Helper()
	for deadline := time.Now().Add(d); ; time.Sleep(20 * time.Millisecond) {
		s := o.String()
		if i := strings.Index(s[min(offset, len(s)):], want); i >= 0 {
			return offset + i + len(want)
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %q on the terminal after %s; it shows %q", want, d, s[min(offset, len(s)):])
		}
	}
}

// TestCLIShellOnTerminal drives `rayito sandbox shell` on a real
// terminal (a pseudo-terminal of creack/pty, the CLI's stdin, stdout and
// stderr, its controlling terminal): the window size reaches the remote
// shell and follows a resize (SIGWINCH); the terminal is raw while the
// shell runs (Ctrl-C interrupts the remote command, not the CLI) and
// restored after; the shell's exit code is the CLI's.
func TestCLIShellOnTerminal(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a local platform")
	}
	env := cliEnv(t)
	state := t.TempDir()
	if r := runCLI(t, env, "local", "up", "--state-dir", state, "--prebooted", "0"); r.code != 0 {
		t.Fatalf("local up: %+v", r)
	}
	defer runCLI(t, env, "local", "down", "--state-dir", state)
	r := runCLI(t, env, "sandbox", "create", "--timeout", "3m")
	if r.code != 0 {
		t.Fatalf("sandbox create: %+v", r)
	}
	id := strings.TrimSpace(r.stdout)

	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer ptmx.Close()
	if err := pty.Setsize(ptmx, &pty.Winsize{Rows: 40, Cols: 120}); err != nil {
		t.Fatal(err)
	}
	cooked, err := unix.IoctlGetTermios(int(tty.Fd()), unix.TCGETS)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(rayitoBin(t), "sandbox", "shell", id)
	cmd.Env = env
	cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, tty, tty
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	defer func() {
		_ = cmd.Process.Kill()
		select {
		case <-waited:
		case <-time.After(20 * time.Second):
		}
		_ = tty.Close()
	}()
	var out termOutput
	go func() { _, _ = io.Copy(&out, ptmx) }()
	send := func(s string) {
		t.Helper()
		if _, err := ptmx.Write([]byte(s)); err != nil {
			t.Fatal(err)
		}
	}

	// The remote shell sees the terminal's size, then its new size.
	send("stty size; echo size-$((6*7))\r")
	off := out.waitFor(t, 0, "40 120", 30*time.Second)
	off = out.waitFor(t, off, "size-42", 10*time.Second)
	if raw, err := unix.IoctlGetTermios(int(tty.Fd()), unix.TCGETS); err != nil || raw.Lflag&(unix.ICANON|unix.ECHO|unix.ISIG) != 0 {
		t.Errorf("the terminal is not raw while the shell runs: lflag %#x, %v", raw.Lflag, err)
	}
	if err := pty.Setsize(ptmx, &pty.Winsize{Rows: 50, Cols: 150}); err != nil {
		t.Fatal(err)
	}
	// SIGWINCH reaches the CLI, which resizes the remote terminal.
	for deadline := time.Now().Add(10 * time.Second); ; {
		send("stty size; echo resized-$((6*7))\r")
		next := out.waitFor(t, off, "resized-42", 10*time.Second)
		if strings.Contains(out.String()[off:next], "50 150") {
			off = next
			break
		}
		off = next
		if time.Now().After(deadline) {
			t.Fatalf("the remote terminal did not follow the resize: %q", out.String())
		}
		time.Sleep(200 * time.Millisecond)
	}

	// Ctrl-C goes to the remote command (the terminal is raw: no SIGINT
	// for the CLI).
	send("sleep 30\r")
	time.Sleep(500 * time.Millisecond)
	send("\x03")
	send("echo status-$?\r")
	off = out.waitFor(t, off, "status-130", 10*time.Second)

	// exit 3: the CLI exits 3, the terminal as it was.
	send("exit 3\r")
	select {
	case err := <-waited:
		waited <- err
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 3 {
			t.Errorf("rayito sandbox shell exited %v, want 3; terminal: %q", err, out.String()[off:])
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("rayito sandbox shell did not exit; terminal: %q", out.String()[off:])
	}
	restored, err := unix.IoctlGetTermios(int(tty.Fd()), unix.TCGETS)
	if err != nil || restored.Lflag != cooked.Lflag || restored.Iflag != cooked.Iflag || restored.Oflag != cooked.Oflag {
		t.Errorf("the terminal was not restored: lflag %#x, want %#x (%v)", restored.Lflag, cooked.Lflag, err)
	}
}

package proc

import (
	"context"
	"errors"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rayito-dev/rayito/rayd/internal/identity"
)

func ptySpec(script string, cols, rows uint16) Spec {
	spec := sh(script)
	spec.PTY = &PTYConfig{Cols: cols, Rows: rows}
	return spec
}

// readUntil reads data events from sub until the collected output contains
// want n times, returning it and the last seq seen.
func readUntil(t *testing.T, sub *Subscription, want string, n int) (string, uint64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var b strings.Builder
	var last uint64
	for strings.Count(b.String(), want) < n {
		ev, err := sub.Next(ctx)
		if err != nil {
			t.Fatalf("waiting for %q, got %q: %v", want, b.String(), err)
		}
		if ev.Kind != Data {
			t.Fatalf("waiting for %q, got %q then %v", want, b.String(), ev.Kind)
		}
		if ev.Stream != Stdout {
			t.Fatalf("PTY output on %v", ev.Stream)
		}
		b.Write(ev.Data)
		last = ev.Seq
	}
	return b.String(), last
}

func TestPTYSizeAndTTY(t *testing.T) {
	s := newTestSupervisor(t, Options{})
	out := run(t, s, ptySpec("stty size; tty; exit 3", 100, 30))
	if !regexp.MustCompile(`^30 100\r\n/dev/pts/[0-9]+\r\n$`).MatchString(out.stdout.String()) {
		t.Fatalf("output %q", out.stdout.String())
	}
	if out.stderr.Len() != 0 || out.end.Exit.ExitCode != 3 || !out.end.Exit.Exited {
		t.Fatalf("stderr %q exit %+v", out.stderr.String(), out.end.Exit)
	}
	// Zero fields are 80x24; the child leads its own session.
	p := start(t, s, ptySpec(`stty size; ps -o sid= -p $$; ps -o pgid= -p $$`, 0, 0))
	out = collect(t, p, 0)
	if p.Kind() != KindPTY {
		t.Fatalf("kind %v", p.Kind())
	}
	lines := strings.Fields(out.stdout.String())
	pid := strconv.Itoa(p.Pid())
	if len(lines) != 4 || lines[0] != "24" || lines[1] != "80" || lines[2] != pid || lines[3] != pid {
		t.Fatalf("output %q (pid %s)", out.stdout.String(), pid)
	}
}

func TestPTYInputEchoResizeReplay(t *testing.T) {
	s := newTestSupervisor(t, Options{})
	ctx := context.Background()
	spec := Spec{Path: "/bin/sh", Args: []string{"sh"}, Env: append(testEnv, "PS1=$ "), PTY: &PTYConfig{}}
	p, sub, err := s.StartSubscribed(spec)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	if err := p.WriteInput(ctx, []byte("cat\n")); err != nil {
		t.Fatal(err)
	}
	if err := p.WriteInput(ctx, []byte("hello\n")); err != nil {
		t.Fatal(err)
	}
	// The terminal echoes the line, then cat writes it back (the lines
	// typed ahead may be echoed before the shell's prompt and cat's start).
	got, _ := readUntil(t, sub, "hello\r\n", 2)
	if strings.Count(got, "hello") != 2 {
		t.Fatalf("output %q", got)
	}
	// ^D ends cat; the shell then reports the new size.
	if err := p.WriteInput(ctx, []byte{4}); err != nil {
		t.Fatal(err)
	}
	if err := p.Resize(132, 43); err != nil {
		t.Fatal(err)
	}
	if err := p.WriteInput(ctx, []byte("stty size\n")); err != nil {
		t.Fatal(err)
	}
	_, last := readUntil(t, sub, "43 132\r\n", 1)
	if err := p.Resize(0, 10); !errors.Is(err, ErrInvalidSize) {
		t.Fatalf("Resize(0, 10): %v", err)
	}
	if err := p.WriteInput(ctx, []byte("exit 7\n")); err != nil {
		t.Fatal(err)
	}
	rest := drain(t, sub)
	if rest.end.Exit.ExitCode != 7 {
		t.Fatalf("exit %+v", rest.end.Exit)
	}
	waitDone(t, p, 5*time.Second)

	// Replay: everything from seq 1, and exactly from a later seq.
	all := collect(t, p, 0)
	if all.events[0].Seq != 1 || strings.Count(all.stdout.String(), "hello\r\n") != 2 || !strings.Contains(all.stdout.String(), "43 132") {
		t.Fatalf("replay %q", all.stdout.String())
	}
	tail := collect(t, p, last+1)
	if !strings.HasSuffix(all.stdout.String(), tail.stdout.String()) || strings.Contains(tail.stdout.String(), "43 132") {
		t.Fatalf("replay from %d: %q", last+1, tail.stdout.String())
	}

	if err := p.WriteInput(ctx, []byte("x")); !errors.Is(err, ErrProcessEnded) {
		t.Fatalf("WriteInput after end: %v", err)
	}
	if err := p.Resize(80, 24); !errors.Is(err, ErrProcessEnded) {
		t.Fatalf("Resize after end: %v", err)
	}
}

func TestPTYOperationsOnPipes(t *testing.T) {
	s := newTestSupervisor(t, Options{})
	p := start(t, s, sh("sleep 0.1"))
	if p.Kind() != KindProcess {
		t.Fatalf("kind %v", p.Kind())
	}
	if err := p.WriteInput(context.Background(), []byte("x")); !errors.Is(err, ErrNotPTY) {
		t.Fatalf("WriteInput: %v", err)
	}
	if err := p.Resize(80, 24); !errors.Is(err, ErrNotPTY) {
		t.Fatalf("Resize: %v", err)
	}
	waitDone(t, p, 5*time.Second)
}

func TestPTYCountsAgainstMaxLiveAndKill(t *testing.T) {
	s := newTestSupervisor(t, Options{MaxLive: 1})
	p := start(t, s, Spec{Path: "/bin/sh", Args: []string{"sh"}, Env: testEnv, PTY: &PTYConfig{}})
	if _, err := s.Start(sh("true")); !errors.Is(err, ErrTooManyProcesses) {
		t.Fatalf("second start: %v", err)
	}
	// An interactive shell ignores SIGTERM; SIGKILL ends it.
	if err := p.Signal(9); err != nil {
		t.Fatal(err)
	}
	out := collect(t, p, 0)
	if out.end.Exit.Status != StatusSignaled || out.end.Exit.Signal != 9 {
		t.Fatalf("exit %+v", out.end.Exit)
	}
}

func TestPTYNoFDLeak(t *testing.T) {
	s := newTestSupervisor(t, Options{})
	before := openFDs(t)
	out := run(t, s, ptySpec("ls -l /proc/self/fd", 0, 0))
	var fds []string
	for _, line := range strings.Split(strings.TrimSpace(out.stdout.String()), "\r\n") {
		f := strings.Fields(line)
		if len(f) < 3 || f[len(f)-2] != "->" {
			continue
		}
		target := f[len(f)-1]
		if strings.HasPrefix(target, "/proc/") {
			continue // ls's own directory
		}
		if !strings.HasPrefix(target, "/dev/pts/") {
			t.Errorf("fd %s -> %s", f[len(f)-3], target)
		}
		fds = append(fds, f[len(f)-3])
	}
	if strings.Join(fds, ",") != "0,1,2" {
		t.Fatalf("child fds %v:\n%s", fds, out.stdout.String())
	}
	// The master was closed once the output ended.
	deadline := time.Now().Add(2 * time.Second)
	for openFDs(t) > before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if after := openFDs(t); after > before {
		t.Fatalf("fds before %d, after %d", before, after)
	}
}

func TestPTYIdentity(t *testing.T) {
	needRoot(t, "identity switching")
	s := newTestSupervisor(t, Options{})
	spec := ptySpec(`id -u; stat -c %u "$(tty)"; stty size`, 0, 0)
	spec.Identity = &identity.Identity{Username: "u", UID: 1000, GID: 1000, Groups: []uint32{1000}, Home: "/"}
	spec.Dir = "/"
	out := run(t, s, spec)
	if got := strings.Fields(out.stdout.String()); strings.Join(got, " ") != "1000 1000 24 80" {
		t.Fatalf("output %q", out.stdout.String())
	}
}

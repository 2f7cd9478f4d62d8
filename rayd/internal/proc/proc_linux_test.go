package proc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rayito-dev/rayito/rayd/internal/identity"
)

var testEnv = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "LC_ALL=C"}

func newTestSupervisor(t testing.TB, opts Options) *Supervisor {
	t.Helper()
	s, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		s.Shutdown(ctx, time.Second)
	})
	return s
}

func sh(script string) Spec {
	return Spec{Path: "/bin/sh", Args: []string{"sh", "-c", script}, Env: testEnv}
}

func start(t testing.TB, s *Supervisor, spec Spec) *Process {
	t.Helper()
	p, err := s.Start(spec)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	return p
}

func waitDone(t testing.TB, p *Process, d time.Duration) {
	t.Helper()
	select {
	case <-p.Done():
	case <-time.After(d):
		t.Fatalf("process %d did not end within %v", p.Pid(), d)
	}
}

type output struct {
	stdout, stderr bytes.Buffer
	events         []Event // data events
	end            Event
}

// collect subscribes from fromSeq and reads until io.EOF, checking the
// stream contract: contiguous increasing seqs, exactly one End, then EOF.
func collect(t testing.TB, p *Process, fromSeq uint64) *output {
	t.Helper()
	sub, err := p.Subscribe(fromSeq)
	if err != nil {
		t.Fatalf("Subscribe(%d): %v", fromSeq, err)
	}
	defer sub.Close()
	return drain(t, sub)
}

func drain(t testing.TB, sub *Subscription) *output {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out := &output{}
	for {
		ev, err := sub.Next(ctx)
		if err == io.EOF {
			if out.end.Kind != End {
				t.Fatal("io.EOF without End")
			}
			return out
		}
		if err != nil {
			t.Fatalf("Next: %v", err)
		}
		switch ev.Kind {
		case Data:
			if out.end.Kind == End {
				t.Fatalf("data after End: %+v", ev)
			}
			if n := len(out.events); n > 0 && ev.Seq != out.events[n-1].Seq+1 {
				t.Fatalf("seq %d after %d", ev.Seq, out.events[n-1].Seq)
			}
			out.events = append(out.events, ev)
			if ev.Stream == Stdout {
				out.stdout.Write(ev.Data)
			} else {
				out.stderr.Write(ev.Data)
			}
		case End:
			if out.end.Kind == End {
				t.Fatal("second End")
			}
			if n := len(out.events); n > 0 && ev.Seq != out.events[n-1].Seq+1 {
				t.Fatalf("End seq %d after data seq %d", ev.Seq, out.events[n-1].Seq)
			}
			out.end = ev
		default:
			t.Fatalf("unexpected event %+v", ev)
		}
	}
}

func run(t testing.TB, s *Supervisor, spec Spec) *output {
	t.Helper()
	p := start(t, s, spec)
	out := collect(t, p, 0)
	waitDone(t, p, 5*time.Second)
	return out
}

// procStat returns state, ppid and pgrp from /proc/<pid>/stat.
func procStat(pid int) (state string, ppid, pgrp int, ok bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return "", 0, 0, false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return "", 0, 0, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 3 {
		return "", 0, 0, false
	}
	ppid, _ = strconv.Atoi(f[1])
	pgrp, _ = strconv.Atoi(f[2])
	return f[0], ppid, pgrp, true
}

func allPids() []int {
	ents, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range ents {
		if pid, err := strconv.Atoi(e.Name()); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}

func zombieChildren() []int {
	var out []int
	for _, pid := range allPids() {
		if state, ppid, _, ok := procStat(pid); ok && state == "Z" && ppid == os.Getpid() {
			out = append(out, pid)
		}
	}
	return out
}

func groupMembers(pgid int) []int {
	var out []int
	for _, pid := range allPids() {
		if _, _, pgrp, ok := procStat(pid); ok && pgrp == pgid {
			out = append(out, pid)
		}
	}
	return out
}

func openFDs(t testing.TB) int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

func needRoot(t *testing.T, what string) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: " + what)
	}
}

func TestEcho(t *testing.T) {
	s := newTestSupervisor(t, Options{})
	p := start(t, s, Spec{Path: "/bin/echo", Args: []string{"echo", "hello", "world"}, Env: testEnv})
	if p.Pid() <= 0 || p.StartedAt().IsZero() {
		t.Fatalf("pid %d started %v", p.Pid(), p.StartedAt())
	}
	out := collect(t, p, 0)
	if got := out.stdout.String(); got != "hello world\n" {
		t.Fatalf("stdout %q", got)
	}
	if out.stderr.Len() != 0 {
		t.Fatalf("stderr %q", out.stderr.String())
	}
	if out.events[0].Seq != 1 {
		t.Fatalf("first seq %d", out.events[0].Seq)
	}
	want := ExitInfo{ExitCode: 0, Exited: true, Status: StatusExited}
	if out.end.Exit != want {
		t.Fatalf("exit %+v", out.end.Exit)
	}
	waitDone(t, p, 5*time.Second)
	if got, ok := p.Exit(); !ok || got != want {
		t.Fatalf("Exit() = %+v, %v", got, ok)
	}
	if s.Live() != 0 || len(s.List()) != 0 {
		t.Fatalf("Live = %d, List = %d", s.Live(), len(s.List()))
	}
}

func TestStderrSeparate(t *testing.T) {
	s := newTestSupervisor(t, Options{})
	out := run(t, s, sh("echo out; echo err >&2; echo out2"))
	if out.stdout.String() != "out\nout2\n" || out.stderr.String() != "err\n" {
		t.Fatalf("stdout %q stderr %q", out.stdout.String(), out.stderr.String())
	}
}

func TestEnvAndDir(t *testing.T) {
	s := newTestSupervisor(t, Options{})
	dir := t.TempDir()
	spec := sh(`pwd; echo "$FOO"; env | wc -l`)
	spec.Env = []string{"FOO=bar"}
	spec.Dir = dir
	out := run(t, s, spec)
	lines := strings.Fields(out.stdout.String())
	// dash adds PWD (and sometimes OLDPWD) to the environment it exports.
	if len(lines) != 3 || lines[0] != dir || lines[1] != "bar" {
		t.Fatalf("stdout %q", out.stdout.String())
	}
	if n, _ := strconv.Atoi(lines[2]); n > 3 {
		t.Fatalf("child saw %d environment variables; rayd's environment leaked?", n)
	}
	// A nil Env is an empty environment, not rayd's.
	t.Setenv("RAYD_TEST_SECRET", "s3cret")
	out = run(t, s, Spec{Path: "/usr/bin/env", Args: []string{"env"}})
	if strings.Contains(out.stdout.String(), "RAYD_TEST_SECRET") {
		t.Fatal("nil Env inherited rayd's environment")
	}
}

func TestExitCode(t *testing.T) {
	s := newTestSupervisor(t, Options{})
	out := run(t, s, sh("exit 7"))
	if want := (ExitInfo{ExitCode: 7, Exited: true, Status: StatusExited}); out.end.Exit != want {
		t.Fatalf("exit %+v", out.end.Exit)
	}
	if len(out.events) != 0 || out.end.Seq != 1 {
		t.Fatalf("events %d, End seq %d", len(out.events), out.end.Seq)
	}
}

func TestKilledBySignal(t *testing.T) {
	s := newTestSupervisor(t, Options{})
	out := run(t, s, sh("kill -9 $$"))
	if want := (ExitInfo{ExitCode: 137, Signal: syscall.SIGKILL, Status: StatusSignaled}); out.end.Exit != want {
		t.Fatalf("exit %+v", out.end.Exit)
	}

	p := start(t, s, Spec{Path: "/bin/sleep", Args: []string{"sleep", "30"}, Env: testEnv})
	if err := p.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	waitDone(t, p, 5*time.Second)
	if got, _ := p.Exit(); got.ExitCode != 130 || got.Signal != syscall.SIGINT || got.Exited || got.Status != StatusSignaled {
		t.Fatalf("exit %+v", got)
	}
	if err := p.Signal(syscall.SIGKILL); !errors.Is(err, ErrProcessEnded) {
		t.Fatalf("Signal after end: %v", err)
	}
}

func TestSeqOrderAcrossStreams(t *testing.T) {
	s := newTestSupervisor(t, Options{})
	out := run(t, s, sh("echo a; sleep 0.1; echo b >&2; sleep 0.1; echo c; sleep 0.1; echo d >&2"))
	type ev struct {
		seq    uint64
		stream Stream
		data   string
	}
	var got []ev
	for _, e := range out.events {
		got = append(got, ev{e.Seq, e.Stream, string(e.Data)})
	}
	want := []ev{{1, Stdout, "a\n"}, {2, Stderr, "b\n"}, {3, Stdout, "c\n"}, {4, Stderr, "d\n"}}
	if !slices.Equal(got, want) {
		t.Fatalf("events %+v, want %+v", got, want)
	}
	if out.end.Seq != 5 {
		t.Fatalf("End seq %d", out.end.Seq)
	}
}

func TestReplay(t *testing.T) {
	s := newTestSupervisor(t, Options{})
	p := start(t, s, sh("for i in 1 2 3 4 5; do echo $i; sleep 0.05; done"))
	live := collect(t, p, 0) // subscribed while running
	waitDone(t, p, 5*time.Second)
	if live.stdout.String() != "1\n2\n3\n4\n5\n" {
		t.Fatalf("live stdout %q", live.stdout.String())
	}
	n := uint64(len(live.events))
	all := collect(t, p, 0)
	if all.stdout.String() != live.stdout.String() || all.events[0].Seq != 1 || all.end.Exit != live.end.Exit {
		t.Fatalf("replay from 0: %q from seq %d", all.stdout.String(), all.events[0].Seq)
	}
	mid := n/2 + 1
	part := collect(t, p, mid)
	if part.events[0].Seq != mid || uint64(len(part.events)) != n-mid+1 {
		t.Fatalf("replay from %d: first %d, %d events", mid, part.events[0].Seq, len(part.events))
	}
	for i, e := range part.events {
		if !bytes.Equal(e.Data, all.events[mid-1+uint64(i)].Data) {
			t.Fatalf("replayed chunk %d differs", e.Seq)
		}
	}
	end := collect(t, p, n+1)
	if len(end.events) != 0 || end.end.Kind != End {
		t.Fatalf("from next seq: %+v", end)
	}
	if _, err := p.Subscribe(n + 2); !errors.Is(err, ErrOutOfRange) {
		t.Fatalf("Subscribe beyond next: %v", err)
	}
}

func TestOutOfRangeAfterRingRolled(t *testing.T) {
	s := newTestSupervisor(t, Options{})
	p := start(t, s, sh("head -c 3000000 /dev/zero"))
	waitDone(t, p, 10*time.Second)
	if _, err := p.Subscribe(1); !errors.Is(err, ErrOutOfRange) {
		t.Fatalf("Subscribe(1) after 3 MB: %v", err)
	}
	out := collect(t, p, 0)
	first := out.events[0].Seq
	if first <= 1 {
		t.Fatalf("replay starts at %d", first)
	}
	total := out.stdout.Len()
	if total > DefaultRingBytes || total < DefaultRingBytes-readSize {
		t.Fatalf("replayed %d bytes, want the last ~1 MiB", total)
	}
	if held := s.held.Load(); held != int64(total) {
		t.Fatalf("held %d, want %d", held, total)
	}
	if _, err := p.Subscribe(first - 1); !errors.Is(err, ErrOutOfRange) {
		t.Fatalf("Subscribe(first-1): %v", err)
	}
	if part := collect(t, p, first+1); part.events[0].Seq != first+1 {
		t.Fatalf("Subscribe(first+1) starts at %d", part.events[0].Seq)
	}
	if out.end.Exit.ExitCode != 0 {
		t.Fatalf("exit %+v", out.end.Exit)
	}
}

func TestEndedRetention(t *testing.T) {
	s := newTestSupervisor(t, Options{EndedRetention: 300 * time.Millisecond})
	p := start(t, s, sh("echo hi"))
	waitDone(t, p, 5*time.Second)
	if got, err := s.Get(p.Pid()); err != nil || got != p {
		t.Fatalf("Get after end: %v", err)
	}
	if out := collect(t, p, 0); out.stdout.String() != "hi\n" {
		t.Fatalf("replay %q", out.stdout.String())
	}
	if len(s.List()) != 0 {
		t.Fatal("ended process listed")
	}
	deadline := time.Now().Add(5 * time.Second)
	for s.held.Load() != 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond) // the janitor evicts it
	}
	if _, err := s.Get(p.Pid()); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Get after retention: %v", err)
	}
	if s.held.Load() != 0 {
		t.Fatalf("held %d after eviction", s.held.Load())
	}
	if _, err := s.Get(1 << 30); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Get(unknown): %v", err)
	}
}

func TestSlowSubscriberDoesNotBlock(t *testing.T) {
	const total = 50_000_000
	s := newTestSupervisor(t, Options{})
	spec := sh("read x; head -c 50000000 /dev/zero")
	spec.Stdin = true
	p := start(t, s, spec)
	slow, err := p.Subscribe(0)
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	fast, err := p.Subscribe(0)
	if err != nil {
		t.Fatal(err)
	}
	defer fast.Close()
	if err := p.WriteStdin(context.Background(), []byte("go\n")); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	zeros := make([]byte, readSize)
	var got int
	want := uint64(1)
	for {
		ev, err := fast.Next(ctx)
		if err != nil {
			t.Fatalf("fast Next after %d bytes: %v", got, err)
		}
		if ev.Kind == End {
			if ev.Exit.ExitCode != 0 {
				t.Fatalf("exit %+v", ev.Exit)
			}
			break
		}
		if ev.Kind != Data || ev.Seq != want || ev.Stream != Stdout {
			t.Fatalf("fast got %v seq %d (want data seq %d) after %d bytes", ev.Kind, ev.Seq, want, got)
		}
		if !bytes.Equal(ev.Data, zeros[:len(ev.Data)]) {
			t.Fatal("corrupt data")
		}
		want++
		got += len(ev.Data)
	}
	if got != total {
		t.Fatalf("fast subscriber got %d bytes, want %d", got, total)
	}
	waitDone(t, p, 5*time.Second)
	ev, err := slow.Next(ctx)
	if err != nil || ev.Kind != Truncated || ev.Seq != 1 {
		t.Fatalf("slow got %+v, %v; want Truncated at 1", ev, err)
	}
	if _, err := slow.Next(ctx); err != io.EOF {
		t.Fatalf("slow after Truncated: %v", err)
	}
	if held := s.held.Load(); held > DefaultRingBytes {
		t.Fatalf("held %d after both subscribers are done", held)
	}
}

func TestStuckSubscriber(t *testing.T) {
	s := newTestSupervisor(t, Options{StuckAfter: 300 * time.Millisecond})
	p := start(t, s, sh("echo a; sleep 1; echo b"))
	stuck, _ := p.Subscribe(0)
	idle, _ := p.Subscribe(0)
	active, _ := p.Subscribe(0)
	defer stuck.Close()
	defer idle.Close()
	defer active.Close()

	if ev := next(t, idle); string(ev.Data) != "a\n" {
		t.Fatalf("idle got %+v", ev)
	}
	// active blocks in Next for ~1 s between a and b: waiting is consuming.
	activeOut := make(chan *output, 1)
	go func() { activeOut <- drain(t, active) }()
	var out *output
	select {
	case out = <-activeOut:
	case <-time.After(10 * time.Second):
		t.Fatal("active subscriber did not finish")
	}
	if out.stdout.String() != "a\nb\n" {
		t.Fatalf("active got %q", out.stdout.String())
	}
	// idle had nothing pending until b arrived, moments ago.
	if ev := next(t, idle); string(ev.Data) != "b\n" {
		t.Fatalf("idle got %+v, want b", ev)
	}
	// stuck has had "a" pending for over a second.
	if ev := next(t, stuck); ev.Kind != Truncated || ev.Seq != 1 {
		t.Fatalf("stuck got %+v, want Truncated", ev)
	}
	expectEOF(t, stuck)
}

func TestMaxLiveAndShutdown(t *testing.T) {
	s := newTestSupervisor(t, Options{MaxLive: 4})
	var ps []*Process
	for range 4 {
		ps = append(ps, start(t, s, Spec{Path: "/bin/sleep", Args: []string{"sleep", "30"}, Env: testEnv}))
	}
	if _, err := s.Start(sh("true")); !errors.Is(err, ErrTooManyProcesses) {
		t.Fatalf("Start beyond MaxLive: %v", err)
	}
	if s.Live() != 4 {
		t.Fatalf("Live = %d", s.Live())
	}
	list := s.List()
	if len(list) != 4 || !slices.IsSortedFunc(list, func(a, b *Process) int { return a.Pid() - b.Pid() }) {
		t.Fatalf("List = %v", list)
	}
	for _, p := range ps {
		if got, err := s.Get(p.Pid()); err != nil || got != p {
			t.Fatalf("Get(%d) = %v", p.Pid(), err)
		}
	}
	startedAt := time.Now()
	s.Shutdown(context.Background(), 2*time.Second)
	if d := time.Since(startedAt); d > 5*time.Second {
		t.Fatalf("Shutdown took %v", d)
	}
	for _, p := range ps {
		select {
		case <-p.Done():
		default:
			t.Fatalf("process %d still running after Shutdown", p.Pid())
		}
		if e, _ := p.Exit(); e.Signal != syscall.SIGTERM {
			t.Fatalf("exit %+v, want SIGTERM", e)
		}
		if err := unix.Kill(p.Pid(), 0); err != unix.ESRCH {
			t.Fatalf("kill(%d, 0) = %v after Shutdown", p.Pid(), err)
		}
	}
	if s.Live() != 0 {
		t.Fatalf("Live = %d after Shutdown", s.Live())
	}
	if _, err := s.Start(sh("true")); !errors.Is(err, ErrShuttingDown) {
		t.Fatalf("Start after Shutdown: %v", err)
	}
	s.Shutdown(context.Background(), time.Second) // idempotent
}

func TestTimeoutEscalation(t *testing.T) {
	s := newTestSupervisor(t, Options{KillGrace: 300 * time.Millisecond})
	spec := sh(`trap "" TERM; sleep 30`)
	spec.Timeout = 200 * time.Millisecond
	begin := time.Now()
	p := start(t, s, spec)
	out := collect(t, p, 0)
	want := ExitInfo{ExitCode: 137, Signal: syscall.SIGKILL, Status: StatusTimeout, Err: ExitErrDeadlineExceeded}
	if out.end.Exit != want {
		t.Fatalf("exit %+v, want %+v", out.end.Exit, want)
	}
	if d := time.Since(begin); d < 450*time.Millisecond || d > 10*time.Second {
		t.Fatalf("ended after %v", d)
	}

	// A process that dies on SIGTERM is not escalated.
	spec = Spec{Path: "/bin/sleep", Args: []string{"sleep", "30"}, Env: testEnv, Timeout: 100 * time.Millisecond}
	out = run(t, s, spec)
	want = ExitInfo{ExitCode: 143, Signal: syscall.SIGTERM, Status: StatusTimeout, Err: ExitErrDeadlineExceeded}
	if out.end.Exit != want {
		t.Fatalf("exit %+v, want %+v", out.end.Exit, want)
	}

	// A timeout that does not expire changes nothing.
	spec = sh("exit 3")
	spec.Timeout = time.Minute
	if out = run(t, s, spec); out.end.Exit.Status != StatusExited || out.end.Exit.ExitCode != 3 {
		t.Fatalf("exit %+v", out.end.Exit)
	}
}

func TestBackgroundChildHoldingPipe(t *testing.T) {
	s := newTestSupervisor(t, Options{})
	begin := time.Now()
	p := start(t, s, sh("sleep 5 & echo hi"))
	defer unix.Kill(-p.Pid(), syscall.SIGKILL) // the background sleep
	waitDone(t, p, 4*time.Second)
	t.Logf("ended after %v", time.Since(begin))
	out := collect(t, p, 0)
	if out.stdout.String() != "hi\n" || out.end.Exit.ExitCode != 0 {
		t.Fatalf("stdout %q exit %+v", out.stdout.String(), out.end.Exit)
	}
	// Output written by a background child before the drain ends is kept.
	p = start(t, s, sh("(sleep 0.05; echo late) & echo early"))
	out = collect(t, p, 0)
	if out.stdout.String() != "early\nlate\n" {
		t.Fatalf("stdout %q", out.stdout.String())
	}
}

func TestNoFDLeak(t *testing.T) {
	s := newTestSupervisor(t, Options{})
	// Keep other processes' pipes and some files open meanwhile.
	other := sh("cat")
	other.Stdin = true
	o := start(t, s, other)
	defer o.CloseStdin()
	f, err := os.Open("/etc/hostname")
	if err == nil {
		defer f.Close()
	}
	// A descriptor without close-on-exec, as rayd might inherit one from
	// whatever started it.
	inherited, err := unix.Dup(2)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(inherited)
	if flags, _ := unix.FcntlInt(uintptr(inherited), unix.F_GETFD, 0); flags&unix.FD_CLOEXEC != 0 {
		t.Fatal("dup(2) returned a close-on-exec descriptor")
	}
	spec := sh("ls -l /proc/self/fd")
	spec.Stdin = true
	for _, spec := range []Spec{sh("ls -l /proc/self/fd"), spec} {
		out := run(t, s, spec)
		var fds []int
		for _, line := range strings.Split(strings.TrimSpace(out.stdout.String()), "\n") {
			fields := strings.Fields(line)
			if len(fields) < 3 || fields[len(fields)-2] != "->" {
				continue // "total 0"
			}
			fd, err := strconv.Atoi(fields[len(fields)-3])
			if err != nil {
				t.Fatalf("line %q", line)
			}
			if fd > 2 && !strings.HasPrefix(fields[len(fields)-1], "/proc/") {
				t.Errorf("leaked fd: %q", line)
			}
			fds = append(fds, fd)
		}
		if len(fds) != 4 || fds[0] != 0 || fds[1] != 1 || fds[2] != 2 {
			t.Fatalf("child fds %v:\n%s", fds, out.stdout.String())
		}
	}
}

func readLimits(t *testing.T, text string) map[string][2]string {
	t.Helper()
	out := map[string][2]string{}
	for _, line := range strings.Split(text, "\n") {
		for _, name := range []string{"Max open files", "Max processes", "Max core file size"} {
			if rest, ok := strings.CutPrefix(line, name); ok {
				f := strings.Fields(rest)
				out[name] = [2]string{f[0], f[1]}
			}
		}
	}
	return out
}

func getrlimits(t *testing.T) [3]unix.Rlimit {
	var l [3]unix.Rlimit
	for i, r := range []int{unix.RLIMIT_NOFILE, unix.RLIMIT_NPROC, unix.RLIMIT_CORE} {
		if err := unix.Getrlimit(r, &l[i]); err != nil {
			t.Fatal(err)
		}
	}
	return l
}

func TestRlimits(t *testing.T) {
	s := newTestSupervisor(t, Options{})
	before := getrlimits(t)
	out := run(t, s, sh("ulimit -n; ulimit -p; ulimit -c; cat /proc/self/limits"))
	lines := strings.SplitN(out.stdout.String(), "\n", 4)
	if len(lines) < 4 || lines[0] != "4096" || lines[1] != "512" || lines[2] != "0" {
		t.Fatalf("ulimit -n/-p/-c printed %q", lines[:min(3, len(lines))])
	}
	lim := readLimits(t, lines[3])
	wantHard := s.plat.privileged
	for name, want := range map[string]string{"Max open files": "4096", "Max processes": "512", "Max core file size": "0"} {
		if lim[name][0] != want || (wantHard && lim[name][1] != want) {
			t.Errorf("%s = %v, want %s", name, lim[name], want)
		}
	}
	if after := getrlimits(t); after != before {
		t.Fatalf("rayd's limits changed: %+v -> %+v", before, after)
	}
	if !wantHard {
		return
	}

	// Unprivileged path: only the soft limits are lowered.
	s.plat.privileged = false
	out = run(t, s, sh("cat /proc/self/limits"))
	lim = readLimits(t, out.stdout.String())
	if lim["Max open files"] != [2]string{"4096", strconv.FormatUint(before[0].Max, 10)} {
		t.Errorf("unprivileged: open files %v, want 4096 / %d", lim["Max open files"], before[0].Max)
	}
	if after := getrlimits(t); after != before {
		t.Fatalf("rayd's limits changed: %+v -> %+v", before, after)
	}
}

func TestIdentitySwitch(t *testing.T) {
	needRoot(t, "switching to uid 1000")
	s := newTestSupervisor(t, Options{})
	spec := sh("id -u; id -g; id -G")
	spec.Dir = "/"
	spec.Identity = &identity.Identity{Username: "u", UID: 1000, GID: 1001, Groups: []uint32{1001, 2345, 3456}}
	out := run(t, s, spec)
	lines := strings.Split(strings.TrimSpace(out.stdout.String()), "\n")
	if len(lines) != 3 || lines[0] != "1000" || lines[1] != "1001" {
		t.Fatalf("stdout %q stderr %q", out.stdout.String(), out.stderr.String())
	}
	groups := strings.Fields(lines[2])
	slices.Sort(groups)
	if !slices.Equal(groups, []string{"1001", "2345", "3456"}) {
		t.Fatalf("id -G = %q", lines[2])
	}
	// An empty group list clears rayd's supplementary groups.
	spec.Identity = &identity.Identity{UID: 1000, GID: 1000}
	out = run(t, s, spec)
	if lines := strings.Split(strings.TrimSpace(out.stdout.String()), "\n"); len(lines) != 3 || lines[2] != "1000" {
		t.Fatalf("no groups: %q", out.stdout.String())
	}
}

func TestStdin(t *testing.T) {
	s := newTestSupervisor(t, Options{})
	ctx := context.Background()
	spec := Spec{Path: "/bin/cat", Args: []string{"cat"}, Env: testEnv, Stdin: true}
	p := start(t, s, spec)
	sub, _ := p.Subscribe(0)
	defer sub.Close()
	for _, msg := range []string{"hello\n", "world\n"} {
		if err := p.WriteStdin(ctx, []byte(msg)); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.CloseStdin(); err != nil {
		t.Fatal(err)
	}
	if err := p.WriteStdin(ctx, []byte("x")); !errors.Is(err, ErrStdinClosed) {
		t.Fatalf("write after close: %v", err)
	}
	if err := p.CloseStdin(); !errors.Is(err, ErrStdinClosed) {
		t.Fatalf("second close: %v", err)
	}
	out := drain(t, sub)
	if out.stdout.String() != "hello\nworld\n" || out.end.Exit.ExitCode != 0 {
		t.Fatalf("stdout %q exit %+v", out.stdout.String(), out.end.Exit)
	}
	waitDone(t, p, 5*time.Second)
	if err := p.WriteStdin(ctx, []byte("x")); !errors.Is(err, ErrProcessEnded) {
		t.Fatalf("write after end: %v", err)
	}

	// Without Spec.Stdin the child reads /dev/null.
	p = start(t, s, Spec{Path: "/bin/cat", Args: []string{"cat"}, Env: testEnv})
	if err := p.WriteStdin(ctx, []byte("x")); !errors.Is(err, ErrStdinNotEnabled) {
		t.Fatalf("WriteStdin without Stdin: %v", err)
	}
	if err := p.CloseStdin(); !errors.Is(err, ErrStdinNotEnabled) {
		t.Fatalf("CloseStdin without Stdin: %v", err)
	}
	waitDone(t, p, 5*time.Second)
}

func TestStdinBlockedWrite(t *testing.T) {
	s := newTestSupervisor(t, Options{})
	spec := Spec{Path: "/bin/sleep", Args: []string{"sleep", "30"}, Env: testEnv, Stdin: true}
	p := start(t, s, spec)
	defer p.Signal(syscall.SIGKILL)
	big := make([]byte, 4<<20) // far more than a pipe holds

	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if err := p.WriteStdin(ctx, big); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("full pipe with deadline: %v", err)
	}
	ctx2, cancel2 := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel2)
	if err := p.WriteStdin(ctx2, big); !errors.Is(err, context.Canceled) {
		t.Fatalf("full pipe with cancel: %v", err)
	}
	// CloseStdin unblocks a pending writer.
	errc := make(chan error, 1)
	go func() { errc <- p.WriteStdin(context.Background(), big) }()
	time.Sleep(100 * time.Millisecond)
	if err := p.CloseStdin(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-errc:
		if !errors.Is(err, ErrStdinClosed) {
			t.Fatalf("blocked write after CloseStdin: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("CloseStdin did not unblock the writer")
	}

	// The child closing its end yields ErrStdinClosed.
	spec = sh("exec 0<&-; sleep 30")
	spec.Stdin = true
	q := start(t, s, spec)
	defer q.Signal(syscall.SIGKILL)
	deadline := time.Now().Add(5 * time.Second)
	for {
		err := q.WriteStdin(context.Background(), []byte("x"))
		if errors.Is(err, ErrStdinClosed) {
			break
		}
		if err != nil || time.Now().After(deadline) {
			t.Fatalf("write to a closed pipe: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestShutdownKillsGroup(t *testing.T) {
	s, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	p := start(t, s, sh("sleep 30 & sleep 30"))
	// A member that ignores SIGTERM and keeps the group alive after the
	// leader is gone must get SIGKILL after the grace period.
	q := start(t, s, sh(`(trap "" TERM; sleep 30) & sleep 30`))
	var members []int
	deadline := time.Now().Add(5 * time.Second)
	for {
		mp, mq := groupMembers(p.Pid()), groupMembers(q.Pid())
		if len(mp) >= 2 && len(mq) >= 2 {
			members = append(mp, mq...)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("group members: %v %v", mp, mq)
		}
		time.Sleep(10 * time.Millisecond)
	}
	begin := time.Now()
	s.Shutdown(context.Background(), 300*time.Millisecond)
	t.Logf("Shutdown took %v", time.Since(begin))
	for _, pid := range members {
		if err := unix.Kill(pid, 0); err != unix.ESRCH {
			state, _, _, _ := procStat(pid)
			t.Errorf("pid %d still exists after Shutdown (state %q, kill: %v)", pid, state, err)
		}
	}
	for _, pr := range []*Process{p, q} {
		if _, ended := pr.Exit(); !ended {
			t.Errorf("process %d not ended", pr.Pid())
		}
	}
}

func TestShutdownContext(t *testing.T) {
	s, err := New(Options{KillGrace: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	p := start(t, s, sh(`trap "" TERM; sleep 30`))
	time.Sleep(50 * time.Millisecond) // let the trap be installed
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	begin := time.Now()
	s.Shutdown(ctx, time.Minute) // ctx ends the grace early
	if d := time.Since(begin); d > 5*time.Second {
		t.Fatalf("Shutdown took %v", d)
	}
	if e, ended := p.Exit(); !ended || e.Signal != syscall.SIGKILL {
		t.Fatalf("exit %+v ended %v", e, ended)
	}
}

func TestNoZombies(t *testing.T) {
	s := newTestSupervisor(t, Options{})
	p := start(t, s, sh("for i in 1 2 3; do sleep 0.1 & done; exit 0"))
	waitDone(t, p, 5*time.Second)
	time.Sleep(time.Second)
	if z := zombieChildren(); len(z) != 0 {
		t.Fatalf("zombie children: %v", z)
	}
	// The orphans were reparented to us (subreaper) and reaped.
	q := start(t, s, sh("sleep 0.2 & echo $!"))
	out := collect(t, q, 0)
	orphan, _ := strconv.Atoi(strings.TrimSpace(out.stdout.String()))
	if _, ppid, _, ok := procStat(orphan); ok && ppid != os.Getpid() {
		t.Fatalf("orphan %d has ppid %d, want %d", orphan, ppid, os.Getpid())
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, _, _, ok := procStat(orphan); !ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("orphan %d not reaped", orphan)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestStartErrors(t *testing.T) {
	s := newTestSupervisor(t, Options{})
	dir := t.TempDir()
	noexec := filepath.Join(dir, "script")
	if err := os.WriteFile(noexec, []byte("#!/bin/sh\necho hi\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Warm up, then measure goroutines and descriptors.
	run(t, s, sh("true"))
	fds, goroutines := openFDs(t), runtime.NumGoroutine()

	secret := "/nonexistent/secret-name"
	_, err := s.Start(Spec{Path: secret, Args: []string{"x"}, Env: testEnv})
	if !errors.Is(err, ErrNotFound) || !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("missing executable: %v", err)
	}
	if strings.Contains(err.Error(), "secret") {
		t.Fatalf("error message leaks the path: %v", err)
	}
	if _, err := s.Start(Spec{Path: noexec, Env: testEnv}); !errors.Is(err, fs.ErrPermission) {
		t.Fatalf("non-executable: %v", err)
	}
	if _, err := s.Start(Spec{Path: dir, Env: testEnv}); !errors.Is(err, fs.ErrPermission) {
		t.Fatalf("directory as executable: %v", err)
	}
	_, err = s.Start(Spec{Path: "/bin/true", Env: testEnv, Dir: filepath.Join(dir, "missing")})
	if !errors.Is(err, fs.ErrNotExist) || errors.Is(err, ErrNotFound) {
		t.Fatalf("missing dir: %v", err)
	}
	if _, err := s.Start(Spec{Path: "/bin/true", Env: testEnv, Dir: noexec}); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("file as dir: %v", err)
	}
	if _, err := s.Start(Spec{}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("empty path: %v", err)
	}
	if s.Live() != 0 {
		t.Fatalf("Live = %d", s.Live())
	}
	if n := openFDs(t); n != fds {
		t.Fatalf("descriptors: %d before, %d after failed starts", fds, n)
	}
	time.Sleep(50 * time.Millisecond)
	if n := runtime.NumGoroutine(); n > goroutines {
		t.Fatalf("goroutines: %d before, %d after failed starts", goroutines, n)
	}
}

func TestLookPath(t *testing.T) {
	dir := t.TempDir()
	exe := filepath.Join(dir, "tool")
	if err := os.WriteFile(exe, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	plain := filepath.Join(dir, "plain")
	if err := os.WriteFile(plain, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	other := t.TempDir()
	if err := os.WriteFile(filepath.Join(other, "plain"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(other, "adir"), 0o755); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		file, path, dir, want string
		errIs                 []error
	}{
		{file: "tool", path: "/nonexistent:" + dir, want: exe},
		{file: "plain", path: dir + ":" + other, want: filepath.Join(other, "plain")},
		{file: "plain", path: dir, errIs: []error{fs.ErrPermission}},
		{file: "adir", path: other, errIs: []error{ErrNotFound, fs.ErrNotExist}},
		{file: "tool", path: "", errIs: []error{ErrNotFound, fs.ErrNotExist}},
		{file: "tool", path: "::.:relative", errIs: []error{ErrNotFound, fs.ErrNotExist}},
		{file: "missing", path: dir, errIs: []error{ErrNotFound, fs.ErrNotExist}},
		{file: exe, path: "", want: exe},
		{file: plain, path: "/bin", errIs: []error{fs.ErrPermission}},
		{file: "sh", path: "/nonexistent:/bin", want: "/bin/sh"},
		{file: "", path: "/bin", errIs: []error{ErrNotFound}},
		// Relative to the child's working directory, not rayd's.
		{file: "./tool", path: "", dir: dir, want: exe},
		{file: "./plain", path: "", dir: dir, errIs: []error{fs.ErrPermission}},
		{file: "./missing", path: "", dir: dir, errIs: []error{ErrNotFound, fs.ErrNotExist}},
		{file: "../" + filepath.Base(dir) + "/tool", path: "", dir: dir, want: exe},
		{file: "./tool", path: "", dir: "", errIs: []error{ErrNotFound}},
	}
	for _, tc := range tests {
		got, err := LookPath(tc.file, tc.path, tc.dir)
		if tc.errIs == nil {
			if err != nil || got != tc.want {
				t.Errorf("LookPath(%q, %q) = %q, %v; want %q", tc.file, tc.path, got, err, tc.want)
			}
			continue
		}
		for _, target := range tc.errIs {
			if !errors.Is(err, target) {
				t.Errorf("LookPath(%q, %q) = %q, %v; want error matching %v", tc.file, tc.path, got, err, target)
			}
		}
	}
	// "adir" is a directory: not found, not a permission problem.
	if _, err := LookPath("adir", other, "/"); errors.Is(err, fs.ErrPermission) {
		t.Errorf("directory reported as permission error")
	}
}

func TestConcurrentStarts(t *testing.T) {
	s := newTestSupervisor(t, Options{})
	var wg sync.WaitGroup
	errs := make(chan error, 32)
	for i := range 32 {
		wg.Go(func() {
			p, err := s.Start(sh(fmt.Sprintf("echo %d; echo e%d >&2", i, i)))
			if err != nil {
				errs <- err
				return
			}
			sub, err := p.Subscribe(0)
			if err != nil {
				errs <- err
				return
			}
			defer sub.Close()
			var stdout, stderr string
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			for {
				ev, err := sub.Next(ctx)
				if err != nil {
					errs <- err
					return
				}
				if ev.Kind == End {
					break
				}
				if ev.Stream == Stdout {
					stdout += string(ev.Data)
				} else {
					stderr += string(ev.Data)
				}
			}
			if stdout != fmt.Sprintf("%d\n", i) || stderr != fmt.Sprintf("e%d\n", i) {
				errs <- fmt.Errorf("process %d: %q %q", i, stdout, stderr)
			}
			if _, err := s.Get(p.Pid()); err != nil {
				errs <- err
			}
			_ = s.List()
			_ = s.Live()
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func BenchmarkStartEcho(b *testing.B) {
	s := newTestSupervisor(b, Options{})
	spec := Spec{Path: "/bin/true", Args: []string{"true"}, Env: testEnv}
	b.ReportAllocs()
	for b.Loop() {
		p, err := s.Start(spec)
		if err != nil {
			b.Fatal(err)
		}
		<-p.Done()
	}
}

// A lone subscriber that reads slower than the process writes gets every
// byte: the readers pause (pipe backpressure) instead of cutting it.
func TestLoneSlowSubscriberGetsEverything(t *testing.T) {
	const total = 6_000_000
	s := newTestSupervisor(t, Options{MaxSubscriberLag: 1 << 20, RingBytes: 256 << 10})
	p := start(t, s, sh("head -c 6000000 /dev/zero"))
	sub, err := p.Subscribe(0)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	got := 0
	for {
		ev, err := sub.Next(ctx)
		if err != nil {
			t.Fatalf("after %d bytes: %v", got, err)
		}
		if ev.Kind == End {
			break
		}
		if ev.Kind != Data {
			t.Fatalf("after %d bytes got %v", got, ev.Kind)
		}
		got += len(ev.Data)
		if got < 3_000_000 {
			time.Sleep(200 * time.Microsecond) // slower than the pipe
		}
	}
	if got != total {
		t.Fatalf("got %d bytes, want %d", got, total)
	}
	if held := s.held.Load(); held > 256<<10 {
		t.Fatalf("held %d bytes after the subscriber caught up", held)
	}
}

// A lone subscriber that stops reading holds the process for StuckAfter at
// most; then it is cut and the process runs to its end.
func TestLoneStuckSubscriberReleasesTheProcess(t *testing.T) {
	s := newTestSupervisor(t, Options{MaxSubscriberLag: 1 << 20, RingBytes: 256 << 10, StuckAfter: 300 * time.Millisecond})
	p := start(t, s, sh("head -c 8000000 /dev/zero"))
	sub, err := p.Subscribe(0)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	waitDone(t, p, 30*time.Second)
	if x, _ := p.Exit(); x.ExitCode != 0 {
		t.Fatalf("exit %+v", x)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		ev, err := sub.Next(ctx)
		if err != nil {
			t.Fatalf("no Truncated before %v", err)
		}
		if ev.Kind == Truncated {
			break
		}
		if ev.Kind == End {
			t.Fatal("a stuck subscriber received the whole output")
		}
	}
}

// StartSubscribed sees the first byte even when the process floods its
// pipe before anyone could call Subscribe.
func TestStartSubscribedMissesNothing(t *testing.T) {
	s := newTestSupervisor(t, Options{RingBytes: 64 << 10, MaxSubscriberLag: 1 << 20})
	p, sub, err := s.StartSubscribed(sh("printf first; head -c 4000000 /dev/zero"))
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	time.Sleep(100 * time.Millisecond) // the process runs ahead of the reader
	out := drain(t, sub)
	if !strings.HasPrefix(out.stdout.String(), "first") || out.stdout.Len() != 4000005 {
		t.Fatalf("got %d bytes starting %q", out.stdout.Len(), out.stdout.String()[:min(8, out.stdout.Len())])
	}
	waitDone(t, p, 10*time.Second)
}

// TestNextBatch: chunks already in the ring go out together, split where
// the stream changes and where max would be passed; an event's Seq is its
// last chunk's, and a subscription from Seq+1 goes on right after it.
func TestNextBatch(t *testing.T) {
	s := newTestSupervisor(t, Options{})
	p := start(t, s, sh("for i in 1 2 3; do echo out$i; sleep 0.05; done; echo err >&2; sleep 0.05; echo last"))
	waitDone(t, p, 5*time.Second)
	chunks := collect(t, p, 0).events // one event per chunk
	if len(chunks) < 5 {
		t.Fatalf("%d chunks, want one per write: %+v", len(chunks), chunks)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	batches := func(from uint64, max int) (evs []Event) {
		sub, err := p.Subscribe(from)
		if err != nil {
			t.Fatal(err)
		}
		defer sub.Close()
		for {
			ev, err := sub.NextBatch(ctx, max)
			if err != nil || ev.Kind == End {
				return evs
			}
			evs = append(evs, ev)
		}
	}
	type ev struct {
		seq    uint64
		stream Stream
		data   string
	}
	flat := func(evs []Event) (out []ev) {
		for _, e := range evs {
			out = append(out, ev{e.Seq, e.Stream, string(e.Data)})
		}
		return out
	}
	n := uint64(len(chunks))
	want := []ev{{n - 2, Stdout, "out1\nout2\nout3\n"}, {n - 1, Stderr, "err\n"}, {n, Stdout, "last\n"}}
	if got := flat(batches(0, 1<<20)); !slices.Equal(got, want) {
		t.Fatalf("batches %+v, want %+v", got, want)
	}
	// max 10 bytes: "out1\nout2\n" fits, "out3\n" goes alone.
	if got := flat(batches(0, 10)); len(got) != 4 || got[0].data != "out1\nout2\n" || got[0].seq != 2 || got[1].data != "out3\n" {
		t.Fatalf("batches within 10 bytes: %+v", got)
	}
	// Resume after the first batch.
	first := batches(0, 1<<20)[0]
	if got := flat(batches(first.Seq+1, 1<<20)); !slices.Equal(got, want[1:]) {
		t.Fatalf("from %d: %+v, want %+v", first.Seq+1, got, want[1:])
	}
	// max 0 is Next: one chunk each.
	if got := batches(0, 0); len(got) != len(chunks) {
		t.Fatalf("max 0: %d events, want %d", len(got), len(chunks))
	}
}

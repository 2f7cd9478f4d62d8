//go:build linux

package launcher

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rayito-dev/rayito/localvm/internal/cgroup"
)

// counterScript writes an increasing counter to /tmp/c every 10 ms.
const counterScript = `i=0; while :; do i=$((i+1)); echo $i > /tmp/c.new; mv /tmp/c.new /tmp/c; sleep 0.01; done`

// readCounter reads the counter from the host, through rayd's root.
func readCounter(t *testing.T, rec Record) int {
	t.Helper()
	for range 50 {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(rec.Pid) + "/root/tmp/c")
		if err == nil {
			if n, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
				return n
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("no counter in the sandbox's /tmp/c")
	return 0
}

func freezerState(t *testing.T, l *Launcher, rec Record) string {
	t.Helper()
	dir, v2 := cgroup.FreezerOf(l.cg.Dirs(rec.ID))
	if v2 {
		b, _ := os.ReadFile(filepath.Join(dir, "cgroup.events"))
		if strings.Contains(string(b), "frozen 1") {
			return "FROZEN"
		}
		return "THAWED"
	}
	b, _ := os.ReadFile(filepath.Join(dir, "freezer.state"))
	return strings.TrimSpace(string(b))
}

// TestFreezeThaw: a frozen sandbox runs nothing (a counter written every
// 10 ms stops), and after Thaw the same process goes on; both are
// idempotent. A frozen sandbox terminates without leaving a process or a
// cgroup behind.
func TestFreezeThaw(t *testing.T) {
	l := privileged(t, "")
	if err := l.SuspendSupport(); err != nil {
		t.Fatalf("privileged launcher without suspend: %v", err)
	}
	spec := newSpec(t, l)
	inst := launch(t, l, spec)
	rec := inst.Record()
	token := install(t, inst)
	pid, body := startedPid(t, inst.APIAddr(), token, "sh", "-c", counterScript)
	defer body.Close()
	readCounter(t, rec)
	time.Sleep(100 * time.Millisecond)

	ctx := t.Context()
	for range 2 {
		if err := inst.Freeze(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if s := freezerState(t, l, rec); s != "FROZEN" {
		t.Fatalf("freezer state %s", s)
	}
	c1 := readCounter(t, rec)
	time.Sleep(300 * time.Millisecond)
	if c2 := readCounter(t, rec); c2 != c1 {
		t.Fatalf("the counter went on while frozen: %d then %d", c1, c2)
	}
	for range 2 {
		if err := inst.Thaw(ctx); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(200 * time.Millisecond)
	if c3 := readCounter(t, rec); c3 <= c1 {
		t.Fatalf("the counter did not go on after the thaw: %d then %d", c1, c3)
	}
	// The same process: its pid in the sandbox still runs the counter.
	out, _ := run(t, inst.APIAddr(), token, "cat /proc/"+strconv.Itoa(pid)+"/cmdline | tr '\\0' ' '")
	if !strings.Contains(out, "i=$((i+1))") {
		t.Fatalf("the counter's process after the thaw: %q", out)
	}

	// Terminate while frozen.
	if err := inst.Freeze(ctx); err != nil {
		t.Fatal(err)
	}
	tctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if err := inst.Terminate(tctx); err != nil {
		t.Fatalf("Terminate of a frozen sandbox: %v", err)
	}
	if left := leftovers(l, rec); len(left) != 0 {
		t.Fatalf("a frozen sandbox's Terminate left %q", left)
	}
	if pids := initPids(map[string]bool{rec.ID: true}); len(pids) != 0 {
		t.Fatalf("inits left: %v", pids)
	}
	if err := inst.Freeze(ctx); !errors.Is(err, ErrGone) {
		t.Fatalf("Freeze after Terminate: %v", err)
	}
}

// TestFreezeAdopted: an adopted sandbox freezes and thaws too.
func TestFreezeAdopted(t *testing.T) {
	a := privileged(t, "")
	inst := launch(t, a, newSpec(t, a))
	rec := inst.Record()
	b := newLauncher(t, a.opts.StateDir, nil)
	adopted, err := b.Adopt(rec)
	if err != nil {
		t.Fatal(err)
	}
	if err := adopted.Freeze(t.Context()); err != nil {
		t.Fatal(err)
	}
	if s := freezerState(t, a, rec); s != "FROZEN" {
		t.Fatalf("freezer state %s", s)
	}
	if err := adopted.Thaw(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n, ok := adopted.OOMKills(); !ok || n != 0 {
		t.Fatalf("adopted OOMKills = %d, %v", n, ok)
	}
	health(t, adopted.APIAddr())
}

// TestExitStatusSignal: rayd killed from the host reports the signal.
func TestExitStatusSignal(t *testing.T) {
	l := privileged(t, "")
	inst := launch(t, l, newSpec(t, l))
	if _, ok := inst.ExitStatus(); ok {
		t.Fatal("ExitStatus known while running")
	}
	if err := syscall.Kill(inst.Record().Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitDone(t, inst, 5*time.Second)
	if st, ok := inst.ExitStatus(); !ok || st.Signal != syscall.SIGKILL || st.Code != 0 {
		t.Fatalf("ExitStatus = %+v, %v", st, ok)
	}
	if code, ok := inst.ExitCode(); !ok || code != 137 {
		t.Fatalf("ExitCode = %d, %v", code, ok)
	}
}

// TestOOMKills: the sandbox cgroup's OOM kill counter counts a hog killed
// at the memory limit (rayd lives on); with rayd made the likelier victim
// (its oom_score_adj 1000, the hog's -1000, set from the host: it needs
// CAP_SYS_RESOURCE, and is skipped without), the OOM killer kills rayd
// itself: SIGKILL and the counter up.
func TestOOMKills(t *testing.T) {
	l := privileged(t, "")
	spec := newSpec(t, l)
	spec.MemoryBytes = 128 << 20
	inst := launch(t, l, spec)
	rec := inst.Record()
	token := install(t, inst)
	n0, ok := inst.OOMKills()
	if !ok {
		t.Fatal("no OOM kill counter")
	}
	out, _ := run(t, inst.APIAddr(), token, `head -c 400000000 /dev/zero | tail > /dev/null; echo rc=$?`)
	if !strings.Contains(out, "rc=137") {
		t.Fatalf("memory hog: %q", out)
	}
	n1, _ := inst.OOMKills()
	if n1 <= n0 {
		t.Fatalf("OOM kills %d then %d", n0, n1)
	}
	health(t, inst.APIAddr())

	// Now rayd is the victim. The hog waits for /tmp/go; its shell (and so
	// its children) gets -1000 before. Lowering a score takes
	// CAP_SYS_RESOURCE, which the launcher also needs to protect rayd
	// (protectFromOOM): without it the kernel keeps each process's floor,
	// and the test cannot be sure to make rayd the OOM killer's choice.
	t.Run("rayd", func(t *testing.T) {
		if err := protectFromOOM(rec.Pid); err != nil {
			t.Skipf("needs CAP_SYS_RESOURCE, which this machine lacks: %v", err)
		}
		_, body := startedPid(t, inst.APIAddr(), token, "sh", "-c", `while [ ! -e /tmp/go ]; do sleep 0.02; done; head -c 400000000 /dev/zero | tail > /dev/null`)
		defer body.Close()
		time.Sleep(100 * time.Millisecond)
		dir := ""
		for _, d := range rec.Cgroups {
			if exists(filepath.Join(d, "cgroup.procs")) {
				dir = d
				break
			}
		}
		pids, err := cgroup.Pids(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range pids {
			if p == rec.Pid {
				continue
			}
			path := "/proc/" + strconv.Itoa(p) + "/oom_score_adj"
			if err := os.WriteFile(path, []byte("-1000"), 0); err != nil && !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("lowering the hog's oom_score_adj with CAP_SYS_RESOURCE: %v", err)
			}
		}
		if err := os.WriteFile("/proc/"+strconv.Itoa(rec.Pid)+"/oom_score_adj", []byte("1000"), 0); err != nil {
			t.Fatal(err)
		}
		go func() { _, _ = runQuiet(inst.APIAddr(), token, "touch /tmp/go") }()
		waitDone(t, inst, 30*time.Second)
		st, ok := inst.ExitStatus()
		n2, _ := inst.OOMKills()
		if !ok || st.Signal != syscall.SIGKILL || n2 <= n1 {
			t.Fatalf("rayd ended with %+v (%v), OOM kills %d then %d", st, ok, n1, n2)
		}
	})
}

// TestRaydDescriptors: rayd holds its cgroup's memory events file and the
// lifecycle FIFO's write end (when this rayd takes the flags); a process
// it starts has only 0-2. A "suspend" line on the FIFO becomes a suspend
// request.
func TestRaydDescriptors(t *testing.T) {
	l := privileged(t, "")
	flags := raydFlags()
	t.Logf("rayd flags: %v", flags)
	spec := newSpec(t, l)
	inst := launch(t, l, spec)
	rec := inst.Record()
	token := install(t, inst)
	targets := map[string]bool{}
	ents, _ := os.ReadDir("/proc/" + strconv.Itoa(rec.Pid) + "/fd")
	for _, e := range ents {
		if s, err := os.Readlink("/proc/" + strconv.Itoa(rec.Pid) + "/fd/" + e.Name()); err == nil {
			targets[filepath.Base(s)] = true
		}
	}
	if flags[raydMemoryEventsFlag] && !targets["memory.oom_control"] && !targets["memory.events"] {
		t.Errorf("rayd does not hold its memory events file: %v", targets)
	}
	if flags[raydLifecycleFlag] && !targets[lifecycleFIFO] {
		t.Errorf("rayd does not hold the lifecycle fifo: %v", targets)
	}
	// ls opens the directory it lists (/proc/<its pid>/fd): any other
	// descriptor above 2 would be inherited.
	out, _ := run(t, inst.APIAddr(), token, `ls -l /proc/self/fd/ | awk '/->/ { print $(NF-2), $NF }'`)
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		fd, target, _ := strings.Cut(line, " ")
		if n, err := strconv.Atoi(fd); err != nil || n > 2 && !strings.HasPrefix(target, "/proc/") {
			t.Errorf("a sandbox process holds fd %q → %s", fd, target)
		}
	}
	if !flags[raydLifecycleFlag] {
		t.Skip("this rayd has no " + raydLifecycleFlag + " yet: the lifecycle fifo is not created")
	}
	fifo := filepath.Join(launcherDir(spec.Dir), lifecycleFIFO)
	if fi, err := os.Lstat(fifo); err != nil || fi.Mode()&os.ModeNamedPipe == 0 || fi.Mode().Perm() != 0o600 {
		t.Fatalf("fifo: %v %v", fi, err)
	}
	w, err := os.OpenFile(fifo, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	w.WriteString("nonsense\n" + strings.Repeat("suspend", 20) + "\n")
	select {
	case <-inst.SuspendRequests():
		t.Fatal("a request from garbage")
	case <-time.After(100 * time.Millisecond):
	}
	w.WriteString("suspend\n")
	select {
	case <-inst.SuspendRequests():
	case <-time.After(5 * time.Second):
		t.Fatal("no suspend request")
	}
}

// TestLifecycleFIFO: the FIFO's reader delivers "suspend" lines, coalesced,
// ignores other and overlong lines, and ends when the instance finishes.
func TestLifecycleFIFO(t *testing.T) {
	dir := t.TempDir()
	f, w, err := makeLifecycle(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(w)
	i := &instance{l: &Launcher{log: testLogger(t)}, rec: Record{ID: "x"}, done: make(chan struct{})}
	i.startLifecycle(f)
	write := func(s string) {
		if _, err := unix.Write(w, []byte(s)); err != nil {
			t.Fatal(err)
		}
	}
	expect := func(want bool) {
		t.Helper()
		select {
		case <-i.SuspendRequests():
			if !want {
				t.Fatal("unexpected request")
			}
		case <-time.After(100 * time.Millisecond):
			if want {
				t.Fatal("no request")
			}
		}
	}
	write("suspend\n")
	expect(true)
	write("resume\nsuspend now\n" + strings.Repeat("x", 200) + "suspend\nsus")
	expect(false)
	write("pend\n")
	expect(true)
	write("suspend\nsuspend\nsuspend\n") // coalesced: one pending
	time.Sleep(50 * time.Millisecond)
	expect(true)
	expect(false)
	// A FIFO that is not the platform's is refused.
	other := filepath.Join(t.TempDir(), lifecycleFIFO)
	if err := os.WriteFile(other, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := openLifecycle(filepath.Dir(other)); err == nil {
		t.Fatal("a regular file opened as the lifecycle fifo")
	}
	if _, err := openLifecycle(t.TempDir()); !errors.Is(err, errNoLifecycle) {
		t.Fatalf("no fifo: %v", err)
	}
	i.finish(ExitStatus{}, false) // closes f: the reader ends
	if _, err := unix.Write(w, []byte("suspend\n")); !errors.Is(err, unix.EPIPE) {
		t.Fatalf("a write without the platform's end: %v, want EPIPE", err)
	}
	expect(false)
}

// runQuiet runs a shell script in the sandbox, ignoring what it says
// (for a goroutine: no t).
func runQuiet(apiAddr, token, script string) (int64, error) {
	req := map[string]any{"process": map[string]any{"cmd": "sh", "args": []string{"-c", script}}}
	body, _ := json.Marshal(req)
	var env bytes.Buffer
	env.WriteByte(0)
	_ = binary.Write(&env, binary.BigEndian, uint32(len(body)))
	env.Write(body)
	hr, _ := http.NewRequest(http.MethodPost, "http://"+apiAddr+"/rayito.rayd.v1.ProcessService/Start", &env)
	hr.Header.Set("Content-Type", "application/connect+json")
	hr.Header.Set("x-access-token", token)
	resp, err := httpClient.Do(hr)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	return io.Copy(io.Discard, resp.Body)
}

// TestFreezeOnCgroupV2 runs TestFreezeThaw's checks on the cgroup2 code
// path (cgroup.freeze, cgroup.events; cgroup.kill of a frozen sandbox), on
// the unified hierarchy of a hybrid machine when this one uses v1.
func TestFreezeOnCgroupV2(t *testing.T) {
	l := privileged(t, "")
	if l.cg.Version() != cgroup.V2 {
		useUnifiedV2(t, l)
	}
	spec := newSpec(t, l)
	inst := launch(t, l, spec)
	rec := inst.Record()
	if _, v2 := cgroup.FreezerOf(rec.Cgroups); !v2 {
		t.Fatalf("no cgroup.freeze in %v", rec.Cgroups)
	}
	token := install(t, inst)
	_, body := startedPid(t, inst.APIAddr(), token, "sh", "-c", counterScript)
	defer body.Close()
	readCounter(t, rec)
	if err := inst.Freeze(t.Context()); err != nil {
		t.Fatal(err)
	}
	if s := freezerState(t, l, rec); s != "FROZEN" {
		t.Fatalf("freezer state %s", s)
	}
	c1 := readCounter(t, rec)
	time.Sleep(300 * time.Millisecond)
	if c2 := readCounter(t, rec); c2 != c1 {
		t.Fatalf("the counter went on while frozen: %d then %d", c1, c2)
	}
	if err := inst.Thaw(t.Context()); err != nil {
		t.Fatal(err)
	}
	// Thawed, it goes on (polled: a loaded machine may take a while to
	// schedule it).
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		c3 := readCounter(t, rec)
		if c3 > c1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the counter did not go on: %d then %d", c1, c3)
		}
	}
	if err := inst.Freeze(t.Context()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	if err := inst.Terminate(ctx); err != nil {
		t.Fatalf("Terminate of a frozen sandbox: %v", err)
	}
	if left := leftovers(l, rec); len(left) != 0 {
		t.Fatalf("left %q", left)
	}
}

// TestAsUserNoFreezer: a rootless (and an unisolated) launcher cannot
// suspend, and says why.
func TestAsUserNoFreezer(t *testing.T) {
	asUser(t)
	for _, mod := range []func(*Options){nil, func(o *Options) { o.noRootless, o.AllowUnisolated = true, true }} {
		l := newLauncher(t, "", mod)
		err := l.SuspendSupport()
		word := map[Isolation]string{IsolationRootless: "runs rootless", IsolationNone: "runs unisolated"}[l.Isolation()]
		if !errors.Is(err, ErrNoFreezer) || word == "" || !strings.Contains(err.Error(), word) {
			t.Fatalf("%s: SuspendSupport = %v", l.Isolation(), err)
		}
		spec := newSpec(t, l)
		spec.Internet = l.Isolation() == IsolationNone
		if spec.Internet && l.Check(spec) != nil {
			continue
		}
		inst := launch(t, l, spec)
		if err := inst.Freeze(t.Context()); !errors.Is(err, ErrNoFreezer) {
			t.Fatalf("%s: Freeze = %v", l.Isolation(), err)
		}
		if _, ok := inst.OOMKills(); ok || inst.SuspendRequests() != nil {
			t.Fatalf("%s: an OOM counter or a lifecycle channel", l.Isolation())
		}
	}
}

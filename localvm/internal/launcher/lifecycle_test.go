//go:build linux

package launcher

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/nftables"

	"github.com/rayito-dev/rayito/localvm/internal/hostnet"
)

// counts is what a sandbox could leave behind on the host.
type counts struct {
	Procs    int // descendants of the test process
	Inits    int // processes anywhere running as one of the tests' inits
	Mounts   int // mounts of the host's namespace at or under the launcher's state directory
	NetNS    int // distinct network namespaces of the above processes and this one
	Veths    int // links of the test scope
	Cgroups  int // sandbox directories under the test scope's cgroup parents
	NftRules int // rules in the test scope's table
	UIDs     int // uid range allocations of the test scope
	FDs      int // descriptors of the test process
}

func netnsOf(pid int) string {
	s, _ := os.Readlink("/proc/" + strconv.Itoa(pid) + "/ns/net")
	return s
}

// initPids returns the pids of processes whose argv is [InitArgv0, id] for
// one of ids.
func initPids(ids map[string]bool) []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil {
			continue
		}
		argv := strings.Split(string(b), "\x00")
		if len(argv) >= 2 && argv[0] == InitArgv0 && ids[argv[1]] {
			out = append(out, pid)
		}
	}
	return out
}

func snapshot(t *testing.T, l *Launcher, ids map[string]bool) counts {
	t.Helper()
	var c counts
	desc := descendants(os.Getpid())
	c.Procs = len(desc)
	inits := initPids(ids)
	c.Inits = len(inits)
	ns := map[string]bool{netnsOf(os.Getpid()): true}
	for pid := range desc {
		ns[netnsOf(pid)] = true
	}
	for _, pid := range inits {
		ns[netnsOf(pid)] = true
	}
	delete(ns, "")
	c.NetNS = len(ns)
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	// Only the launcher's: the machine's mount table also changes with
	// the tests of other packages running beside this one.
	for _, line := range strings.Split(string(mi), "\n") {
		if f := strings.Fields(line); len(f) > 4 && (f[4] == l.opts.StateDir || strings.HasPrefix(f[4], l.opts.StateDir+"/")) {
			c.Mounts++
		}
	}
	veths, err := hostnet.NewVeths().List(testNames.isVeth)
	if err != nil {
		t.Fatal(err)
	}
	c.Veths = len(veths)
	for _, dirs := range l.cg.List(validID) {
		c.Cgroups += len(dirs)
	}
	conn, err := nftables.New()
	if err != nil {
		t.Fatal(err)
	}
	tbl := &nftables.Table{Name: testNames.table, Family: nftables.TableFamilyINet}
	for _, ch := range tableChains {
		rules, err := conn.GetRules(tbl, &nftables.Chain{Name: ch, Table: tbl})
		if err == nil {
			c.NftRules += len(rules)
		}
	}
	c.UIDs = len(l.uidAllocations())
	fds, _ := os.ReadDir("/proc/self/fd")
	c.FDs = len(fds)
	return c
}

// cycle launches a sandbox with Internet access, starts background
// processes in it, and terminates it.
func cycle(t *testing.T, l *Launcher, ids *sync.Map) {
	t.Helper()
	spec := newSpec(t, l)
	spec.Internet = true
	ids.Store(spec.ID, true)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	inst, err := l.Launch(ctx, spec)
	if err != nil {
		t.Fatalf("Launch: %v", err)
	}
	token := install(t, inst)
	_, body := startedPid(t, inst.APIAddr(), token, "sh", "-c", "sleep 600 & sleep 600 & wait")
	body.Close()
	if err := inst.Terminate(ctx); err != nil {
		t.Fatalf("Terminate: %v", err)
	}
	select {
	case <-inst.Done():
	default:
		t.Fatal("Done is open after Terminate")
	}
}

// TestNoLeaks runs 20 launch/terminate cycles, two at a time, and compares
// what exists on the host before and after.
func TestNoLeaks(t *testing.T) {
	l := privileged(t, "")
	var ids sync.Map
	cycle(t, l, &ids) // warm up: the table and the cgroup parents now exist
	idSet := func() map[string]bool {
		m := map[string]bool{}
		ids.Range(func(k, _ any) bool { m[k.(string)] = true; return true })
		return m
	}
	// Idle HTTP connections and finished children settle first.
	time.Sleep(100 * time.Millisecond)
	before := snapshot(t, l, idSet())

	// The counters see a live sandbox.
	spec := newSpec(t, l)
	spec.Internet = true
	ids.Store(spec.ID, true)
	inst := launch(t, l, spec)
	_, body := startedPid(t, inst.APIAddr(), install(t, inst), "sh", "-c", "sleep 600 & sleep 600 & wait")
	defer body.Close()
	time.Sleep(100 * time.Millisecond)
	during := snapshot(t, l, idSet())
	if during.Procs < before.Procs+4 || during.Inits != before.Inits+1 || during.NetNS != before.NetNS+1 ||
		during.Veths != before.Veths+1 || during.Cgroups <= before.Cgroups || during.NftRules != before.NftRules+2 ||
		l.userns && during.UIDs != before.UIDs+1 {
		t.Fatalf("counters miss a live sandbox: before %+v, during %+v", before, during)
	}
	body.Close()
	if err := inst.Terminate(context.Background()); err != nil {
		t.Fatal(err)
	}

	start := time.Now()
	t.Run("cycles", func(t *testing.T) {
		for w := 0; w < 2; w++ {
			t.Run(strconv.Itoa(w), func(t *testing.T) {
				t.Parallel()
				for i := 0; i < 10; i++ {
					cycle(t, l, &ids)
				}
			})
		}
	})
	elapsed := time.Since(start)
	var after counts
	for deadline := time.Now().Add(5 * time.Second); ; {
		after = snapshot(t, l, idSet())
		if after == before || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("20 cycles in %s; before %+v; after %+v", elapsed.Round(time.Millisecond), before, after)
	if after != before {
		t.Fatalf("leak: before %+v, after %+v", before, after)
	}
	if before.Veths != 0 || before.Cgroups != 0 || before.Inits != 0 || before.UIDs != 0 {
		t.Fatalf("leftovers before the cycles: %+v", before)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.slots) != 0 || len(l.insts) != 0 {
		t.Fatalf("launcher still tracks %d slots, %d instances", len(l.slots), len(l.insts))
	}
}

func waitDone(t *testing.T, inst Instance, d time.Duration) {
	t.Helper()
	select {
	case <-inst.Done():
	case <-time.After(d):
		t.Fatalf("Done not closed after %s", d)
	}
}

// leftovers reports which of a sandbox's resources exist on the host.
func leftovers(l *Launcher, rec Record) []string {
	var out []string
	for _, d := range l.cg.Dirs(rec.ID) {
		if exists(d) {
			out = append(out, "cgroup "+d)
		}
	}
	if vs, _ := hostnet.NewVeths().List(func(n string) bool { return n == rec.Veth }); len(vs) > 0 {
		out = append(out, "veth "+rec.Veth)
	}
	for _, ch := range l.fw.RulesOf(rec.ID) {
		out = append(out, "nft rule in "+ch)
	}
	if exists(launcherDir(rec.Dir)) {
		out = append(out, "dir "+launcherDir(rec.Dir))
	}
	if base, ok := l.uidAllocations()[rec.ID]; ok {
		out = append(out, "uid range "+strconv.FormatUint(uint64(base), 10))
	}
	return out
}

// TestCrashAndCleanup kills a sandbox's init from outside: Done closes, the
// leftovers stay until Cleanup removes them all.
func TestCrashAndCleanup(t *testing.T) {
	l := privileged(t, "")
	spec := newSpec(t, l)
	spec.Internet = true
	inst := launch(t, l, spec)
	rec := inst.Record()
	if !l.fw.HasRules(rec.ID) {
		t.Fatal("a sandbox with Internet has no rules")
	}
	if b, _ := os.ReadFile("/proc/sys/net/ipv4/ip_forward"); strings.TrimSpace(string(b)) != "1" {
		t.Fatal("ip_forward is off for a sandbox with Internet")
	}
	if err := syscall.Kill(rec.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitDone(t, inst, 5*time.Second)
	if code, ok := inst.ExitCode(); !ok || code != 137 {
		t.Fatalf("ExitCode = %d, %v", code, ok)
	}
	left := leftovers(l, rec)
	if !strings.Contains(strings.Join(left, "\n"), "nft rule") || !strings.Contains(strings.Join(left, "\n"), "cgroup") {
		t.Fatalf("expected leftovers after a crash, got %q", left)
	}
	if err := l.Cleanup(rec); err != nil {
		t.Fatal(err)
	}
	if left := leftovers(l, rec); len(left) > 0 {
		t.Fatalf("Cleanup left %q", left)
	}
	if err := l.Cleanup(rec); err != nil {
		t.Fatalf("second Cleanup: %v", err)
	}
	// A platform that restarted cleans up from the record alone.
	spec2 := newSpec(t, l)
	spec2.Internet = true
	inst2 := launch(t, l, spec2)
	rec2 := inst2.Record()
	l2 := newLauncher(t, l.opts.StateDir, nil)
	if err := l2.Cleanup(rec2); err != nil { // kills the live sandbox too
		t.Fatal(err)
	}
	waitDone(t, inst2, 5*time.Second)
	if left := leftovers(l, rec2); len(left) > 0 {
		t.Fatalf("Cleanup from a record left %q", left)
	}
}

// TestSweep: a restarted platform sweeps the leftovers of a sandbox it was
// not told to keep, and keeps (then adopts) the one it was.
func TestSweep(t *testing.T) {
	l1 := privileged(t, "")
	deadSpec, liveSpec := newSpec(t, l1), newSpec(t, l1)
	deadSpec.Internet, liveSpec.Internet = true, true
	dead, live := launch(t, l1, deadSpec), launch(t, l1, liveSpec)
	deadRec, liveRec := dead.Record(), live.Record()
	if err := syscall.Kill(deadRec.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitDone(t, dead, 5*time.Second)

	l2 := newLauncher(t, l1.opts.StateDir, nil)
	if err := l2.Sweep([]Record{liveRec}); err != nil {
		t.Fatal(err)
	}
	left := leftovers(l2, deadRec)
	if len(left) != 1 || !strings.HasPrefix(left[0], "dir ") {
		// Sweep cannot know sandbox directories: only the launcher's files
		// remain, for Cleanup.
		t.Fatalf("Sweep left %q", left)
	}
	got := strings.Join(leftovers(l2, liveRec), "\n")
	wants := []string{"cgroup ", "veth ", "nft rule in egress", "nft rule in postrouting", "dir "}
	if l2.userns {
		wants = append(wants, "uid range ")
	}
	for _, want := range wants {
		if !strings.Contains(got, want) {
			t.Fatalf("Sweep touched the kept sandbox: it has only %q", got)
		}
	}
	health(t, live.APIAddr())
	if err := l2.Cleanup(deadRec); err != nil {
		t.Fatal(err)
	}
	if left := leftovers(l2, deadRec); len(left) != 0 {
		t.Fatalf("Cleanup left %q", left)
	}
	adopted, err := l2.Adopt(liveRec)
	if err != nil {
		t.Fatal(err)
	}
	health(t, adopted.APIAddr())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := adopted.Terminate(ctx); err != nil {
		t.Fatal(err)
	}
	waitDone(t, live, 5*time.Second)
	if left := leftovers(l2, liveRec); len(left) != 0 {
		t.Fatalf("Terminate of an adopted sandbox left %q", left)
	}
}

// TestAdopt: a second launcher on the same state dir adopts a running
// sandbox; records of dead or recycled pids are refused with ErrGone.
func TestAdopt(t *testing.T) {
	a := privileged(t, "")
	spec := newSpec(t, a)
	inst := launch(t, a, spec)
	rec := inst.Record()

	b := newLauncher(t, a.opts.StateDir, nil)
	adopted, err := b.Adopt(rec)
	if err != nil {
		t.Fatal(err)
	}
	if again, err := b.Adopt(rec); err != nil || again != adopted {
		t.Fatalf("second Adopt: %v, %v", again, err)
	}
	if adopted.APIAddr() != inst.APIAddr() || adopted.ID() != rec.ID {
		t.Fatalf("adopted %s %s", adopted.ID(), adopted.APIAddr())
	}
	health(t, adopted.APIAddr())
	token := install(t, adopted)
	if out, _ := run(t, adopted.APIAddr(), token, "echo adopted"); out != "adopted\n" {
		t.Fatalf("output %q", out)
	}
	if _, ok := adopted.ExitCode(); ok {
		t.Fatal("ExitCode known for an adopted sandbox")
	}
	// B allocates around A's /30.
	spec2 := newSpec(t, b)
	other := launch(t, b, spec2)
	if other.Record().GuestIP == rec.GuestIP {
		t.Fatal("two sandboxes share a /30")
	}

	recycled := rec
	recycled.PidStartTime++
	c := newLauncher(t, a.opts.StateDir, nil)
	if _, err := c.Adopt(recycled); !errors.Is(err, ErrGone) {
		t.Fatalf("Adopt with another start time: %v", err)
	}
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	dead := rec
	dead.Pid = cmd.Process.Pid
	if _, err := c.Adopt(dead); !errors.Is(err, ErrGone) {
		t.Fatalf("Adopt of a dead pid: %v", err)
	}
	bad := rec
	bad.Cgroups = []string{"/sys/fs/cgroup/memory"}
	if _, err := c.Adopt(bad); err == nil || errors.Is(err, ErrGone) {
		t.Fatalf("Adopt of a record naming a foreign cgroup: %v", err)
	}
	bad = rec
	bad.Dir = "/"
	if err := c.Cleanup(bad); err == nil {
		t.Fatal("Cleanup of a record outside the state dir succeeded")
	}

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := adopted.Terminate(ctx); err != nil {
		t.Fatal(err)
	}
	waitDone(t, adopted, time.Second)
	waitDone(t, inst, 5*time.Second)
	if err := inst.Terminate(ctx); err != nil {
		t.Fatalf("Terminate by the original launcher after adoption: %v", err)
	}
	if left := leftovers(a, rec); len(left) != 0 {
		t.Fatalf("left %q", left)
	}
}

// TestLaunchFailureCleansUp: a sandbox whose setup fails leaves nothing.
func TestLaunchFailureCleansUp(t *testing.T) {
	l := privileged(t, "")
	spec := newSpec(t, l)
	// A file where the launcher's directory would go makes prepareDir fail
	// early; a hostname the kernel refuses makes the init fail late.
	ctx := context.Background()
	bad := spec
	bad.Dir = filepath.Join(l.opts.StateDir, "missing", "dir")
	if _, err := l.Launch(ctx, bad); err == nil {
		t.Fatal("Launch into a missing dir succeeded")
	}
	before := snapshot(t, l, map[string]bool{spec.ID: true})
	failInit = func(cfg *initConfig) { cfg.Hostname = strings.Repeat("h", 100) }
	defer func() { failInit = nil }()
	_, err := l.Launch(ctx, spec)
	if err == nil || !strings.Contains(err.Error(), "sandbox setup failed") || !strings.Contains(err.Error(), "hostname") {
		t.Fatalf("Launch with a broken hostname: %v", err)
	}
	failInit = nil
	after := snapshot(t, l, map[string]bool{spec.ID: true})
	if before != after {
		t.Fatalf("a failed launch leaked: before %+v after %+v", before, after)
	}
	if left := leftovers(l, Record{ID: spec.ID, Dir: spec.Dir, Veth: testNames.vethName(spec.ID)}); len(left) != 0 {
		t.Fatalf("left %q", left)
	}
	// The id can be launched again.
	inst := launch(t, l, spec)
	health(t, inst.APIAddr())
}

// tableExists reports whether the test scope's nftables table exists.
func tableExists(t *testing.T) bool {
	t.Helper()
	c, err := nftables.New()
	if err != nil {
		t.Fatal(err)
	}
	tables, err := c.ListTablesOfFamily(nftables.TableFamilyINet)
	if err != nil {
		t.Fatal(err)
	}
	for _, tbl := range tables {
		if tbl.Name == testNames.table {
			return true
		}
	}
	return false
}

// TestRelease checks that Release keeps the scope's table while a sandbox
// lives, removes it (and its lock file and the cgroup parents) once none
// is left, and that
// the next launch brings it back with its static rules. Not parallel: any
// sandbox of the scope keeps the table.
func TestRelease(t *testing.T) {
	l := privileged(t, "")
	inst := launch(t, l, newSpec(t, l))
	if err := l.Release(); err != nil {
		t.Fatal(err)
	}
	if !tableExists(t) {
		t.Fatal("Release removed the table of a live sandbox")
	}
	if !exists(l.fw.LockPath()) {
		t.Fatalf("Release removed the lock file %s of a live sandbox's table", l.fw.LockPath())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := inst.Terminate(ctx); err != nil {
		t.Fatal(err)
	}
	if err := l.Release(); err != nil {
		t.Fatal(err)
	}
	if tableExists(t) {
		t.Fatal("the table outlived the scope's last sandbox")
	}
	if exists(l.fw.LockPath()) {
		t.Errorf("the table's lock file %s outlived it", l.fw.LockPath())
	}
	for _, d := range l.cg.Roots() {
		if exists(d) {
			t.Errorf("cgroup parent %s left", d)
		}
	}
	// A new sandbox gets its table back, and is confined as before.
	again := launch(t, l, newSpec(t, l))
	if !l.fw.BaseOK() {
		t.Fatal("no static rules after Release and a new launch")
	}
	if again.Record().GuestIP == "" {
		t.Fatal("no guest address")
	}
}

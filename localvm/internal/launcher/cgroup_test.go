//go:build linux

package launcher

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestCgroupV2Kill exercises the cgroup v2 code path (CLONE_INTO_CGROUP,
// cgroup.kill, removal) on this machine's cgroup2 hierarchy: the real one
// on a pure cgroup2 machine, else the controller-less unified hierarchy of
// a hybrid machine (without limits, which need controllers).
func TestCgroupV2Kill(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: creates cgroups")
	}
	mounts, err := cgroupMounts()
	if err != nil {
		t.Fatal(err)
	}
	var cg *cgroups
	if c, err := detectCgroups(testNames.cgroupParent); err == nil && c.version == cgroupV2 {
		cg = c
	} else {
		for _, m := range mounts {
			if m.fstype == "cgroup2" {
				cg = &cgroups{version: cgroupV2, v2root: m.point, parent: testNames.cgroupParent}
				break
			}
		}
	}
	if cg == nil {
		t.Skip("needs a cgroup2 hierarchy")
	}
	t.Cleanup(func() { _ = os.Remove(filepath.Join(cg.v2root, cg.parent)) })
	id := "microvm-cgroup-v2-test"
	dirs, fd, err := cg.create(id, 256<<20, 100)
	if err != nil {
		t.Fatal(err)
	}
	defer removeCgroups(dirs, time.Now().Add(5*time.Second))
	if len(dirs) != 1 || fd < 0 {
		t.Fatalf("dirs %v fd %d", dirs, fd)
	}
	if cg.setLimits {
		for file, want := range map[string]string{"memory.max": "268435456", "pids.max": "100"} {
			b, _ := os.ReadFile(filepath.Join(dirs[0], file))
			if strings.TrimSpace(string(b)) != want {
				t.Errorf("%s = %q", file, b)
			}
		}
	}
	cmd := exec.Command("sh", "-c", "sleep 60 & sleep 60 & wait")
	cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: fd}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	syscall.Close(fd)
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	for end := time.Now().Add(5 * time.Second); ; {
		pids, _ := cgroupPids(dirs[0])
		if len(pids) == 3 {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("cgroup has %v", pids)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if !cg.ownsDir(dirs[0], id) || cg.ownsDir(dirs[0], "other") || cg.ownsDir(cg.v2root, id) {
		t.Fatal("ownsDir")
	}
	if got := cg.list(); len(got[id]) != 1 {
		t.Fatalf("list %v", got)
	}
	if err := killCgroups(dirs, time.Now().Add(5*time.Second)); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-waited:
		if ws := cmd.ProcessState.Sys().(syscall.WaitStatus); !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
			t.Fatalf("sh ended with %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("sh survived cgroup.kill")
	}
	if err := removeCgroups(dirs, time.Now().Add(5*time.Second)); err != nil {
		t.Fatal(err)
	}
	if exists(dirs[0]) {
		t.Fatal("cgroup survives")
	}
}

// TestIsolatedOnCgroupV2 runs a whole privileged sandbox on the cgroup2
// code path (CLONE_INTO_CGROUP with the namespaces, cgroup.kill on
// Terminate), on the unified hierarchy of a hybrid machine.
func TestIsolatedOnCgroupV2(t *testing.T) {
	l := privileged(t, "")
	if l.cg.version == cgroupV2 {
		t.Skip("the other tests already run on cgroup v2 here")
	}
	mounts, err := cgroupMounts()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range mounts {
		if m.fstype == "cgroup2" {
			l.cg = &cgroups{version: cgroupV2, v2root: m.point, parent: testNames.cgroupParent}
		}
	}
	if l.cg.version != cgroupV2 {
		t.Skip("needs a cgroup2 hierarchy")
	}
	t.Cleanup(func() { _ = os.Remove(filepath.Join(l.cg.v2root, l.cg.parent)) })
	spec := newSpec(t, l)
	inst := launch(t, l, spec)
	rec := inst.Record()
	if len(rec.Cgroups) != 1 || !strings.HasPrefix(rec.Cgroups[0], l.cg.v2root+"/") {
		t.Fatalf("cgroups %v", rec.Cgroups)
	}
	token := install(t, inst)
	_, body := startedPid(t, inst.APIAddr(), token, "sh", "-c", "sleep 600 & sleep 600 & wait")
	body.Close()
	time.Sleep(100 * time.Millisecond)
	if pids, _ := cgroupPids(rec.Cgroups[0]); len(pids) < 4 {
		t.Fatalf("cgroup members %v", pids)
	}
	if err := inst.Terminate(context.Background()); err != nil {
		t.Fatal(err)
	}
	if left := leftovers(l, rec); len(left) != 0 {
		t.Fatalf("left %q", left)
	}
}

// TestCgroupV1FreezerKill exercises the v1 freezer kill when this machine
// has v1 hierarchies.
func TestCgroupV1FreezerKill(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: creates cgroups")
	}
	cg, err := detectCgroups(testNames.cgroupParent)
	if err != nil || cg.version != cgroupV1 {
		t.Skip("needs cgroup v1 hierarchies")
	}
	id := "microvm-cgroup-v1-test"
	dirs, _, err := cg.create(id, 64<<20, 50)
	if err != nil {
		t.Fatal(err)
	}
	defer removeCgroups(dirs, time.Now().Add(5*time.Second))
	// A process that keeps forking: the freezer stops it from escaping.
	cmd := exec.Command("sh", "-c", "while :; do sleep 60 & done")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(waited) }()
	if err := addProc(dirs, cmd.Process.Pid); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	pidsDir := filepath.Join(cg.v1["pids"], cg.parent, id)
	if pids, _ := cgroupPids(pidsDir); len(pids) < 10 {
		t.Fatalf("only %d processes", len(pids))
	}
	if err := killCgroups(dirs, time.Now().Add(5*time.Second)); err != nil {
		t.Fatal(err)
	}
	<-waited
	if err := removeCgroups(dirs, time.Now().Add(5*time.Second)); err != nil {
		t.Fatal(err)
	}
	for _, d := range dirs {
		if exists(d) {
			t.Fatalf("%s survives", d)
		}
	}
}

//go:build linux

package cgroup

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// testParent is the tests' parent directory under each hierarchy, apart
// from a real platform's and from the launcher tests'.
const testParent = "rayito-localvm-cgtest"

// TestCgroupV2Kill exercises the cgroup v2 code path (CLONE_INTO_CGROUP,
// cgroup.kill, removal) on this machine's cgroup2 hierarchy: the real one
// on a pure cgroup2 machine, else the controller-less unified hierarchy of
// a hybrid machine (without limits, which need controllers).
func TestCgroupV2Kill(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: creates cgroups")
	}
	cg, err := Detect(testParent)
	if err != nil || cg.Version() != V2 {
		if cg, err = UnifiedWithoutLimits(testParent); err != nil {
			t.Skip("needs a cgroup2 hierarchy")
		}
	}
	t.Cleanup(func() { removeRoots(cg) })
	id := "microvm-cgroup-v2-test"
	dirs, fd, err := cg.Create(id, 256<<20, 100)
	if err != nil {
		t.Fatal(err)
	}
	defer Remove(dirs, time.Now().Add(5*time.Second))
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
		pids, _ := Pids(dirs[0])
		if len(pids) == 3 {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("cgroup has %v", pids)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if !cg.Owns(dirs[0], id) || cg.Owns(dirs[0], "other") || cg.Owns(cg.v2root, id) {
		t.Fatal("ownsDir")
	}
	if got := cg.List(func(string) error { return nil }); len(got[id]) != 1 {
		t.Fatalf("list %v", got)
	}
	if err := Kill(dirs, time.Now().Add(5*time.Second)); err != nil {
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
	if err := Remove(dirs, time.Now().Add(5*time.Second)); err != nil {
		t.Fatal(err)
	}
	if exists(dirs[0]) {
		t.Fatal("cgroup survives")
	}
}

// TestCgroupV1FreezerKill exercises the v1 freezer kill when this machine
// has v1 hierarchies.
func TestCgroupV1FreezerKill(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: creates cgroups")
	}
	cg, err := Detect(testParent)
	if err != nil || cg.Version() != V1 {
		t.Skip("needs cgroup v1 hierarchies")
	}
	t.Cleanup(func() { removeRoots(cg) })
	id := "microvm-cgroup-v1-test"
	dirs, _, err := cg.Create(id, 64<<20, 50)
	if err != nil {
		t.Fatal(err)
	}
	defer Remove(dirs, time.Now().Add(5*time.Second))
	// A process that keeps forking: the freezer stops it from escaping.
	cmd := exec.Command("sh", "-c", "while :; do sleep 60 & done")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(waited) }()
	if err := AddProc(dirs, cmd.Process.Pid); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	pidsDir := filepath.Join(cg.v1["pids"], cg.parent, id)
	if pids, _ := Pids(pidsDir); len(pids) < 10 {
		t.Fatalf("only %d processes", len(pids))
	}
	if err := Kill(dirs, time.Now().Add(5*time.Second)); err != nil {
		t.Fatal(err)
	}
	<-waited
	if err := Remove(dirs, time.Now().Add(5*time.Second)); err != nil {
		t.Fatal(err)
	}
	for _, d := range dirs {
		if exists(d) {
			t.Fatalf("%s survives", d)
		}
	}
}

// removeRoots removes the tests' parent directories (empty by then).
func removeRoots(cg *Layout) {
	for _, r := range cg.Roots() {
		_ = os.Remove(r)
	}
}

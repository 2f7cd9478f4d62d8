//go:build linux

package cgroup

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestFreezerFiles: SetFrozen's protocol on stand-in files (v1
// freezer.state going through FREEZING; v2 cgroup.events), and the OOM
// kill counter of both formats.
func TestFreezerFiles(t *testing.T) {
	v1 := t.TempDir()
	if err := os.WriteFile(filepath.Join(v1, "freezer.state"), []byte("THAWED\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := SetFrozen(t.Context(), v1, false, true); err != nil { // a plain file reads back what was written
		t.Fatal(err)
	}
	v2 := t.TempDir()
	events := filepath.Join(v2, "cgroup.events")
	_ = os.WriteFile(filepath.Join(v2, "cgroup.freeze"), []byte("0\n"), 0o600)
	_ = os.WriteFile(events, []byte("populated 1\nfrozen 0\n"), 0o600)
	go func() {
		time.Sleep(50 * time.Millisecond)
		_ = os.WriteFile(events, []byte("populated 1\nfrozen 1\n"), 0o600)
	}()
	start := time.Now()
	if err := SetFrozen(t.Context(), v2, true, true); err != nil || time.Since(start) < 50*time.Millisecond {
		t.Fatalf("v2 freeze: %v after %v", err, time.Since(start))
	}
	if d, isV2 := FreezerOf([]string{t.TempDir(), v2}); d != v2 || !isV2 {
		t.Fatalf("FreezerOf: %s %v", d, isV2)
	}
	if d, isV2 := FreezerOf([]string{v2, v1}); d != v1 || isV2 {
		t.Fatalf("FreezerOf prefers v1's freezer.state: %s %v", d, isV2)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Millisecond)
	defer cancel()
	if err := SetFrozen(ctx, v2, true, false); err == nil { // never "frozen 0" again
		t.Fatal("a thaw that never shows")
	}
	for in, want := range map[string]uint64{
		"oom_kill_disable 0\nunder_oom 0\noom_kill 7\n":                7,
		"low 0\nhigh 0\nmax 12\noom 3\noom_kill 2\noom_group_kill 0\n": 2,
	} {
		if n, ok := ParseOOMKill([]byte(in)); !ok || n != want {
			t.Errorf("ParseOOMKill(%q) = %d, %v", in, n, ok)
		}
	}
	if _, ok := ParseOOMKill([]byte("oom 1\n")); ok {
		t.Error("a counter from no oom_kill line")
	}
}

// TestMemoryEventsFile: v1's memory.oom_control is preferred, v2's
// memory.events taken otherwise, "" without either.
func TestMemoryEventsFile(t *testing.T) {
	v1, v2 := t.TempDir(), t.TempDir()
	_ = os.WriteFile(filepath.Join(v1, "memory.oom_control"), nil, 0o600)
	_ = os.WriteFile(filepath.Join(v2, "memory.events"), nil, 0o600)
	if got := MemoryEventsFile([]string{t.TempDir(), v2}); got != filepath.Join(v2, "memory.events") {
		t.Errorf("v2: %q", got)
	}
	if got := MemoryEventsFile([]string{v1}); got != filepath.Join(v1, "memory.oom_control") {
		t.Errorf("v1: %q", got)
	}
	if got := MemoryEventsFile([]string{t.TempDir()}); got != "" {
		t.Errorf("none: %q", got)
	}
}

const hybridMountinfo = `24 31 0:22 / /sys rw,nosuid,nodev,noexec,relatime shared:7 - sysfs sysfs rw
30 24 0:26 / /sys/fs/cgroup ro,nosuid,nodev,noexec shared:9 - tmpfs tmpfs ro,mode=755
31 30 0:27 / /sys/fs/cgroup/unified rw,nosuid,nodev,noexec,relatime shared:10 - cgroup2 cgroup2 rw,nsdelegate
35 30 0:31 / /sys/fs/cgroup/memory rw,nosuid,nodev,noexec,relatime shared:15 - cgroup cgroup rw,memory
36 30 0:32 / /sys/fs/cgroup/pids rw,nosuid,nodev,noexec,relatime shared:16 - cgroup cgroup rw,pids
37 30 0:33 / /sys/fs/cgroup/freezer rw,nosuid,nodev,noexec,relatime shared:17 - cgroup cgroup rw,freezer
38 30 0:34 / /sys/fs/cgroup/cpu,cpuacct rw,nosuid,nodev,noexec,relatime shared:18 - cgroup cgroup rw,cpu,cpuacct
39 30 0:35 / /sys/fs/cgroup/with\040space rw - cgroup cgroup rw,net_cls
malformed line
40 30 0:36 / /x - cgroup
`

// TestParseMountinfo: only cgroup mounts, escaped spaces decoded, short
// and malformed lines skipped.
func TestParseMountinfo(t *testing.T) {
	got, err := parseMountinfo(strings.NewReader(hybridMountinfo))
	if err != nil {
		t.Fatal(err)
	}
	var points []string
	for _, m := range got {
		points = append(points, m.fstype+" "+m.point)
	}
	want := []string{
		"cgroup2 /sys/fs/cgroup/unified", "cgroup /sys/fs/cgroup/memory", "cgroup /sys/fs/cgroup/pids",
		"cgroup /sys/fs/cgroup/freezer", "cgroup /sys/fs/cgroup/cpu,cpuacct", "cgroup /sys/fs/cgroup/with space",
	}
	if !slices.Equal(points, want) {
		t.Fatalf("mounts %q, want %q", points, want)
	}
	if !slices.Contains(got[1].opts, "memory") {
		t.Fatalf("memory options %q", got[1].opts)
	}
}

// TestPick: v1 wins where its memory hierarchy is mounted, needs pids and
// freezer too; v2 needs memory and pids in cgroup.controllers.
func TestPick(t *testing.T) {
	mounts, err := parseMountinfo(strings.NewReader(hybridMountinfo))
	if err != nil {
		t.Fatal(err)
	}
	l, err := pick(mounts, "p")
	if err != nil || l.Version() != V1 || l.v1["freezer"] != "/sys/fs/cgroup/freezer" {
		t.Fatalf("hybrid: %+v, %v", l, err)
	}
	if got := l.Roots(); !slices.Equal(got, []string{"/sys/fs/cgroup/memory/p", "/sys/fs/cgroup/pids/p", "/sys/fs/cgroup/freezer/p"}) {
		t.Fatalf("roots %q", got)
	}
	if _, err := pick(mounts[:2], "p"); !errors.Is(err, ErrNoHierarchy) || !strings.Contains(err.Error(), "no pids hierarchy") {
		t.Fatalf("v1 without pids: %v", err)
	}

	v2 := t.TempDir()
	unified := []mountEntry{{point: v2, fstype: "cgroup2"}}
	if _, err := pick(unified, "p"); !errors.Is(err, ErrNoHierarchy) {
		t.Fatalf("no cgroup.controllers: %v", err)
	}
	_ = os.WriteFile(filepath.Join(v2, "cgroup.controllers"), []byte("cpu memory\n"), 0o600)
	if _, err := pick(unified, "p"); !errors.Is(err, ErrNoHierarchy) {
		t.Fatalf("no pids controller: %v", err)
	}
	_ = os.WriteFile(filepath.Join(v2, "cgroup.controllers"), []byte("cpu io memory pids\n"), 0o600)
	l, err = pick(unified, "p")
	if err != nil || l.Version() != V2 || !l.setLimits {
		t.Fatalf("v2: %+v, %v", l, err)
	}
	dir := filepath.Join(v2, "p", "microvm-1")
	if d := l.Dirs("microvm-1"); !slices.Equal(d, []string{dir}) || !l.Owns(dir+"/", "microvm-1") || l.Owns(dir, "microvm-2") {
		t.Fatalf("dirs %q", d)
	}
	_ = os.MkdirAll(dir, 0o755)
	_ = os.MkdirAll(filepath.Join(v2, "p", "Not valid"), 0o755)
	valid := func(name string) error {
		if strings.HasPrefix(name, "microvm-") {
			return nil
		}
		return errors.New("bad id")
	}
	if got := l.List(valid); len(got) != 1 || !slices.Equal(got["microvm-1"], []string{dir}) {
		t.Fatalf("list %v", got)
	}
}

func FuzzParseMountinfo(f *testing.F) {
	f.Add(hybridMountinfo)
	f.Add("1 2 3:4 / /a\\040b rw - cgroup2 cgroup2 rw\n")
	f.Fuzz(func(t *testing.T, in string) {
		mounts, err := parseMountinfo(strings.NewReader(in))
		if err != nil {
			return
		}
		for _, m := range mounts {
			if m.fstype != "cgroup" && m.fstype != "cgroup2" {
				t.Fatalf("a %q mount", m.fstype)
			}
		}
	})
}

func FuzzParseOOMKill(f *testing.F) {
	f.Add([]byte("low 0\nhigh 0\nmax 12\noom 3\noom_kill 2\n"))
	f.Add([]byte("oom_kill -1\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		n, ok := ParseOOMKill(in)
		if ok && !strings.Contains(string(in), "oom_kill ") {
			t.Fatalf("%d from no oom_kill line", n)
		}
	})
}

package procfs

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func write(t *testing.T, path, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestFakeProc(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "meminfo"), "MemTotal:       24684000 kB\nMemFree: 1 kB\nMemAvailable:   20000000 kB\n")
	write(t, filepath.Join(dir, "10", "cgroup"), "4:memory:/rayito-localvm-bhx/microvm-a\n0::/\n")
	write(t, filepath.Join(dir, "10", "smaps_rollup"), "00400000-7fff [rollup]\nRss: 900 kB\nPss:  512 kB\nPss_Anon: 100 kB\nPrivate_Clean: 10 kB\nPrivate_Dirty: 20 kB\n")
	write(t, filepath.Join(dir, "11", "cgroup"), "0::/rayito-localvm/microvm-b\n")
	write(t, filepath.Join(dir, "12", "cgroup"), "4:memory:/rayito-localvm-bhx/microvm-a\n")
	write(t, filepath.Join(dir, "13", "cgroup"), "4:memory:/other/microvm-ab\n")
	write(t, filepath.Join(dir, "self", "cgroup"), "4:memory:/rayito-localvm-bhx/microvm-a\n")
	write(t, filepath.Join(dir, "cpuinfo"), "processor\t: 0\nmodel name\t: Test CPU\n")
	r := Root(dir)

	total, avail, err := r.MemInfo()
	if err != nil || total != 24684000*1024 || avail != 20000000*1024 {
		t.Fatalf("MemInfo = %d %d %v", total, avail, err)
	}
	pss, err := r.PSS(10)
	if err != nil || pss != 512*1024 {
		t.Fatalf("PSS = %d %v", pss, err)
	}
	if ru, err := r.MemRollup(10); err != nil || ru.RSS != 900*1024 || ru.PSS != 512*1024 || ru.Private != 30*1024 {
		t.Fatalf("MemRollup = %+v %v", ru, err)
	}
	if _, err := r.PSS(11); err == nil {
		t.Fatal("PSS of a pid without smaps_rollup should fail")
	}
	got, err := r.PidsByCgroup("microvm-a", "microvm-b", "microvm-c")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]int{"microvm-a": {10, 12}, "microvm-b": {11}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("PidsByCgroup = %v, want %v", got, want)
	}
	if m := r.CPUModel(); m != "Test CPU" {
		t.Fatalf("CPUModel = %q", m)
	}
}

func TestRealProc(t *testing.T) {
	total, avail, err := Proc.MemInfo()
	if err != nil || total == 0 || avail == 0 || avail > total {
		t.Fatalf("MemInfo = %d %d %v", total, avail, err)
	}
	if rss, err := Proc.RSS(os.Getpid()); err != nil || rss == 0 {
		t.Fatalf("RSS = %d %v", rss, err)
	}
	if Kernel() == "unknown" || FSType(os.TempDir()) == "unknown" {
		t.Fatal("kernel or fs type unknown")
	}
}

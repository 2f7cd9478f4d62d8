package oomcount

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

func TestParse(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		in   string
		want uint64
		ok   bool
	}{
		// cgroup v2 memory.events
		{"low 0\nhigh 0\nmax 12\noom 3\noom_kill 2\noom_group_kill 0\n", 2, true},
		// cgroup v1 memory.oom_control
		{"oom_kill_disable 0\nunder_oom 0\noom_kill 7\n", 7, true},
		// /proc/vmstat excerpt
		{"nr_free_pages 5870411\npgfault 1\noom_kill 14\nnr_unstable 0", 14, true},
		{"oom_kill 18446744073709551615\n", 1<<64 - 1, true},
		{"oom_kill 18446744073709551616\n", 0, false},
		{"oom_kill_disable 1\nunder_oom 0\n", 0, false}, // before Linux 4.13
		{"oom_kill -1\n", 0, false},
		{"oom_kill \n", 0, false},
		{"oom_kill 0x10\n", 0, false},
		{" oom_kill 3\n", 0, false},
		{"", 0, false},
	} {
		got, ok := Parse([]byte(c.in))
		if got != c.want || ok != c.ok {
			t.Errorf("Parse(%q) = %d, %v; want %d, %v", c.in, got, ok, c.want, c.ok)
		}
	}
}

// A Counter rereads its file from the start every time.
func TestCounterRereads(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "memory.events")
	write := func(n int) {
		if err := os.WriteFile(path, []byte("oom 0\noom_kill "+strconv.Itoa(n)+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(1)
	c, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, n := range []int{1, 5, 1234567} {
		write(n)
		if got, ok := c.Read(); !ok || got != uint64(n) {
			t.Fatalf("Read = %d, %v; want %d", got, ok, n)
		}
	}
	if err := os.WriteFile(path, []byte("garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, ok := c.Read(); ok {
		t.Fatal("a file without a count read as a count")
	}
}

// A file larger than the first buffer is read whole; one beyond the bound,
// or without a count, is refused at Open.
func TestCounterSizes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	big := filepath.Join(dir, "big")
	if err := os.WriteFile(big, []byte(strings.Repeat("nr_x 1\n", 2000)+"oom_kill 9\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Open(big)
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := c.Read(); !ok || got != 9 {
		t.Fatalf("Read = %d, %v", got, ok)
	}
	c.Close()
	huge := filepath.Join(dir, "huge")
	if err := os.WriteFile(huge, []byte(strings.Repeat("x", maxFile+1)+"\noom_kill 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(huge); err == nil {
		t.Fatal("a file beyond the bound was accepted")
	}
	if _, err := Open(filepath.Join(dir, "missing")); err == nil {
		t.Fatal("a missing file was accepted")
	}
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(empty); err == nil {
		t.Fatal("a file without a count was accepted")
	}
}

// The kernel's own files, where this machine has them.
func TestKernelFiles(t *testing.T) {
	t.Parallel()
	for _, path := range []string{VMStat, "/sys/fs/cgroup/memory/memory.oom_control", "/sys/fs/cgroup/memory.events"} {
		if _, err := os.Stat(path); err != nil {
			continue
		}
		c, err := Open(path)
		if err != nil {
			t.Errorf("%s: %v", path, err)
			continue
		}
		if _, ok := c.Read(); !ok {
			t.Errorf("%s: no count", path)
		}
		c.Close()
	}
}

func TestFromFD(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "memory.oom_control")
	if err := os.WriteFile(path, []byte("oom_kill_disable 0\nunder_oom 0\noom_kill 4\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	fd, err := syscall.Dup(int(f.Fd()))
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	c, err := FromFD(fd)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got, ok := c.Read(); !ok || got != 4 {
		t.Fatalf("Read = %d, %v", got, ok)
	}
}

// FuzzParse: Parse never panics, and agrees with a plain reading of the
// text: the first line starting with "oom_kill " holds the decimal count.
func FuzzParse(f *testing.F) {
	f.Add([]byte("low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\noom_group_kill 0\n"))
	f.Add([]byte("oom_kill_disable 0\nunder_oom 0\noom_kill 3\n"))
	f.Add([]byte("oom_kill 99999999999999999999\n"))
	f.Add([]byte("oom_kill"))
	f.Fuzz(func(t *testing.T, b []byte) {
		n, ok := Parse(b)
		var want uint64
		wantOK := false
		for _, line := range strings.Split(string(b), "\n") {
			if rest, found := strings.CutPrefix(line, "oom_kill "); found {
				v, err := strconv.ParseUint(strings.TrimSpace(rest), 10, 64)
				if err == nil {
					want, wantOK = v, true
				}
				break
			}
		}
		if n != want || ok != wantOK {
			t.Fatalf("Parse(%q) = %d, %v; want %d, %v", b, n, ok, want, wantOK)
		}
	})
}

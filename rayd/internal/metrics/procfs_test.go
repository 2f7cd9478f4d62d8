package metrics

import (
	"bytes"
	"fmt"
	"os"
	"testing"
)

// statLine formats a /proc/[pid]/stat line the way the kernel does
// (fs/proc/array.c, do_task_stat), with the fields parseStat reads set.
func statLine(pid int, comm []byte, ppid int, utime, stime, cutime, cstime, rss int64) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%d (", pid)
	b.Write(comm)
	fmt.Fprintf(&b, ") S %d %d %d 0 -1 4194560 2261 0 0 0 %d %d %d %d 20 0 1 0 2393 12255232 %d 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0 0 0 0 0 0 0 0 0\n",
		ppid, pid, pid, utime, stime, cutime, cstime, rss)
	return b.Bytes()
}

func TestParseStat(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		in   []byte
		want procStat
		ok   bool
	}{
		{"plain", statLine(42, []byte("sleep"), 1, 10, 5, 3, 2, 100), procStat{ppid: 1, ticks: 20, rssPages: 100}, true},
		{"comm with spaces and parens", statLine(7, []byte("a) (b ) 9 9"), 3, 1, 1, 0, 0, 5), procStat{ppid: 3, ticks: 2, rssPages: 5}, true},
		{"comm with a newline", statLine(7, []byte("x\ny"), 3, 1, 0, 0, 0, 0), procStat{ppid: 3, ticks: 1}, true},
		{"negative children times and rss", statLine(8, []byte("z"), 1, 4, 4, -1, -3, -2), procStat{ppid: 1, ticks: 8}, true},
		{"kernel thread", statLine(2, []byte("kthreadd"), 0, 0, 0, 0, 0, 0), procStat{}, true},
		{"no paren", []byte("42 sleep S 1 1 1"), procStat{}, false},
		{"truncated", statLine(42, []byte("sleep"), 1, 10, 5, 3, 2, 100)[:60], procStat{}, false},
		{"non-numeric field", bytes.Replace(statLine(42, []byte("sleep"), 1, 10, 5, 3, 2, 100), []byte(" 2261 "), []byte(" x "), 1), procStat{}, false},
		{"negative ppid", statLine(42, []byte("sleep"), -1, 0, 0, 0, 0, 0), procStat{}, false},
		{"overflowing field", statLine(42, []byte("s"), 1, 1<<62, 1<<62, 1<<62, 1<<62, 0), procStat{}, false},
		{"empty", nil, procStat{}, false},
	} {
		got, err := parseStat(c.in)
		if (err == nil) != c.ok || got != c.want {
			t.Errorf("%s: %+v, %v; want %+v, ok %v", c.name, got, err, c.want, c.ok)
		}
	}
	b, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		t.Skip(err)
	}
	st, err := parseStat(b)
	if err != nil || st.ppid != os.Getppid() || st.rssPages == 0 {
		t.Fatalf("/proc/self/stat %q: %+v, %v", b, st, err)
	}
}

func TestParseInt(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]int64{"0": 0, "-7": -7, "9223372036854775807": 1<<63 - 1, "-9223372036854775807": -(1<<63 - 1)} {
		if got, ok := parseInt([]byte(in)); !ok || got != want {
			t.Errorf("parseInt(%q) = %d, %v", in, got, ok)
		}
	}
	for _, in := range []string{"", "-", "9223372036854775808", "1x", "+1", " 1", "99999999999999999999"} {
		if _, ok := parseInt([]byte(in)); ok {
			t.Errorf("parseInt(%q) accepted", in)
		}
	}
}

func TestParseMeminfo(t *testing.T) {
	t.Parallel()
	in := []byte("MemTotal:       24684000 kB\nMemFree:        23800000 kB\nMemAvailable:   24200000 kB\nBuffers:           10000 kB\nCached:           700000 kB\nSwapCached:            0 kB\nHugePages_Total:       0\nbroken line\nCached: x kB\n")
	m, ok := parseMeminfo(in)
	if !ok || m.total != 24684000<<10 || m.available != 24200000<<10 || m.cached != 700000<<10 || m.buffers != 10000<<10 {
		t.Fatalf("%+v, %v", m, ok)
	}
	if got := m.used(); got != (24684000-24200000)<<10 {
		t.Fatalf("used %d", got)
	}
	// Kernels before 3.14 have no MemAvailable.
	m, ok = parseMeminfo([]byte("MemTotal: 1000 kB\nMemFree: 100 kB\nBuffers: 50 kB\nCached: 250 kB\n"))
	if !ok || m.used() != 600<<10 {
		t.Fatalf("%+v, %v, used %d", m, ok, m.used())
	}
	if _, ok := parseMeminfo([]byte("MemFree: 1 kB\n")); ok {
		t.Fatal("no MemTotal accepted")
	}
	if m, ok := parseMeminfo([]byte("MemTotal: 18446744073709551615 kB\n")); ok || m.total != 0 {
		t.Fatalf("overflow: %+v, %v", m, ok)
	}
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		t.Skip(err)
	}
	if m, ok := parseMeminfo(b); !ok || m.total == 0 || m.used() > m.total {
		t.Fatalf("/proc/meminfo: %+v, %v", m, ok)
	}
}

// FuzzParseStat: parseStat never panics on any input, and a line the
// kernel could write parses to its fields whatever the command name holds.
func FuzzParseStat(f *testing.F) {
	f.Add(statLine(1, []byte("rayd"), 0, 1, 2, 3, 4, 5), uint16(1), uint32(10), uint32(20))
	f.Add([]byte("1 (a) S"), uint16(0), uint32(0), uint32(0))
	f.Add([]byte(")))((("), uint16(7), uint32(1<<31), uint32(1))
	f.Fuzz(func(t *testing.T, b []byte, ppid uint16, utime, rss uint32) {
		if st, err := parseStat(b); err == nil && st.ppid < 0 {
			t.Fatalf("negative ppid from %q", b)
		}
		comm := b
		if len(comm) > 64 {
			comm = comm[:64]
		}
		line := statLine(99, comm, int(ppid), int64(utime), 7, 1, 2, int64(rss))
		want := procStat{ppid: int(ppid), ticks: uint64(utime) + 10, rssPages: uint64(rss)}
		if got, err := parseStat(line); err != nil || got != want {
			t.Fatalf("comm %q: %+v, %v; want %+v", comm, got, err, want)
		}
	})
}

// FuzzParseMeminfo: parseMeminfo never panics, reports a total whenever it
// accepts, and never reports more memory used than there is.
func FuzzParseMeminfo(f *testing.F) {
	f.Add([]byte("MemTotal: 1000 kB\nMemAvailable: 10 kB\nCached: 5 kB\n"))
	f.Add([]byte("MemTotal: 1000 kB\nMemFree: 2000 kB\n"))
	f.Add([]byte("MemTotal:"))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, ok := parseMeminfo(b)
		if ok != m.hasTotal {
			t.Fatal("accepted without MemTotal")
		}
		if m.used() > m.total {
			t.Fatalf("used %d of %d", m.used(), m.total)
		}
	})
}

// Package procfs reads the few /proc figures the harness reports: memory
// (MemTotal, MemAvailable, PSS, RSS), which processes belong to a sandbox
// (by its cgroup), and machine facts.
package procfs

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Root is the proc mount; tests point it elsewhere.
type Root string

// Proc is the real /proc.
const Proc Root = "/proc"

// kbField returns the "<name>: <n> kB" value of a /proc key-value file in
// bytes.
func kbField(data []byte, name string) (uint64, bool) {
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := sc.Text()
		k, rest, ok := strings.Cut(line, ":")
		if !ok || k != name {
			continue
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			return 0, false
		}
		v, err := strconv.ParseUint(f[0], 10, 64)
		if err != nil {
			return 0, false
		}
		if len(f) > 1 && f[1] == "kB" {
			v *= 1024
		}
		return v, true
	}
	return 0, false
}

// MemInfo returns MemTotal and MemAvailable in bytes.
func (r Root) MemInfo() (total, available uint64, err error) {
	b, err := os.ReadFile(filepath.Join(string(r), "meminfo"))
	if err != nil {
		return 0, 0, err
	}
	t, ok1 := kbField(b, "MemTotal")
	a, ok2 := kbField(b, "MemAvailable")
	if !ok1 || !ok2 {
		return 0, 0, errors.New("meminfo: MemTotal or MemAvailable missing")
	}
	return t, a, nil
}

// PSS returns the proportional set size of pid in bytes, from
// smaps_rollup.
func (r Root) PSS(pid int) (uint64, error) {
	b, err := os.ReadFile(filepath.Join(string(r), strconv.Itoa(pid), "smaps_rollup"))
	if err != nil {
		return 0, err
	}
	v, ok := kbField(b, "Pss")
	if !ok {
		return 0, fmt.Errorf("smaps_rollup of %d: no Pss", pid)
	}
	return v, nil
}

// Rollup is a process's memory from smaps_rollup, in bytes.
type Rollup struct {
	RSS, PSS uint64
	// Private is Private_Clean + Private_Dirty: what the process alone
	// holds (its unique set size).
	Private uint64
}

// MemRollup reads /proc/<pid>/smaps_rollup.
func (r Root) MemRollup(pid int) (Rollup, error) {
	b, err := os.ReadFile(filepath.Join(string(r), strconv.Itoa(pid), "smaps_rollup"))
	if err != nil {
		return Rollup{}, err
	}
	var out Rollup
	var ok bool
	if out.PSS, ok = kbField(b, "Pss"); !ok {
		return Rollup{}, fmt.Errorf("smaps_rollup of %d: no Pss", pid)
	}
	out.RSS, _ = kbField(b, "Rss")
	pc, _ := kbField(b, "Private_Clean")
	pd, _ := kbField(b, "Private_Dirty")
	out.Private = pc + pd
	return out, nil
}

// RSS returns the resident set size of pid in bytes (VmRSS).
func (r Root) RSS(pid int) (uint64, error) {
	b, err := os.ReadFile(filepath.Join(string(r), strconv.Itoa(pid), "status"))
	if err != nil {
		return 0, err
	}
	v, ok := kbField(b, "VmRSS")
	if !ok {
		return 0, fmt.Errorf("status of %d: no VmRSS", pid)
	}
	return v, nil
}

// cgroupLeaf returns, for each line of a /proc/<pid>/cgroup file, the last
// element of the cgroup path.
func cgroupLeaves(data []byte) []string {
	var out []string
	for _, line := range strings.Split(string(data), "\n") {
		// hierarchy-ID:controllers:path
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		out = append(out, filepath.Base(parts[2]))
	}
	return out
}

// PidsByCgroup scans /proc/*/cgroup and returns, for each id in ids, the
// processes whose cgroup directory (in any hierarchy) is named id. localvm
// puts every process of a sandbox in <hierarchy>/rayito-localvm[-scope]/<id>
// where id is the microVM id (see localvm/internal/launcher), so this
// finds rayd, the sandbox's init and everything they started.
func (r Root) PidsByCgroup(ids ...string) (map[string][]int, error) {
	want := make(map[string]bool, len(ids))
	for _, id := range ids {
		want[id] = true
	}
	ents, err := os.ReadDir(string(r))
	if err != nil {
		return nil, err
	}
	out := make(map[string][]int, len(ids))
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join(string(r), e.Name(), "cgroup"))
		if err != nil {
			continue // exited meanwhile
		}
		for _, leaf := range cgroupLeaves(b) {
			if want[leaf] {
				out[leaf] = append(out[leaf], pid)
				break
			}
		}
	}
	return out, nil
}

// CPUModel returns the first "model name" of /proc/cpuinfo.
func (r Root) CPUModel() string {
	b, err := os.ReadFile(filepath.Join(string(r), "cpuinfo"))
	if err != nil {
		return "unknown"
	}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}

// Kernel returns the running kernel's release.
func Kernel() string {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return "unknown"
	}
	return unix.ByteSliceToString(u.Release[:])
}

// FSType names the filesystem holding path (tmpfs, ext4, xfs, btrfs,
// overlay or the magic number).
func FSType(path string) string {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return "unknown"
	}
	switch int64(st.Type) {
	case unix.TMPFS_MAGIC:
		return "tmpfs"
	case unix.EXT4_SUPER_MAGIC:
		return "ext4"
	case unix.XFS_SUPER_MAGIC:
		return "xfs"
	case unix.BTRFS_SUPER_MAGIC:
		return "btrfs"
	case unix.OVERLAYFS_SUPER_MAGIC:
		return "overlay"
	default:
		return fmt.Sprintf("fs magic %#x", st.Type)
	}
}

// Comm returns the command name of pid.
func (r Root) Comm(pid int) string {
	b, err := os.ReadFile(filepath.Join(string(r), strconv.Itoa(pid), "comm"))
	if err != nil {
		return "?"
	}
	return strings.TrimSpace(string(b))
}

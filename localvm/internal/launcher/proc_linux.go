package launcher

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// procStat returns the ppid and the start time (field 22, clock ticks since
// boot) of pid from /proc/<pid>/stat.
func procStat(pid int) (ppid int, start uint64, err error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, err
	}
	return parseStat(b)
}

// parseStat parses the content of /proc/<pid>/stat. The command name (field
// 2) may contain spaces and parentheses, so fields are counted from the last
// ')'.
func parseStat(b []byte) (ppid int, start uint64, err error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, 0, errors.New("launcher: malformed /proc stat")
	}
	f := bytes.Fields(b[i+1:])
	// f[0] is field 3 (state), so field n is f[n-3].
	if len(f) < 20 {
		return 0, 0, errors.New("launcher: malformed /proc stat")
	}
	ppid, err = strconv.Atoi(string(f[1]))
	if err != nil {
		return 0, 0, errors.New("launcher: malformed /proc stat")
	}
	start, err = strconv.ParseUint(string(f[19]), 10, 64)
	if err != nil {
		return 0, 0, errors.New("launcher: malformed /proc stat")
	}
	return ppid, start, nil
}

// procState returns field 3 of /proc/<pid>/stat ("R", "S", "Z", ...).
func procState(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return ""
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return ""
	}
	f := bytes.Fields(b[i+1:])
	if len(f) == 0 {
		return ""
	}
	return string(f[0])
}

// sameProcess reports whether pid is alive (not a zombie) and started at
// start.
func sameProcess(pid int, start uint64) bool {
	if pid <= 1 {
		return false
	}
	_, st, err := procStat(pid)
	if err != nil || st != start {
		return false
	}
	return procState(pid) != "Z"
}

// openPidfd opens a pidfd for pid and checks, after opening it, that the
// process is still the one that started at start (so that the pidfd cannot
// refer to a recycled pid).
func openPidfd(pid int, start uint64) (int, error) {
	if pid <= 1 {
		return -1, ErrGone
	}
	fd, err := unix.PidfdOpen(pid, unix.PIDFD_NONBLOCK)
	if err != nil {
		if errors.Is(err, unix.ESRCH) {
			return -1, ErrGone
		}
		return -1, fmt.Errorf("launcher: pidfd_open: %w", err)
	}
	unix.CloseOnExec(fd)
	if !sameProcess(pid, start) {
		unix.Close(fd)
		return -1, ErrGone
	}
	return fd, nil
}

// waitPidfd blocks until the process behind pidfd exits. It returns false
// if polling fails (the caller then polls /proc).
func waitPidfd(fd int) bool {
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	for {
		n, err := unix.Poll(fds, 500)
		if err != nil && !errors.Is(err, unix.EINTR) {
			// Fall back to polling /proc.
			return false
		}
		if n > 0 {
			return true
		}
	}
}

// descendants returns the pids (with start times) of every descendant of
// root, from one walk of /proc.
func descendants(root int) map[int]uint64 {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	type info struct {
		ppid  int
		start uint64
	}
	all := map[int]info{}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		ppid, start, err := procStat(pid)
		if err != nil {
			continue
		}
		all[pid] = info{ppid, start}
	}
	children := map[int][]int{}
	for pid, in := range all {
		children[in.ppid] = append(children[in.ppid], pid)
	}
	out := map[int]uint64{}
	queue := []int{root}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, c := range children[p] {
			if _, seen := out[c]; !seen && c != root {
				out[c] = all[c].start
				queue = append(queue, c)
			}
		}
	}
	return out
}

// markCloexec sets close-on-exec on every descriptor above stderr of this
// process, so that descriptors inherited from whatever started the
// platform never reach a sandbox (Go opens its own with the flag already).
func markCloexec() {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return
	}
	for _, e := range ents {
		fd, err := strconv.Atoi(e.Name())
		if err != nil || fd <= 2 {
			continue
		}
		unix.CloseOnExec(fd)
	}
}

// protectFromOOM makes the OOM killer skip pid (a sandbox's rayd): its
// oom_score_adj becomes -1000. The privileged write also sets the floor
// (oom_score_adj_min) rayd may come back down to: rayd raises its own score
// to 1000 for each fork, so that its children start at 1000, and then goes
// back to -1000 (rayd/internal/proc). Lowering a score needs
// CAP_SYS_RESOURCE: without it the error wraps fs.ErrPermission.
func protectFromOOM(pid int) error {
	p := "/proc/" + strconv.Itoa(pid) + "/oom_score_adj"
	if err := os.WriteFile(p, []byte("-1000"), 0); err != nil {
		if errors.Is(err, unix.EACCES) || errors.Is(err, unix.EPERM) {
			err = fmt.Errorf("%w (needs CAP_SYS_RESOURCE)", fs.ErrPermission)
		}
		return fmt.Errorf("launcher: protecting rayd from the OOM killer: %w", err)
	}
	return nil
}

// pfExiting is the kernel's PF_EXITING task flag (field 9 of
// /proc/<pid>/stat): the task is in exit.
const pfExiting = 0x4

// runningUntouched reports whether pid (started at start) is alive, not
// exiting and has no SIGKILL pending: nothing is killing it. The OOM
// killer sends SIGKILL before it counts the kill, so a counter read before
// this check holds true did not count a kill of pid.
func runningUntouched(pid int, start uint64) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	_, st, err := parseStat(b)
	if err != nil || st != start {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	f := bytes.Fields(b[i+1:])
	if len(f) < 7 || string(f[0]) == "Z" || string(f[0]) == "X" {
		return false
	}
	flags, err := strconv.ParseUint(string(f[6]), 10, 64)
	if err != nil || flags&pfExiting != 0 {
		return false
	}
	status, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return false
	}
	const sigkillBit = 1 << (9 - 1)
	for _, line := range bytes.Split(status, []byte("\n")) {
		for _, key := range []string{"SigPnd:", "ShdPnd:"} {
			if v, ok := bytes.CutPrefix(line, []byte(key)); ok {
				mask, err := strconv.ParseUint(string(bytes.TrimSpace(v)), 16, 64)
				if err != nil || mask&sigkillBit != 0 {
					return false
				}
			}
		}
	}
	return true
}

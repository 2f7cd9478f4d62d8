package jupyter

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// pin identifies a kernel process beyond its pid: rayd's own pid as its
// parent, its real uid and its start time (field 22 of /proc/pid/stat), so
// a recycled pid is never signalled (T12).
type pin struct {
	pid       int
	ppid      int
	uid       uint32
	startTime uint64
}

// readPin reads pid's parent and start time from /proc/pid/stat and its
// real uid from /proc/pid/status.
func readPin(pid int) (pin, error) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return pin{}, err
	}
	ppid, start, err := parseStat(stat)
	if err != nil {
		return pin{}, err
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return pin{}, err
	}
	uid, err := parseStatusUID(status)
	if err != nil {
		return pin{}, err
	}
	return pin{pid: pid, ppid: ppid, uid: uid, startTime: start}, nil
}

// parseStat returns the ppid (field 4) and start time (field 22) of a
// /proc/pid/stat line; the command (field 2) may hold spaces and
// parentheses, so fields are counted after its last ')'.
func parseStat(b []byte) (ppid int, start uint64, err error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, 0, ErrMalformed
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state): field n is f[n-3].
	if len(f) < 20 {
		return 0, 0, ErrMalformed
	}
	if ppid, err = strconv.Atoi(f[1]); err != nil {
		return 0, 0, ErrMalformed
	}
	if start, err = strconv.ParseUint(f[19], 10, 64); err != nil {
		return 0, 0, ErrMalformed
	}
	return ppid, start, nil
}

// parseStatusUID returns the real uid of a /proc/pid/status.
func parseStatusUID(b []byte) (uint32, error) {
	for line := range strings.SplitSeq(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "Uid:"); ok {
			f := strings.Fields(rest)
			if len(f) == 0 {
				break
			}
			u, err := strconv.ParseUint(f[0], 10, 32)
			if err != nil {
				break
			}
			return uint32(u), nil
		}
	}
	return 0, ErrMalformed
}

// confirm checks that the process behind p.pid is still the one pinned.
func (p pin) confirm() error {
	now, err := readPin(p.pid)
	if err != nil || now != p || now.ppid != os.Getpid() {
		return ErrNotOwnChild
	}
	return nil
}

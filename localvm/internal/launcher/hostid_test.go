//go:build linux

package launcher

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/rayito-dev/rayito/localvm/internal/cgroup"
)

// procUIDs returns the real host uid of every process in the sandbox's
// cgroups (read from the host), keyed by pid.
func procUIDs(t *testing.T, rec Record) map[int]int {
	t.Helper()
	out := map[int]int{}
	for _, d := range rec.Cgroups {
		pids, err := cgroup.Pids(d)
		if err != nil {
			continue
		}
		for _, pid := range pids {
			b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
			if err != nil {
				continue
			}
			for _, line := range strings.Split(string(b), "\n") {
				if f := strings.Fields(line); len(f) >= 2 && f[0] == "Uid:" {
					if uid, err := strconv.Atoi(f[1]); err == nil {
						out[pid] = uid
					}
				}
			}
		}
	}
	return out
}

// TestHostIdentity: each sandbox runs in a user namespace onto a uid range
// of its own, so exhausting the per-uid process limit (RLIMIT_NPROC, 512
// for rayd's children) in one leaves another able to fork, and the host
// uids of their processes and files differ.
func TestHostIdentity(t *testing.T) {
	l := privileged(t, "")
	if !l.userns {
		t.Skip("needs user namespaces: the launcher runs without them here")
	}
	a, b := launch(t, l, newSpec(t, l)), launch(t, l, newSpec(t, l))
	ra, rb := a.Record(), b.Record()
	if ra.UIDBase == 0 || rb.UIDBase == 0 || ra.UIDBase == rb.UIDBase {
		t.Fatalf("uid bases %d and %d", ra.UIDBase, rb.UIDBase)
	}
	ta, tb := install(t, a), install(t, b)

	// Inside, the ids are the usual ones.
	if out, _ := run(t, b.APIAddr(), tb, `id -u; stat -c %u:%g /home/user; cat /proc/self/uid_map`); !strings.HasPrefix(out, "1000\n1000:1000\n") ||
		!strings.Contains(out, " 0 "+strconv.FormatUint(uint64(rb.UIDBase), 10)+" ") {
		t.Fatalf("ids inside: %q", out)
	}
	// On the host, rayd is the range's base, the user base+1000, and so is
	// the owner of /home/user's directory (the sandbox's own tmpfs, seen
	// through rayd's root).
	for _, r := range []Record{ra, rb} {
		if got := procUIDs(t, r)[r.Pid]; got != int(r.UIDBase) {
			t.Errorf("rayd of %s runs as host uid %d, want %d", r.ID, got, r.UIDBase)
		}
		fi, err := os.Stat(filepath.Join("/proc", strconv.Itoa(r.Pid), "root", "home", "user"))
		if err != nil {
			t.Fatal(err)
		}
		if st := fi.Sys().(*syscallStat); int(st.Uid) != int(r.UIDBase)+1000 {
			t.Errorf("home of %s owned by host uid %d", r.ID, st.Uid)
		}
	}

	// A takes every process its user may have (a bounded loop: it stops
	// when forks fail).
	run(t, a.APIAddr(), ta, `for i in $(seq 600); do sleep 120 & done 2>/dev/null; echo spawned`)
	userA := 0
	for _, uid := range procUIDs(t, ra) {
		switch uid {
		case int(ra.UIDBase) + 1000:
			userA++
		case 0, 1000, int(rb.UIDBase) + 1000:
			t.Fatalf("a process of A runs as host uid %d", uid)
		}
	}
	if userA < 500 {
		t.Fatalf("A holds only %d processes of its user: the limit was not reached", userA)
	}
	// B still forks.
	out, _ := run(t, b.APIAddr(), tb, `n=0; for i in $(seq 10); do /bin/true && n=$((n+1)); done 2>/dev/null; echo $n; sleep 30 & echo started`)
	if out != "10\nstarted\n" {
		t.Fatalf("B cannot fork while A is at its process limit: %q", out)
	}
	for pid, uid := range procUIDs(t, rb) {
		if pid != rb.Pid && uid != int(rb.UIDBase)+1000 {
			t.Errorf("a process of B runs as host uid %d", uid)
		}
	}
}

type syscallStat = syscall.Stat_t

//go:build linux

package launcher

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/rayito-dev/rayito/localvm/internal/rootfs"
)

// TestTmpfsSizesDefault: a spec without a memory limit gets the tmpfs
// bounds of DefaultMemoryBytes.
func TestTmpfsSizesDefault(t *testing.T) {
	if got, want := tmpfsSizes(0), rootfs.TmpfsSizes(DefaultMemoryBytes); got != want {
		t.Fatalf("%+v, want %+v", got, want)
	}
}

// TestMemory: every writable tmpfs of a sandbox has a size bound and
// filling /tmp fails with ENOSPC; rayd is protected from the OOM killer
// while its processes start with oom_score_adj 1000, so a memory hog is
// killed at the sandbox's memory limit and rayd survives.
func TestMemory(t *testing.T) {
	l := privileged(t, "")
	spec := newSpec(t, l)
	spec.MemoryBytes = 256 << 20 // /tmp: 64 MiB
	inst := launch(t, l, spec)
	rec := inst.Record()
	token := install(t, inst)
	raydScore := func() string {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(rec.Pid) + "/oom_score_adj")
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(b))
	}
	// -1000 needs CAP_SYS_RESOURCE, which some container runtimes drop.
	own, _ := os.ReadFile("/proc/self/oom_score_adj")
	if got := raydScore(); got != "-1000" {
		if protectFromOOM(os.Getpid()) == nil {
			t.Fatalf("rayd's oom_score_adj is %s, want -1000", got)
		}
		t.Logf("no CAP_SYS_RESOURCE here: rayd keeps oom_score_adj %s (the platform's %s)", got, strings.TrimSpace(string(own)))
	}

	before := raydScore()
	out, _ := run(t, inst.APIAddr(), token, `cat /proc/self/oom_score_adj; sh -c 'cat /proc/self/oom_score_adj'; awk '$3 == "tmpfs" { print $2, $4 }' /proc/mounts`)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) < 3 || lines[0] != "1000" || lines[1] != "1000" {
		t.Fatalf("oom_score_adj of rayd's child and grandchild: %q", out)
	}
	seen := map[string]bool{}
	for _, m := range lines[2:] {
		f := strings.Fields(m)
		if len(f) != 2 {
			continue
		}
		seen[f[0]] = true
		if !strings.Contains(","+f[1]+",", ",ro,") && !strings.Contains(f[1], "size=") {
			t.Errorf("writable tmpfs %s without a size bound: %s", f[0], f[1])
		}
	}
	for _, want := range []string{"/", "/tmp", "/var/tmp", "/run", "/dev", "/dev/shm", "/etc"} {
		if !seen[want] {
			t.Errorf("no tmpfs on %s: %q", want, out)
		}
	}

	// Filling /tmp: ENOSPC, and rayd lives on.
	out, _ = run(t, inst.APIAddr(), token, `dd if=/dev/zero of=/tmp/fill bs=1M count=200 2>&1; echo rc=$?; rm -f /tmp/fill`)
	if !strings.Contains(out, "No space left on device") || !strings.Contains(out, "rc=1") {
		t.Fatalf("filling /tmp: %q", out)
	}
	health(t, inst.APIAddr())

	// A memory hog (tail keeps a line that never ends) beyond 256 MiB is
	// killed; rayd is not.
	out, _ = run(t, inst.APIAddr(), token, `head -c 600000000 /dev/zero | tail > /dev/null; echo rc=$?`)
	if !strings.Contains(out, "rc=137") {
		t.Fatalf("memory hog: %q", out)
	}
	health(t, inst.APIAddr())
	select {
	case <-inst.Done():
		t.Fatal("rayd exited")
	default:
	}
	if !sameProcess(rec.Pid, rec.PidStartTime) {
		t.Fatal("rayd was replaced")
	}
	// rayd raises its score only for the duration of each fork.
	if got, want := raydScore(), before; got != want {
		t.Fatalf("rayd's oom_score_adj is %s after its forks, was %s", got, want)
	}
}

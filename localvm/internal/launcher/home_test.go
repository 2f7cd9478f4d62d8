package launcher

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestHomeIsBounded: /home/user is a tmpfs of the sandbox's own, half its
// memory in size: a sandbox that fills it gets ENOSPC ("No space left on
// device") and nothing it wrote reaches the host's disk under the
// platform's state directory (a home on disk had no bound: one sandbox
// wrote 2 GiB onto the host).
func TestHomeIsBounded(t *testing.T) {
	l := privileged(t, "")
	spec := newSpec(t, l)
	spec.MemoryBytes = 256 << 20 // a home of 128 MiB
	inst := launch(t, l, spec)
	token := install(t, inst)
	checkHomeBounded(t, inst, token, spec, 128<<20)
}

// checkHomeBounded fills /home/user past size and checks the outcome.
func checkHomeBounded(t *testing.T, inst Instance, token string, spec Spec, size int64) {
	t.Helper()
	out, _ := run(t, inst.APIAddr(), token, `df -B1 --output=fstype,size /home/user | tail -1; stat -c '%u:%g %a' /home/user
dd if=/dev/zero of=/home/user/big bs=1M count=`+strconv.Itoa(int(size>>20+16))+` 2>&1 | grep -o 'No space left on device' | head -1
echo "wrote=$(stat -c %s /home/user/big)"; rm -f /home/user/big`)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 4 {
		t.Fatalf("output %q", out)
	}
	if f := strings.Fields(lines[0]); len(f) != 2 || f[0] != "tmpfs" || f[1] != strconv.FormatInt(size, 10) {
		t.Fatalf("df of /home/user: %q, want tmpfs of %d bytes", lines[0], size)
	}
	if lines[1] != "1000:1000 750" {
		t.Fatalf("/home/user is %q, want 1000:1000 750", lines[1])
	}
	if lines[2] != "No space left on device" {
		t.Fatalf("filling /home/user: %q, want ENOSPC", lines[2])
	}
	if lines[3] != "wrote="+strconv.FormatInt(size, 10) {
		t.Fatalf("%s, want the home's size, %d", lines[3], size)
	}
	// Nothing of it on the host's disk.
	var onDisk int64
	_ = filepath.Walk(spec.Dir, func(_ string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() {
			onDisk += fi.Size()
		}
		return nil
	})
	if onDisk > 64<<20 {
		t.Fatalf("the sandbox's directory holds %d bytes on the host", onDisk)
	}
}

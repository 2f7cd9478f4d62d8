package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// lateSignalEnv makes the test binary run lateSignalChild instead of the
// tests.
const lateSignalEnv = "RAYD_TEST_LATE_SIGNAL"

// lateSignalChild runs Main until it returns (its Run fails at once: the
// state directory cannot be made), then sends itself SIGTERM, as a
// platform's second copy of the stop signal would arrive, and reports
// whether it is still alive.
func lateSignalChild() {
	code := Main([]string{"-state-dir", filepath.Join(os.DevNull, "x"), "-api-addr", "127.0.0.1:0", "-hooks-addr", "127.0.0.1:0"}, io.Discard, io.Discard)
	_ = syscall.Kill(os.Getpid(), syscall.SIGTERM)
	_ = syscall.Kill(os.Getpid(), syscall.SIGINT)
	time.Sleep(200 * time.Millisecond)
	fmt.Printf("alive after Main (exit code %d)\n", code)
	os.Exit(0)
}

// Once rayd's stop is over, a late SIGTERM or SIGINT (the launcher signals
// both rayd and its process group) does not kill it: its exit stays its
// own, not a death by signal (exit code 143).
func TestLateSignalAfterStop(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run", "^$")
	cmd.Env = append(os.Environ(), lateSignalEnv+"=1")
	out, err := cmd.Output()
	// ECHILD: the tests' shared supervisor reaped the child first (it
	// reaps every child of the test binary); its output still tells.
	if err != nil && !errors.Is(err, syscall.ECHILD) {
		t.Fatalf("the child ended with %v (output %q)", err, out)
	}
	if !strings.HasPrefix(string(out), "alive after Main") {
		t.Fatalf("child output %q", out)
	}
}

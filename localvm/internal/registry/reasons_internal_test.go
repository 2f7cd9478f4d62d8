package registry

import (
	"errors"
	"fmt"
	"syscall"
	"testing"

	"github.com/rayito-dev/rayito/localvm/internal/launcher"
)

// TestExitReasonDecision: the decision between out_of_memory, timeout and
// init_exited from rayd's exit status and the OOM kill counter.
func TestExitReasonDecision(t *testing.T) {
	kill := launcher.ExitStatus{Signal: syscall.SIGKILL}
	for _, tc := range []struct {
		st            launcher.ExitStatus
		known         bool
		before, after uint64
		oomOK         bool
		want          string
	}{
		{kill, true, 3, 4, true, "out_of_memory"},
		{kill, true, 4, 4, true, "init_exited: killed by signal 9 (killed)"},
		{kill, true, 3, 4, false, "init_exited: killed by signal 9 (killed)"}, // no counter
		{launcher.ExitStatus{}, false, 3, 4, true, "out_of_memory"},           // adopted
		{launcher.ExitStatus{}, false, 4, 4, true, "init_exited: exit status unknown"},
		{launcher.ExitStatus{Code: 3}, true, 3, 9, true, "init_exited: exit status 3"}, // not a kill: others were OOM-killed
		{launcher.ExitStatus{Code: 124}, true, 0, 0, true, "timeout"},
		{launcher.ExitStatus{Code: 0}, true, 0, 0, false, "init_exited: exit status 0"},
		{launcher.ExitStatus{Signal: syscall.SIGSEGV}, true, 0, 0, true, "init_exited: killed by signal 11 (segmentation fault)"},
		{launcher.ExitStatus{Signal: syscall.Signal(77)}, true, 0, 0, true, "init_exited: killed by signal 77"},
	} {
		if got := exitReason(tc.st, tc.known, tc.before, tc.after, tc.oomOK); got != tc.want {
			t.Errorf("exitReason(%+v, %v, %d→%d, %v) = %q, want %q", tc.st, tc.known, tc.before, tc.after, tc.oomOK, got, tc.want)
		}
	}
}

// TestLegacyReasons: state files of a platform from before the closed set
// read back as its codes.
func TestLegacyReasons(t *testing.T) {
	for in, want := range map[string]string{
		"":                                  "",
		"Success.":                          "killed_by_user",
		"Maximum duration reached.":         "max_duration",
		"Platform restarted; sandbox lost.": ReasonPlatformLost,
		"Platform stopped while the microVM was starting.": ReasonPlatformStopped,
		"Terminated by the local platform.":                ReasonTerminateAll,
		"Run hook timed out.":                              ReasonRunHookTimeout,
		"Run hook failed with HTTP status 500.":            "platform_error",
		"Sandbox launch failed: /var/lib/x: no cgroup":     ReasonLaunchFailed,
		"Container Stopped with Exit Code: 3":              "init_exited: exit status 3",
		"Container Stopped.":                               ReasonExitStatusUnknown,
		"init_exited: exit status 7":                       "init_exited: exit status 7",
		"idle":                                             "idle",
	} {
		if got := legacyReason(in); got != want {
			t.Errorf("legacyReason(%q) = %q, want %q", in, got, want)
		}
	}
}

// A launch refused for want of privileges keeps its explanation (written
// for the user); any other launch error becomes a fixed text.
func TestLaunchFailureReason(t *testing.T) {
	refusal := fmt.Errorf("%w: Internet access without root needs slirp4netns (package slirp4netns), not found in PATH: install it, run as root, or use --no-internet\nsecond line", launcher.ErrNeedsPrivilege)
	if got, want := launchFailure(refusal), "platform_error: Internet access without root needs slirp4netns (package slirp4netns), not found in PATH: install it, run as root, or use --no-internet"; got != want {
		t.Errorf("refusal: %q, want %q", got, want)
	}
	if got := launchFailure(errors.New("mkdir /home/alice/secret/x: permission denied")); got != ReasonLaunchFailed {
		t.Errorf("other error: %q, want %q", got, ReasonLaunchFailed)
	}
}

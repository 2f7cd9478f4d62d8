package rayito

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

func TestParseEndReason(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in     string
		reason EndReason
		detail string
	}{
		// The local platform's closed form.
		{"killed_by_user", EndKilledByUser, ""},
		{"timeout", EndTimeout, ""},
		{"max_duration", EndMaxDuration, ""},
		{"out_of_memory", EndOutOfMemory, ""},
		{"out_of_memory: memory.max 2147483648 reached", EndOutOfMemory, "memory.max 2147483648 reached"},
		{"init_exited: killed by signal 9 (killed)", EndInitExited, "killed by signal 9 (killed)"},
		{"init_exited: exit status 3", EndInitExited, "exit status 3"},
		{"platform_shutdown", EndPlatformShutdown, ""},
		{"platform_error: launch failed: no cgroups", EndPlatformError, "launch failed: no cgroups"},
		{"idle", EndIdle, ""},
		{"  timeout  ", EndTimeout, ""},
		// AWS's texts (and an older local platform's).
		{"Container Stopped with Exit Code: 124", EndTimeout, ""},
		{"Container Stopped with Exit Code: 0", EndInitExited, "exit status 0"},
		{"Container Stopped with Exit Code: 137", EndInitExited, "exit status 137"},
		{"Container Stopped with Exit Code: 2.", EndInitExited, "exit status 2"},
		{"Container Stopped with Exit Code: weird", EndInitExited, "weird"},
		{"Container Stopped.", EndInitExited, ""},
		{"Maximum duration reached.", EndMaxDuration, ""},
		{"Platform restarted; sandbox lost.", EndPlatformShutdown, ""},
		{"Terminated by the local platform.", EndPlatformShutdown, ""},
		{"Sandbox launch failed: no cgroups", EndPlatformError, "no cgroups"},
		// Not certain: kept as the detail of EndUnknown.
		{"Success.", EndUnknown, "Success."},
		{"timeout reached", EndUnknown, "timeout reached"},
		{"Timeout", EndUnknown, "Timeout"},
		{"", EndUnknown, ""},
		{"bad\x00\nbytes\xff", EndUnknown, "bad??bytes?"},
	} {
		r, d := parseEndReason(tc.in)
		if r != tc.reason || d != tc.detail {
			t.Errorf("parseEndReason(%q) = %q, %q; want %q, %q", tc.in, r, d, tc.reason, tc.detail)
		}
	}
	r, d := parseEndReason("init_exited: " + strings.Repeat("x", 1000))
	if r != EndInitExited || len(d) != maxEndDetail {
		t.Errorf("long detail: %q, %d bytes", r, len(d))
	}
}

func TestSandboxEndedErrorMessage(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, tc := range []struct {
		e    SandboxEndedError
		want string
	}{
		{SandboxEndedError{ID: "microvm-1", EndedAt: at, Reason: EndTimeout}, "sandbox microvm-1 ended at 2026-01-02T03:04:05Z (timeout)"},
		{SandboxEndedError{ID: "microvm-1", Reason: EndInitExited, Detail: "exit status 3"}, "sandbox microvm-1 ended (init_exited: exit status 3)"},
		{SandboxEndedError{ID: "microvm-1", Reason: EndUnknown, Detail: "Success."}, "sandbox microvm-1 ended (Success.)"},
		{SandboxEndedError{ID: "microvm-1", Reason: EndUnknown}, "sandbox microvm-1 ended"},
	} {
		if got := tc.e.Error(); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.e, got, tc.want)
		}
	}
}

// Whatever the platform writes, the parser returns a known reason and a
// short, printable detail.
func FuzzParseEndReason(f *testing.F) {
	for _, s := range []string{"timeout", "init_exited: exit status 3", "Container Stopped with Exit Code: 124", "Success.", "", ":", "idle:"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, d := parseEndReason(s)
		if r != EndUnknown && !endReasons[r] {
			t.Fatalf("reason %q outside the set", r)
		}
		if len(d) > maxEndDetail || !utf8.ValidString(d) {
			t.Fatalf("detail of %d bytes: %q", len(d), d)
		}
		for i := 0; i < len(d); i++ {
			if d[i] < 0x20 || d[i] > 0x7e {
				t.Fatalf("detail %q has byte %#x", d, d[i])
			}
		}
	})
}

package envdprocess

import (
	"testing"

	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
)

// End events read as envd's (Go's os.ProcessState).
func TestEndEvent(t *testing.T) {
	sig := func(n int32) *int32 { return &n }
	for _, tc := range []struct {
		in     *raydv1.EndEvent
		code   int32
		exited bool
		status string
		err    string
	}{
		{&raydv1.EndEvent{ExitCode: 0, Exited: true, Status: "exited"}, 0, true, "exit status 0", ""},
		{&raydv1.EndEvent{ExitCode: 3, Exited: true, Status: "exited"}, 3, true, "exit status 3", "exit status 3"},
		{&raydv1.EndEvent{ExitCode: 137, Status: "signaled", Signal: sig(9)}, -1, false, "signal: killed", "signal: killed"},
		{&raydv1.EndEvent{ExitCode: 143, Status: "timeout", Signal: sig(15)}, -1, false, "signal: terminated", "signal: terminated"},
		{&raydv1.EndEvent{ExitCode: 137, Status: "oom_killed"}, -1, false, "signal: killed", "signal: killed"},
	} {
		e := endEvent(tc.in)
		if e.GetExitCode() != tc.code || e.GetExited() != tc.exited || e.GetStatus() != tc.status || e.GetError() != tc.err {
			t.Errorf("endEvent(%v) = %v", tc.in, e)
		}
	}
}

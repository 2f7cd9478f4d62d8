package cliutil

import (
	"context"
	"testing"

	rayito "github.com/rayito-dev/rayito/sdk"
)

// One rule for a sandbox that ended under a command: the sandbox's time
// ran out (timeout, max_duration) exits 124, any other end 137, and the
// message is always "sandbox ID ended: REASON".
func TestSandboxEndExitCodes(t *testing.T) {
	t.Parallel()
	const id = "microvm-1"
	for _, tc := range []struct {
		reason rayito.EndReason
		detail string
		code   int
		msg    string
	}{
		{rayito.EndTimeout, "", ExitTimeout, "sandbox microvm-1 ended: timeout"},
		{rayito.EndMaxDuration, "", ExitTimeout, "sandbox microvm-1 ended: max_duration"},
		{rayito.EndKilledByUser, "", ExitSandboxEnded, "sandbox microvm-1 ended: killed_by_user"},
		{rayito.EndOutOfMemory, "", ExitSandboxEnded, "sandbox microvm-1 ended: out_of_memory"},
		{rayito.EndIdle, "", ExitSandboxEnded, "sandbox microvm-1 ended: idle"},
		{rayito.EndPlatformShutdown, "all microVMs terminated by the local platform", ExitSandboxEnded,
			"sandbox microvm-1 ended: platform_shutdown (all microVMs terminated by the local platform)"},
		{rayito.EndPlatformError, "resume hook failed", ExitSandboxEnded, "sandbox microvm-1 ended: platform_error (resume hook failed)"},
		{rayito.EndInitExited, "exit status 3", ExitSandboxEnded, "sandbox microvm-1 ended: init_exited (exit status 3)"},
		{rayito.EndUnknown, "", ExitSandboxEnded, "sandbox microvm-1 ended: unknown"},
		{"", "", ExitSandboxEnded, "sandbox microvm-1 ended: unknown"},
		{rayito.EndUnknown, "its platform stopped answering", ExitSandboxEnded, "sandbox microvm-1 ended: unknown (its platform stopped answering)"},
	} {
		err := error(endOf(id, tc.reason, tc.detail))
		if msg, code := Exit(err); code != tc.code || msg != tc.msg {
			t.Errorf("%q: Exit = %q, %d; want %q, %d", tc.reason, msg, code, tc.msg, tc.code)
		}
	}
}

// EndedUnder asks nothing of a command that exited on its own, nor after
// Ctrl-C: it answers nil without reaching the sandbox (nil here).
func TestEndedUnderLeavesPlainEnds(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		code   int
		status rayito.CommandStatus
	}{{0, rayito.StatusExited}, {1, rayito.StatusExited}, {127, rayito.StatusExited}, {124, rayito.StatusTimeout}, {143, rayito.StatusTimeout}} {
		if err := EndedUnder(context.Background(), nil, tc.code, tc.status, nil); err != nil {
			t.Errorf("%d %s: %v", tc.code, tc.status, err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := EndedUnder(ctx, nil, 143, rayito.StatusSignaled, nil); err != nil {
		t.Errorf("after Ctrl-C: %v", err)
	}
}

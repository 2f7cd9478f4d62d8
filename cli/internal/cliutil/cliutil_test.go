package cliutil

import (
	"errors"
	"testing"

	rayito "github.com/rayito-dev/rayito/sdk"
)

func TestParseEnvs(t *testing.T) {
	t.Parallel()
	got, err := ParseEnvs([]string{"A=1", "B=x=y", "C="})
	if err != nil || got["A"] != "1" || got["B"] != "x=y" || got["C"] != "" {
		t.Fatalf("%v %v", got, err)
	}
	for _, bad := range []string{"NOEQ", "=v"} {
		var u *UsageError
		if _, err := ParseEnvs([]string{bad}); !errors.As(err, &u) {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

// The CLI's "rayito: " is the only prefix a message keeps.
func TestDescribeDropsPackagePrefixes(t *testing.T) {
	for in, want := range map[string]string{
		"rayito: sandbox x not found":                    "sandbox x not found",
		"microvms: TerminateMicrovm: throttled":          "TerminateMicrovm: throttled",
		"localvm: another local platform is using state": "another local platform is using state",
		"start the local platform: launcher: no cgroups": "start the local platform: no cgroups",
		"rayito: rayito: start: executable not found":    "start: executable not found",
	} {
		if got := Describe(errors.New(in)); got != want {
			t.Errorf("Describe(%q) = %q, want %q", in, got, want)
		}
	}
}

// A sandbox's end, its deadline and the OOM killer: one line each, and
// exit 124 for a deadline.
func TestExitForSandboxEnds(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		err  error
		msg  string
		code int
	}{
		{OnSandbox("microvm-1", &rayito.SandboxEndedError{ID: "microvm-1", Reason: rayito.EndTimeout}), "sandbox microvm-1 ended: timeout", ExitTimeout},
		{&rayito.SandboxEndedError{ID: "microvm-1", Reason: rayito.EndInitExited, Detail: "exit status 3"}, "sandbox microvm-1 ended: init_exited (exit status 3)", ExitError},
		{&rayito.SandboxEndedError{ID: "microvm-1", Reason: rayito.EndUnknown, Detail: "Success."}, "sandbox microvm-1 ended: unknown (Success.)", ExitError},
		{&rayito.SandboxEndedError{ID: "microvm-1", Reason: rayito.EndUnknown}, "sandbox microvm-1 ended", ExitError},
		{&CommandEndError{Program: "python", Why: "killed by the OOM killer (out of memory)", Code: 137}, "python: killed by the OOM killer (out of memory)", 137},
	} {
		msg, code := Exit(tc.err)
		if msg != tc.msg || code != tc.code {
			t.Errorf("Exit(%v) = %q, %d; want %q, %d", tc.err, msg, code, tc.msg, tc.code)
		}
	}
	if got := EndText(rayito.EndOutOfMemory, ""); got != "out_of_memory" {
		t.Errorf("EndText = %q", got)
	}
	if got := EndText("", ""); got != "" {
		t.Errorf("EndText of nothing = %q", got)
	}
}

package cliutil

import (
	"errors"
	"testing"
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

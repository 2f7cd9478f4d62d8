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

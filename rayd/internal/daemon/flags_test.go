package daemon

import (
	"io"
	"testing"
)

func TestParseFlagsReadyFD(t *testing.T) {
	t.Parallel()
	getenv := func(string) string { return "" }
	cfg, err := ParseFlags(nil, getenv, io.Discard)
	if err != nil || cfg.ReadyFD != -1 {
		t.Fatalf("default: %+v, %v", cfg, err)
	}
	cfg, err = ParseFlags([]string{"-ready-fd", "7"}, getenv, io.Discard)
	if err != nil || cfg.ReadyFD != 7 {
		t.Fatalf("-ready-fd 7: %+v, %v", cfg, err)
	}
	for _, bad := range []string{"0", "1", "2", "-2", "x"} {
		if _, err := ParseFlags([]string{"-ready-fd", bad}, getenv, io.Discard); err == nil {
			t.Errorf("-ready-fd %s accepted", bad)
		}
	}
}

//go:build linux

package hostnet

import (
	"errors"
	"testing"

	"github.com/vishvananda/netlink"
)

func TestRetryDump(t *testing.T) {
	calls := 0
	got, err := RetryDump(func() (int, error) {
		calls++
		if calls < 3 {
			return 0, netlink.ErrDumpInterrupted
		}
		return 42, nil
	})
	if got != 42 || err != nil || calls != 3 {
		t.Fatalf("got %d, %v after %d calls", got, err, calls)
	}
	calls = 0
	_, err = RetryDump(func() (int, error) { calls++; return 0, netlink.ErrDumpInterrupted })
	if !errors.Is(err, netlink.ErrDumpInterrupted) || calls != DumpAttempts {
		t.Fatalf("always interrupted: %v after %d calls", err, calls)
	}
}

//go:build !linux

package proc

import (
	"errors"
	"os"
	"syscall"

	"github.com/rayito-dev/rayito/rayd/internal/identity"
)

var errGroupGone = errors.New("proc: process group is gone")

// platform is a stub: process supervision needs Linux.
type platform struct {
	devNull *os.File
}

func (pl *platform) init(*Supervisor) error { return errUnsupported }

func (pl *platform) stop() {}

func (pl *platform) spawn(*Supervisor, string, []string, []string, string, *identity.Identity, []*os.File, bool) (int, error) {
	return 0, errUnsupported
}

func openPTY(uint16, uint16, *identity.Identity) (master, slave *os.File, err error) {
	return nil, nil, errUnsupported
}

func setWinsize(uintptr, uint16, uint16) error { return errUnsupported }

func killGroup(int, syscall.Signal) error { return errUnsupported }

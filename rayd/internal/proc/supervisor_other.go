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

func (pl *platform) spawn(*Supervisor, string, []string, []string, string, *identity.Identity, []*os.File) (int, error) {
	return 0, errUnsupported
}

func killGroup(int, syscall.Signal) error { return errUnsupported }

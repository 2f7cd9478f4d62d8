//go:build unix

package image

import (
	"errors"
	"os"
	"syscall"
)

func openNoFollow(p string) (*os.File, error) {
	return os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
}

func isLoop(err error) bool { return errors.Is(err, syscall.ELOOP) }

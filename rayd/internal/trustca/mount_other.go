//go:build !linux

package trustca

import (
	"errors"
	"os"
)

type osMounter struct{}

func (osMounter) BindReadOnly(src, dst string) error {
	return errors.New("trustca: bind mounts need Linux")
}

func ownedBySelf(os.FileInfo) bool { return true }

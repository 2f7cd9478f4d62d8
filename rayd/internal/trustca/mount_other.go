//go:build !linux

package trustca

import "errors"

type osMounter struct{}

func (osMounter) BindReadOnly(src, dst string) error {
	return errors.New("trustca: bind mounts need Linux")
}

//go:build !linux

package doctor

import (
	"context"
	"errors"
)

var errNotLinux = errors.New("the local platform needs Linux")

func writable(string) bool                      { return false }
func fsType(string) (int64, error)              { return 0, errNotLinux }
func runInUserNS(context.Context, string) error { return errNotLinux }
func netfilterProbe(context.Context) error      { return errNotLinux }

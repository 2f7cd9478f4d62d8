//go:build linux && (386 || arm)

package safefs

import "golang.org/x/sys/unix"

func init() { sysSetgroups = unix.SYS_SETGROUPS32 }

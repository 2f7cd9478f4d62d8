package trustca

import (
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

type osMounter struct{}

// BindReadOnly binds src over dst and makes the bind read-only, nosuid,
// nodev, noexec.
func (osMounter) BindReadOnly(src, dst string) error {
	if err := unix.Mount(src, dst, "", unix.MS_BIND, ""); err != nil {
		return err
	}
	if err := unix.Mount("", dst, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		_ = unix.Unmount(dst, unix.MNT_DETACH)
		return err
	}
	return nil
}

// ownedBySelf reports whether fi belongs to rayd's own user.
func ownedBySelf(fi os.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && int(st.Uid) == os.Geteuid()
}

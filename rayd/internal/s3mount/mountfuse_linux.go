package s3mount

import (
	"errors"
	"strconv"

	"golang.org/x/sys/unix"
)

// mountFUSE mounts the FUSE connection fuse on pt's directory: with the
// new mount API (fsopen, fsmount, move_mount onto the walked descriptor),
// which leaves rayd the mount's own descriptor to unmount it by, or,
// where the kernel has none, mount(2) on /proc/self/fd/N of the walked
// descriptor. Either way the mount lands on the directory walked, never
// on a path looked up again.
func (m *Manager) mountFUSE(pt *point, fuse int, readOnly bool) error {
	id := strconv.Itoa(m.o.HelperUID)
	opts := [][2]string{{"source", "s3"}, {"fd", strconv.Itoa(fuse)}, {"rootmode", "40000"}, {"user_id", id}, {"group_id", id}}
	flags := []string{"allow_other", "default_permissions"}
	fsfd, err := unix.Fsopen("fuse", unix.FSOPEN_CLOEXEC)
	if err == nil && m.o.legacyMount {
		unix.Close(fsfd)
		err = unix.ENOSYS
	}
	if errors.Is(err, unix.ENOSYS) {
		var mflags uintptr = unix.MS_NOSUID | unix.MS_NODEV
		if readOnly {
			mflags |= unix.MS_RDONLY
		}
		data := ""
		for _, o := range opts[1:] {
			data += o[0] + "=" + o[1] + ","
		}
		for _, f := range flags {
			data += f + ","
		}
		return unix.Mount("s3", "/proc/self/fd/"+strconv.Itoa(pt.dir), "fuse", mflags, data[:len(data)-1])
	}
	if err != nil {
		return err
	}
	defer unix.Close(fsfd)
	for _, o := range opts {
		if err := unix.FsconfigSetString(fsfd, o[0], o[1]); err != nil {
			return err
		}
	}
	for _, f := range flags {
		if err := unix.FsconfigSetFlag(fsfd, f); err != nil {
			return err
		}
	}
	if err := unix.FsconfigCreate(fsfd); err != nil {
		return err
	}
	attrs := unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV
	if readOnly {
		attrs |= unix.MOUNT_ATTR_RDONLY
	}
	mfd, err := unix.Fsmount(fsfd, unix.FSMOUNT_CLOEXEC, attrs)
	if err != nil {
		return err
	}
	if err := unix.MoveMount(mfd, "", pt.dir, "", unix.MOVE_MOUNT_F_EMPTY_PATH|unix.MOVE_MOUNT_T_EMPTY_PATH); err != nil {
		unix.Close(mfd)
		return err
	}
	pt.mnt = mfd
	return nil
}

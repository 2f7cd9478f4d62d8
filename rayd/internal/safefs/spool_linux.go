package safefs

import (
	"context"
	"os"

	"golang.org/x/sys/unix"
)

// SpoolFile opens an unnamed temporary file (O_TMPFILE) in the directory
// dir, as the user: room on dir's file system for data rayd holds before
// it writes it there (a restore's archive, checked before anything is
// extracted). Nobody can open it by a name; it is gone once closed.
func (f *FS) SpoolFile(ctx context.Context, u User, dir string) (*os.File, error) {
	const op = "spool"
	c, err := f.resolveWrite(u, dir)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, perr(op, "canceled", err)
	}
	fd := -1
	err = f.runAs(u, func() error {
		dfd, err := f.walkDir(op, splitPath(c), nil)
		if err != nil {
			return err
		}
		defer unix.Close(dfd)
		nfd, err := unix.Openat(dfd, ".", unix.O_TMPFILE|unix.O_RDWR|unix.O_CLOEXEC, 0o600)
		if err != nil {
			return errnoErr(op, err)
		}
		fd = nfd
		return nil
	})
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), "safefs"), nil
}

// CheckReserve fails with [ErrDiskReserve] when n more bytes on the file
// system of file would leave less than the disk reserve (see
// [FS.WriteFile]).
func (f *FS) CheckReserve(file *os.File, n int64) error {
	sc, err := file.SyscallConn()
	if err != nil {
		return perr("reserve", "io", err)
	}
	var rerr error
	if err := sc.Control(func(fd uintptr) { rerr = f.checkReserve("reserve", int(fd), int(min(n, int64(^uint(0)>>1)))) }); err != nil {
		return perr("reserve", "io", err)
	}
	return rerr
}

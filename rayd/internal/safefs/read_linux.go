package safefs

import (
	"context"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// ReadFile opens the regular file at p for reading and returns it with its
// description. Symbolic links are followed, anywhere in the path, as
// `cat p` run by the user would follow them, but component by component
// (see [followPath]): at most [MaxSymlinks] of them ([ErrSymlinkLoop]),
// never into a denied prefix or file system ([ErrDenied]), and with the
// user's identity, so the kernel checks every directory's search
// permission and the file's read permission. The entry describes the file
// read, under the requested name and path. A non-regular file gives
// [ErrNotRegular]. The caller closes the reader.
func (f *FS) ReadFile(ctx context.Context, u User, p string) (io.ReadCloser, Entry, error) {
	const op = "read"
	c, err := f.Resolve(u, p)
	if err != nil {
		return nil, Entry{}, err
	}
	if c == "/" {
		return nil, Entry{}, perr(op, "not_regular", ErrNotRegular)
	}
	if err := ctx.Err(); err != nil {
		return nil, Entry{}, perr(op, "canceled", err)
	}
	var e Entry
	fd := -1
	err = f.runAs(u, func() error {
		// O_NONBLOCK so that a FIFO cannot block the open; everything is
		// opened with the user's credentials, so nothing is reachable that
		// the user could not open directly.
		w, _, atCand, err := f.follow(op, splitPath(c), unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY)
		if err != nil {
			return err
		}
		defer w.close()
		if !atCand || w.candSt.Mode&unix.S_IFMT != unix.S_IFREG {
			return perr(op, "not_regular", ErrNotRegular)
		}
		if err := unix.SetNonblock(w.cand, false); err != nil {
			return errnoErr(op, err)
		}
		_, name := split(c)
		e = f.entryFromStat(name, c, &w.candSt)
		e.Metadata = f.readMetadata(w.cand)
		fd = w.take()
		return nil
	})
	if err != nil {
		return nil, Entry{}, err
	}
	f.fillNames(&e)
	// The os.File name appears in its errors; it must not be the path.
	return os.NewFile(uintptr(fd), "safefs"), e, nil
}

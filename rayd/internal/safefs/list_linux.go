package safefs

import (
	"context"
	"errors"
	"io"
	"os"
	"path"
	"slices"

	"golang.org/x/sys/unix"
)

// ListDir lists the directory at p to the given depth (0 or 1: its entries
// only). Symbolic links on the way to p, and p itself, are followed as for
// [FS.ReadFile], so a link to a directory lists that directory; the
// entries keep the requested path as their prefix. Entries are sorted by
// name within each directory and reported with lstat semantics: symbolic
// links among them are reported as links and not descended into. Entries
// whose real path is under a denied prefix or on a denied file system are
// omitted, as are subdirectories the user cannot read. More than
// Options.MaxListEntries entries fail with [ErrTooMany].
func (f *FS) ListDir(ctx context.Context, u User, p string, depth int) ([]Entry, error) {
	const op = "list"
	c, err := f.Resolve(u, p)
	if err != nil {
		return nil, err
	}
	if depth < 1 {
		depth = 1
	}
	var out []Entry
	err = f.runAs(u, func() error {
		w, fd, rp, err := f.followDir(op, splitPath(c))
		if err != nil {
			return err
		}
		defer w.close()
		return f.list(ctx, op, fd, rp, c, depth, &out, true)
	})
	if err != nil {
		return nil, err
	}
	for i := range out {
		f.fillNames(&out[i])
	}
	return out, nil
}

// list appends the entries of the directory fd, whose real canonical path
// is dir and which is shown as shown, to out.
func (f *FS) list(ctx context.Context, op string, fd int, dir, shown string, depth int, out *[]Entry, top bool) error {
	if err := ctx.Err(); err != nil {
		return perr(op, "canceled", err)
	}
	rfd, err := f.openat(fd, ".", unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		if top {
			return errnoErr(op, err)
		}
		return nil // an unreadable subdirectory is skipped
	}
	d := os.NewFile(uintptr(rfd), "safefs")
	var names []string
	for {
		batch, err := d.Readdirnames(1024)
		names = append(names, batch...)
		if len(names)+len(*out) > f.maxList {
			d.Close()
			return perr(op, "too_many", ErrTooMany)
		}
		if err == io.EOF || len(batch) == 0 {
			break
		}
		if err != nil {
			d.Close()
			return errnoErr(op, err)
		}
	}
	d.Close()
	slices.Sort(names)
	for _, name := range names {
		rp, p := path.Join(dir, name), path.Join(shown, name)
		if isDenied(f.deny, rp) {
			continue
		}
		e, efd, err := f.entryAt(op, fd, name, p, true)
		if err != nil {
			if errors.Is(err, ErrDenied) || errors.Is(err, os.ErrNotExist) {
				continue
			}
			return err
		}
		isDir := e.Type == TypeDir // links are never descended into
		if f.envd && e.Type == TypeSymlink {
			f.describeLink(op, &e, rp)
		}
		*out = append(*out, e)
		if len(*out) > f.maxList {
			unix.Close(efd)
			return perr(op, "too_many", ErrTooMany)
		}
		if isDir && depth > 1 {
			err = f.list(ctx, op, efd, rp, p, depth-1, out, false)
		}
		unix.Close(efd)
		if err != nil {
			return err
		}
	}
	return nil
}

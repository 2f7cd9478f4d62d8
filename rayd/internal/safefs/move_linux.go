package safefs

import (
	"context"
	"errors"

	"golang.org/x/sys/unix"
)

// Move renames src to dst (rename(2) semantics: an existing dst file, or an
// empty dst directory, is replaced). Both parents are reached through the
// safe walk and the rename is done with renameat2 between those
// descriptors; a symbolic link src is moved as a link. dst's parent must
// exist (an [Options.Envd] FS creates it, as for WriteFile). Between two
// file systems ([ErrCrossDevice]) an Envd FS moves a regular file the way
// mv(1) does, as E2B programs expect (one file system on E2B, several
// tmpfs in a sandbox): an atomic copy as the user ([FS.WriteFile], with
// the source's permission bits and metadata), then the source's removal;
// a directory or a link is still ErrCrossDevice.
func (f *FS) Move(ctx context.Context, u User, src, dst string) (Entry, error) {
	e, err := f.move(ctx, u, src, dst)
	if f.envd && errors.Is(err, ErrCrossDevice) {
		return f.copyMove(ctx, u, src, dst, err)
	}
	return e, err
}

// copyMove is Move across file systems for a regular file; refused is the
// rename's error, returned for anything else.
func (f *FS) copyMove(ctx context.Context, u User, src, dst string, refused error) (Entry, error) {
	st, err := f.Stat(ctx, u, src)
	if err != nil {
		return Entry{}, err
	}
	if st.Type != TypeFile || st.SymlinkTarget != "" {
		return Entry{}, refused
	}
	rc, re, err := f.ReadFile(ctx, u, src)
	if err != nil {
		return Entry{}, err
	}
	// The metadata travels where it fits the write's rules (attributes set
	// by hand may not).
	md := map[string]string{}
	for k, v := range re.Metadata {
		if ValidateMetadata(map[string]string{k: v}) == nil {
			md[k] = v
		}
	}
	if ValidateMetadata(md) != nil {
		md = nil
	}
	e, err := f.WriteFile(ctx, u, dst, rc, re.Mode.Perm(), md)
	rc.Close()
	if err != nil {
		return Entry{}, err
	}
	if err := f.Remove(ctx, u, src, false); err != nil {
		return Entry{}, err
	}
	return e, nil
}

func (f *FS) move(ctx context.Context, u User, src, dst string) (Entry, error) {
	const op = "move"
	cs, err := f.resolveWrite(u, src)
	if err != nil {
		return Entry{}, err
	}
	cd, err := f.resolveWrite(u, dst)
	if err != nil {
		return Entry{}, err
	}
	if cs == "/" || cd == "/" {
		return Entry{}, perr(op, "denied", ErrDenied)
	}
	if err := ctx.Err(); err != nil {
		return Entry{}, perr(op, "canceled", err)
	}
	var e Entry
	err = f.runAsSudo(u, func(s sudo) error {
		sp, sn := split(cs)
		dp, dn := split(cd)
		sfd, err := f.walkDir(op, sp, nil)
		if err != nil {
			return err
		}
		defer unix.Close(sfd)
		// envd creates the destination's missing parents; rayd's own
		// Move wants them to exist.
		var cr *creator
		if f.envd {
			lfd, err := f.openat(sfd, sn, unix.O_PATH, 0)
			if err != nil {
				return errnoErr(op, err) // no directories for a missing source
			}
			unix.Close(lfd)
			cr = f.creatorFor(u, s)
		}
		dfd, err := f.walkDir(op, dp, cr)
		if err != nil {
			return err
		}
		defer unix.Close(dfd)
		// The source must not be on a denied file system (e.g. a mount
		// point of one).
		lfd, err := f.openat(sfd, sn, unix.O_PATH, 0)
		if err != nil {
			return errnoErr(op, err)
		}
		err = checkFS(op, lfd)
		unix.Close(lfd)
		if err != nil {
			return err
		}
		if err := unix.Renameat2(sfd, sn, dfd, dn, 0); err != nil {
			if err != unix.ENOSYS {
				return errnoErr(op, err)
			}
			if err := unix.Renameat(sfd, sn, dfd, dn); err != nil {
				return errnoErr(op, err)
			}
		}
		var fd int
		e, fd, err = f.entryAt(op, dfd, dn, cd, true)
		closeFD(fd)
		if err == nil && f.envd && e.Type == TypeSymlink {
			f.describeLink(op, &e, cd)
		}
		return err
	})
	if err != nil {
		return Entry{}, err
	}
	f.fillNames(&e)
	return e, nil
}

package archive

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"errors"
	"io"

	"github.com/rayito-dev/rayito/proto/checkpoint"
	"github.com/rayito-dev/rayito/rayd/internal/safefs"
)

// Counts of a Pack or an Extract.
type Counts struct {
	Files, Directories, Symlinks uint64
	// ContentBytes is the sum of the regular files' sizes.
	ContentBytes uint64
	// Left out or changed: by Pack, Special (FIFOs, sockets, devices),
	// Unreadable, OtherDevice and Changed (files whose size changed while
	// read: cut or padded with zeros to the size first seen); by Extract,
	// Special, HardLinks, Other, ModesSanitized and Conflicts.
	Special, HardLinks, Unreadable, OtherDevice, Changed, Conflicts, Other, ModesSanitized uint64
}

// Pack writes the tree under root, read as u through fsys (WalkTree: no
// link followed, no other file system entered), to w as a tar.gz archive
// of the format: entries relative to root, directories first and named
// with a trailing "/", every file in full (hard links are not kept: each
// path gets its content), permission bits only (no setuid, setgid or
// sticky), modification times in seconds, u's ids as owner. Paths matched
// by ex are left out. progress, when set, is called after every file with
// the counts so far. w is not closed.
func Pack(ctx context.Context, fsys *safefs.FS, u safefs.User, root string, ex *Excludes, w io.Writer, progress func(Counts)) (Counts, error) {
	var c Counts
	zw, err := gzip.NewWriterLevel(w, GzipLevel)
	if err != nil {
		return c, err
	}
	tw := tar.NewWriter(zw)
	buf := make([]byte, 256<<10)
	owner := checkpoint.Owner{UID: int(u.UID), GID: int(u.GID)}
	err = fsys.WalkTree(ctx, u, root, safefs.WalkOptions{
		Exclude: ex.Match,
		Skipped: func(_ string, why safefs.SkipReason) {
			switch why {
			case safefs.SkipSpecial:
				c.Special++
			case safefs.SkipUnreadable:
				c.Unreadable++
			case safefs.SkipOtherDevice:
				c.OtherDevice++
			}
		},
		Visit: func(e safefs.TreeEntry) error {
			switch e.Type {
			case safefs.TypeDir:
				c.Directories++
				return tw.WriteHeader(checkpoint.DirHeader(e.Rel, e.Mode, e.ModTime, owner))
			case safefs.TypeSymlink:
				c.Symlinks++
				return tw.WriteHeader(checkpoint.SymlinkHeader(e.Rel, e.Target, e.Mode, e.ModTime, owner))
			}
			if err := tw.WriteHeader(checkpoint.FileHeader(e.Rel, e.Mode, e.ModTime, e.Size, owner)); err != nil {
				return err
			}
			changed, err := copyExactly(ctx, tw, e.File, e.Size, buf)
			if err != nil {
				return err
			}
			if changed {
				c.Changed++
			}
			c.Files++
			c.ContentBytes += uint64(e.Size)
			if progress != nil {
				progress(c)
			}
			return nil
		},
	})
	if err != nil {
		return c, err
	}
	if err := tw.Close(); err != nil {
		return c, err
	}
	return c, zw.Close()
}

// copyExactly copies size bytes of f to w: a file that shrank meanwhile is
// padded with zeros, one that grew is cut; changed says so. ctx is checked
// between chunks.
func copyExactly(ctx context.Context, w io.Writer, f io.Reader, size int64, buf []byte) (changed bool, err error) {
	left := size
	for left > 0 {
		if err := ctx.Err(); err != nil {
			return false, err
		}
		n, rerr := f.Read(buf[:min(int64(len(buf)), left)])
		if n > 0 {
			if _, err := w.Write(buf[:n]); err != nil {
				return false, err
			}
			left -= int64(n)
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return false, &readError{rerr}
		}
	}
	if left > 0 {
		clear(buf)
		for left > 0 {
			n := min(int64(len(buf)), left)
			if _, err := w.Write(buf[:n]); err != nil {
				return false, err
			}
			left -= n
		}
		return true, nil
	}
	var one [1]byte
	if n, _ := f.Read(one[:]); n > 0 {
		return true, nil
	}
	return false, nil
}

// readError is a failed read of a file being archived.
type readError struct{ err error }

func (e *readError) Error() string { return "archive: reading a file: " + e.err.Error() }
func (e *readError) Unwrap() error { return e.err }

// Extract extracts the tar.gz archive r through x, checking every entry
// as Scan does (so an archive Scan accepted extracts the same way; one it
// did not is refused at the same entry): directories, regular files (with
// their permission bits and modification time) and symbolic links; the
// rest is left out and counted. An entry that cannot be placed (a link or
// a non-directory on its way on disk, a non-empty directory where a file
// or link goes) is counted as a conflict and left out; a directory in the
// place of a file or link is replaced when empty. Directories get their
// permission bits last (x.Finish). progress, when set, is called after
// every file with the counts so far.
func Extract(ctx context.Context, x *safefs.Extractor, r io.Reader, progress func(Counts)) (Counts, error) {
	var c Counts
	conflict := func(err error) bool {
		if errors.Is(err, safefs.ErrSymlink) || errors.Is(err, safefs.ErrNotDir) || errors.Is(err, safefs.ErrIsDir) || errors.Is(err, safefs.ErrNotEmpty) {
			c.Conflicts++
			return true
		}
		return false
	}
	err := checkpoint.Walk(r, func(e Entry, body io.Reader) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		if e.Sanitized {
			c.ModesSanitized++
		}
		var err error
		switch e.Kind {
		case KindSkip:
			switch e.Skip {
			case SkipSpecial:
				c.Special++
			case SkipHardLink:
				c.HardLinks++
			case SkipOther:
				c.Other++
			}
			return nil
		case KindDir:
			if err = x.Dir(ctx, e.Path, e.Perm); err == nil {
				c.Directories++
			}
		case KindFile:
			err = x.File(ctx, e.Path, body, e.Perm, e.ModTime)
			if errors.Is(err, safefs.ErrIsDir) && x.RemoveEmptyDir(ctx, e.Path) == nil {
				err = x.File(ctx, e.Path, body, e.Perm, e.ModTime)
			}
			if err == nil {
				c.Files++
				c.ContentBytes += uint64(e.Size)
				if progress != nil {
					progress(c)
				}
			}
		case KindSymlink:
			if err = x.Symlink(ctx, e.Path, e.Target); err == nil {
				c.Symlinks++
			}
		}
		if err != nil && !conflict(err) {
			return err
		}
		return nil
	})
	if err != nil {
		return c, err
	}
	return c, x.Finish(ctx)
}

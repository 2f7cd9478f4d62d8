package checkpoint

import (
	"archive/tar"
	"io/fs"
	"time"
)

// The layout of an archive's entries, for a writer. Every program that
// writes the format builds its headers here, so that archives of the same
// tree are laid out alike whoever wrote them: names relative to the root
// without a leading "./" (the root itself has no entry), a directory named
// with a trailing "/" before what it holds, every regular file in full (a
// hard link is written as the file it names, or left out), permission
// bits only (no setuid, setgid or sticky bit), modification times in whole
// seconds, the HOME owner's numeric ids and no owner names. Devices,
// FIFOs and sockets have no entry.

// Owner is the numeric owner written in every entry: the user whose HOME
// the archive holds. A reader ignores it (what it extracts belongs to the
// user who extracts it).
type Owner struct{ UID, GID int }

func header(typ byte, name string, perm fs.FileMode, mtime time.Time, o Owner) *tar.Header {
	return &tar.Header{
		Typeflag: typ,
		Name:     name,
		Mode:     int64(perm.Perm()),
		ModTime:  mtime.Truncate(time.Second),
		Uid:      o.UID,
		Gid:      o.GID,
	}
}

// DirHeader is the header of the directory rel (clean, relative, not the
// root).
func DirHeader(rel string, perm fs.FileMode, mtime time.Time, o Owner) *tar.Header {
	return header(tar.TypeDir, rel+"/", perm, mtime, o)
}

// FileHeader is the header of the regular file rel of size bytes; its
// content follows it.
func FileHeader(rel string, perm fs.FileMode, mtime time.Time, size int64, o Owner) *tar.Header {
	h := header(tar.TypeReg, rel, perm, mtime, o)
	h.Size = size
	return h
}

// SymlinkHeader is the header of the symbolic link rel to target.
func SymlinkHeader(rel, target string, perm fs.FileMode, mtime time.Time, o Owner) *tar.Header {
	h := header(tar.TypeSymlink, rel, perm, mtime, o)
	h.Linkname = target
	return h
}

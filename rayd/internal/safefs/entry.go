package safefs

import (
	"io/fs"
	"time"
)

// FileType is the kind of an [Entry].
type FileType int

// File types.
const (
	TypeFile FileType = iota
	TypeDir
	TypeSymlink
	TypeOther // device, FIFO or socket
)

func (t FileType) String() string {
	switch t {
	case TypeFile:
		return "file"
	case TypeDir:
		return "dir"
	case TypeSymlink:
		return "symlink"
	}
	return "other"
}

// Entry describes one file system object. [FS.Stat] and [FS.ListDir]
// describe a symbolic link as itself (lstat semantics); [FS.ReadFile] and
// [FS.StatFollow] describe the object a link leads to. Name and Path are
// always the requested ones, not the link's target.
type Entry struct {
	Name string // last path component ("/" for the root)
	Path string // canonical absolute path, as requested (links not resolved)
	Type FileType
	Size int64
	// Mode holds the permission bits plus Go's type, setuid, setgid and
	// sticky bits.
	Mode fs.FileMode
	// Perm is the ls(1)-style rendering of the mode, e.g. "-rw-r--r--".
	Perm     string
	UID, GID uint32
	// Owner and Group are the account and group names, or the decimal IDs
	// when the name is unknown.
	Owner, Group string
	ModTime      time.Time
	// SymlinkTarget is the link's target, set for symbolic links only.
	// An [Options.Envd] FS describes a link by where it leads, as E2B's
	// envd does: Type, Mode and Metadata are the final target's and
	// SymlinkTarget its real canonical path (a link that leads nowhere:
	// TypeOther, mode 0, its own Path).
	SymlinkTarget string
	// Metadata holds the user.rayito.* and user.e2b.* extended attributes
	// with the prefix stripped (the FS's own namespace wins a key in
	// both). It is empty when the file has none or the user cannot read
	// the file.
	Metadata map[string]string
}

// User is the account an operation is performed for.
type User struct {
	UID, GID uint32
	// Groups are the supplementary groups (the primary GID may be included).
	Groups []uint32
	// Home is the absolute home directory; relative paths resolve under it.
	Home string
}

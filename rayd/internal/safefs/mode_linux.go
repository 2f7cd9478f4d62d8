package safefs

import (
	"io/fs"

	"golang.org/x/sys/unix"
)

// goMode converts a st_mode to an fs.FileMode.
func goMode(m uint32) fs.FileMode {
	mode := fs.FileMode(m & 0o777)
	switch m & unix.S_IFMT {
	case unix.S_IFDIR:
		mode |= fs.ModeDir
	case unix.S_IFLNK:
		mode |= fs.ModeSymlink
	case unix.S_IFIFO:
		mode |= fs.ModeNamedPipe
	case unix.S_IFSOCK:
		mode |= fs.ModeSocket
	case unix.S_IFCHR:
		mode |= fs.ModeDevice | fs.ModeCharDevice
	case unix.S_IFBLK:
		mode |= fs.ModeDevice
	}
	if m&unix.S_ISUID != 0 {
		mode |= fs.ModeSetuid
	}
	if m&unix.S_ISGID != 0 {
		mode |= fs.ModeSetgid
	}
	if m&unix.S_ISVTX != 0 {
		mode |= fs.ModeSticky
	}
	return mode
}

// permString renders a st_mode like ls -l, e.g. "drwxr-xr-x".
func permString(m uint32) string {
	b := []byte("----------")
	switch m & unix.S_IFMT {
	case unix.S_IFDIR:
		b[0] = 'd'
	case unix.S_IFLNK:
		b[0] = 'l'
	case unix.S_IFIFO:
		b[0] = 'p'
	case unix.S_IFSOCK:
		b[0] = 's'
	case unix.S_IFCHR:
		b[0] = 'c'
	case unix.S_IFBLK:
		b[0] = 'b'
	}
	const rwx = "rwxrwxrwx"
	for i := 0; i < 9; i++ {
		if m&(1<<uint(8-i)) != 0 {
			b[1+i] = rwx[i]
		}
	}
	special := func(pos int, bit uint32, set, unset byte) {
		if m&bit != 0 {
			if b[pos] == '-' {
				b[pos] = unset
			} else {
				b[pos] = set
			}
		}
	}
	special(3, unix.S_ISUID, 's', 'S')
	special(6, unix.S_ISGID, 's', 'S')
	special(9, unix.S_ISVTX, 't', 'T')
	return string(b)
}

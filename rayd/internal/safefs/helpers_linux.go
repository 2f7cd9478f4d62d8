package safefs

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os/user"
	"path"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// This file holds what the operations share: file system checks, errno
// mapping, openat2 and the descriptor walk, directory creation for the
// user, entries, metadata attributes and owner names.

// deniedFSTypes are the kernel pseudo file systems that are never accessed.
var deniedFSTypes = map[int64]bool{
	unix.PROC_SUPER_MAGIC:    true,
	unix.SYSFS_MAGIC:         true,
	unix.DEVPTS_SUPER_MAGIC:  true,
	unix.CGROUP_SUPER_MAGIC:  true,
	unix.CGROUP2_SUPER_MAGIC: true,
	unix.SECURITYFS_MAGIC:    true,
	unix.DEBUGFS_MAGIC:       true,
	unix.TRACEFS_MAGIC:       true,
	unix.BPF_FS_MAGIC:        true,
	unix.EFIVARFS_MAGIC:      true,
	unix.PSTOREFS_MAGIC:      true,
	unix.BINFMTFS_MAGIC:      true,
	unix.SELINUX_MAGIC:       true,
	unix.SMACK_MAGIC:         true,
	unix.NSFS_MAGIC:          true,
}

// checkFS refuses descriptors on denied file system types.
func checkFS(op string, fd int) error {
	var st unix.Statfs_t
	if err := fstatfs(fd, &st); err != nil {
		return errnoErr(op, err)
	}
	if deniedFSTypes[int64(st.Type)] {
		return perr(op, "fstype", ErrDenied)
	}
	return nil
}

func fstatfs(fd int, st *unix.Statfs_t) error {
	for {
		err := unix.Fstatfs(fd, st)
		if !errors.Is(err, unix.EINTR) {
			return err
		}
	}
}

// errnoErr converts a system call error into a *PathError.
func errnoErr(op string, err error) error {
	if err == nil {
		return nil
	}
	var pe *PathError
	if errors.As(err, &pe) {
		return err
	}
	switch {
	case errors.Is(err, unix.ELOOP):
		return perr(op, "symlink", ErrSymlink)
	case errors.Is(err, unix.ENOENT):
		return perr(op, "not_found", err)
	case errors.Is(err, unix.EACCES) || errors.Is(err, unix.EPERM):
		return perr(op, "permission", err)
	case errors.Is(err, unix.ENOTDIR):
		return perr(op, "not_dir", ErrNotDir)
	case errors.Is(err, unix.EISDIR):
		return perr(op, "is_dir", ErrIsDir)
	case errors.Is(err, unix.EEXIST):
		return perr(op, "exists", ErrExist)
	case errors.Is(err, unix.ENOTEMPTY):
		return perr(op, "not_empty", ErrNotEmpty)
	case errors.Is(err, unix.ENOSPC) || errors.Is(err, unix.EDQUOT):
		return perr(op, "disk_full", ErrDiskFull)
	case errors.Is(err, unix.ENAMETOOLONG):
		return perr(op, "too_long", ErrInvalidPath)
	case errors.Is(err, unix.EXDEV):
		return perr(op, "cross_device", ErrCrossDevice)
	}
	return perr(op, "io", err)
}

const resolveFlags = unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_BENEATH

// openat opens the single component name relative to dirfd, never following
// a symbolic link (O_NOFOLLOW is always added, as is O_CLOEXEC). It uses
// openat2 with RESOLVE_NO_SYMLINKS|RESOLVE_NO_MAGICLINKS|RESOLVE_BENEATH
// and falls back to openat when the kernel lacks openat2.
func (f *FS) openat(dirfd int, name string, flags int, mode uint32) (int, error) {
	flags |= unix.O_NOFOLLOW | unix.O_CLOEXEC
	if flags&unix.O_CREAT == 0 {
		mode = 0
	}
	if !f.noOpenat2.Load() {
		how := unix.OpenHow{Flags: uint64(flags), Mode: uint64(mode), Resolve: resolveFlags}
		for {
			fd, err := unix.Openat2(dirfd, name, &how)
			switch {
			case errors.Is(err, unix.EINTR) || errors.Is(err, unix.EAGAIN):
				continue
			case errors.Is(err, unix.ENOSYS):
				f.noOpenat2.Store(true)
			default:
				return fd, err
			}
			break
		}
	}
	for {
		fd, err := unix.Openat(dirfd, name, flags, mode)
		if !errors.Is(err, unix.EINTR) {
			return fd, err
		}
	}
}

func closeFD(fd int) {
	if fd >= 0 {
		unix.Close(fd)
	}
}

// openRoot opens "/" as an O_PATH directory descriptor.
func openRoot(op string) (int, error) {
	fd, err := unix.Open("/", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, errnoErr(op, err)
	}
	if err := checkFS(op, fd); err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

// walkDir opens the directory whose components are comps, one component at
// a time from "/", and returns an O_PATH descriptor for it. Each component
// must be a real directory on an allowed file system: a symbolic link gives
// ErrSymlink and anything else ErrNotDir. With create (non-nil), missing
// components are created with mode 0755 by [FS.mkdirFor] (as the current
// fsuid, so owned by the user).
func (f *FS) walkDir(op string, comps []string, create *creator) (int, error) {
	fd, err := openRoot(op)
	if err != nil {
		return -1, err
	}
	for _, c := range comps {
		nfd, err := f.openat(fd, c, unix.O_PATH, 0)
		if errors.Is(err, unix.ENOENT) && create != nil {
			if merr := f.mkdirFor(fd, c, create); merr != nil && !errors.Is(merr, unix.EEXIST) {
				unix.Close(fd)
				return -1, errnoErr(op, merr)
			}
			nfd, err = f.openat(fd, c, unix.O_PATH, 0)
		}
		unix.Close(fd)
		if err != nil {
			return -1, errnoErr(op, err)
		}
		fd = nfd
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			unix.Close(fd)
			return -1, errnoErr(op, err)
		}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFDIR:
		case unix.S_IFLNK:
			unix.Close(fd)
			return -1, perr(op, "symlink", ErrSymlink)
		default:
			unix.Close(fd)
			return -1, perr(op, "not_dir", ErrNotDir)
		}
		if err := checkFS(op, fd); err != nil {
			unix.Close(fd)
			return -1, err
		}
	}
	return fd, nil
}

// creator says how [FS.mkdirFor] creates a directory for the user u: as
// the user, and, when sudo is set (an [Options.Envd] FS), as rayd where the
// user may not.
type creator struct {
	u    User
	sudo sudo
}

// asUser creates directories as the user only.
var asUser = &creator{}

// creatorFor is the creator of the FS's write operations for u, run
// inside runAsSudo with its sudo.
func (f *FS) creatorFor(u User, s sudo) *creator {
	if !f.envd {
		return asUser
	}
	return &creator{u: u, sudo: s}
}

// mkdirFor creates the directory name (mode 0755) in dirfd, a directory
// the walk reached as the user, with the current (the user's) identity.
//
// E2B's envd creates every missing parent of a file it writes, and every
// directory of a MakeDir, as root and gives it to the user, so programs
// written for E2B write `/data/x` as `user`. An [Options.Envd] FS does the
// same, within safefs' rules: only when the user's own mkdir is refused
// for permission (EACCES), only in a directory the user can search (it
// was reached by the user's own walk, and a lookup in it as the user must
// work: no new directory in a directory the user cannot even enter), only
// on a path that passed the deny and read-only lists (resolveWrite), never
// through a symbolic link (the walk refuses them). The directory is made
// as rayd with mkdirat on the parent's descriptor, opened again without
// following, checked to be the directory rayd just made (a directory
// owned by root: rayd is root when privileged) and chowned to the user
// through that descriptor; a directory someone else made meanwhile is used
// as it is. Like envd, it also chowns a directory the user made to the
// user (a no-op that watchers see as a chmod).
func (f *FS) mkdirFor(dirfd int, name string, c *creator) error {
	err := unix.Mkdirat(dirfd, name, 0o755)
	if c.sudo == nil {
		return err
	}
	if err == nil {
		// envd chowns every directory it makes to the user, which
		// watchers see as a chmod; the user owns this one already.
		_ = unix.Fchownat(dirfd, name, int(c.u.UID), int(c.u.GID), unix.AT_SYMLINK_NOFOLLOW)
		return nil
	}
	if !errors.Is(err, unix.EACCES) {
		return err
	}
	// Search permission on dirfd, as the user (a lookup of "." needs it).
	sfd, serr := f.openat(dirfd, ".", unix.O_PATH|unix.O_DIRECTORY, 0)
	if serr != nil {
		return err
	}
	unix.Close(sfd)
	return c.sudo(func() error {
		if err := unix.Mkdirat(dirfd, name, 0o755); err != nil {
			return err
		}
		nfd, err := f.openat(dirfd, name, unix.O_PATH|unix.O_DIRECTORY, 0)
		if err != nil {
			return err
		}
		defer unix.Close(nfd)
		var st unix.Stat_t
		if err := unix.Fstat(nfd, &st); err != nil {
			return err
		}
		if st.Mode&unix.S_IFMT != unix.S_IFDIR || st.Uid != 0 {
			return unix.EEXIST // not ours: the walk goes on as the user
		}
		return unix.Fchownat(nfd, "", int(c.u.UID), int(c.u.GID), unix.AT_EMPTY_PATH|unix.AT_SYMLINK_NOFOLLOW)
	})
}

// entryFromStat fills the fields of an Entry that come from a stat buffer,
// with Perm rendered as the FS renders it (ls(1)'s, or Go's for
// [Options.Envd]).
func (f *FS) entryFromStat(name, p string, st *unix.Stat_t) Entry {
	e := statEntry(name, p, st)
	if f.envd {
		e.Perm = e.Mode.String()
	}
	return e
}

// statEntry fills the fields of an Entry that come from a stat buffer.
func statEntry(name, p string, st *unix.Stat_t) Entry {
	e := Entry{
		Name:    name,
		Path:    p,
		Size:    st.Size,
		UID:     st.Uid,
		GID:     st.Gid,
		ModTime: time.Unix(int64(st.Mtim.Sec), int64(st.Mtim.Nsec)),
		Perm:    permString(st.Mode),
		Mode:    goMode(st.Mode),
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
		e.Type = TypeFile
	case unix.S_IFDIR:
		e.Type = TypeDir
	case unix.S_IFLNK:
		e.Type = TypeSymlink
	default:
		e.Type = TypeOther
	}
	return e
}

// entryAt describes name in dirfd without following it. The returned
// O_PATH descriptor is the object described (the caller closes it). With
// withMeta, regular files and directories the user can open for reading
// also get their metadata.
func (f *FS) entryAt(op string, dirfd int, name, p string, withMeta bool) (Entry, int, error) {
	fd, err := f.openat(dirfd, name, unix.O_PATH, 0)
	if err != nil {
		return Entry{}, -1, errnoErr(op, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return Entry{}, -1, errnoErr(op, err)
	}
	if err := checkFS(op, fd); err != nil {
		unix.Close(fd)
		return Entry{}, -1, err
	}
	e := f.entryFromStat(name, p, &st)
	switch e.Type {
	case TypeSymlink:
		buf := make([]byte, unix.PathMax)
		n, err := unix.Readlinkat(fd, "", buf)
		if err != nil {
			unix.Close(fd)
			return Entry{}, -1, errnoErr(op, err)
		}
		e.SymlinkTarget = string(buf[:n])
	case TypeFile, TypeDir:
		if withMeta {
			if mfd, err := f.openat(dirfd, name, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY, 0); err == nil {
				var mst unix.Stat_t
				if unix.Fstat(mfd, &mst) == nil && mst.Dev == st.Dev && mst.Ino == st.Ino {
					e.Metadata = f.readMetadata(mfd)
				}
				unix.Close(mfd)
			}
		}
	}
	return e, fd, nil
}

// describeLink describes the symbolic link e, whose real canonical path is
// real, by where it leads, as E2B's envd does ([Options.Envd]): the final
// target's Type, Mode and metadata, and SymlinkTarget its real canonical
// path, every link on the way followed by the read-side walk (as the user,
// never into a denied prefix or file system). A link that leads nowhere
// the user may reach (no target, a loop, a denied or unsearchable place)
// gets TypeOther, mode 0, no metadata and its own path as SymlinkTarget,
// as envd gives a link it cannot resolve. Name, Path, Size, owner, ModTime
// and Perm stay the link's own. It runs with the user's identity.
func (f *FS) describeLink(op string, e *Entry, real string) {
	e.Metadata = nil
	w, rp, atCand, err := f.follow(op, splitPath(real), unix.O_PATH)
	if err != nil {
		e.Type, e.Mode, e.SymlinkTarget = TypeOther, 0, e.Path
		return
	}
	defer w.close()
	st, name := &w.curSt, "."
	if atCand {
		st, name = &w.candSt, path.Base(rp)
	}
	t := statEntry("", "", st)
	e.Type, e.Mode, e.SymlinkTarget = t.Type, t.Mode, rp
	if t.Type != TypeFile && t.Type != TypeDir {
		return
	}
	if mfd, err := f.openat(w.cur, name, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY, 0); err == nil {
		var mst unix.Stat_t
		if unix.Fstat(mfd, &mst) == nil && mst.Dev == st.Dev && mst.Ino == st.Ino {
			e.Metadata = f.readMetadata(mfd)
		}
		unix.Close(mfd)
	}
}

// readMetadata returns the metadata attributes of fd, prefix stripped:
// both namespaces ([MetadataPrefix], [EnvdMetadataPrefix]), the FS's own
// winning when a key is in both. Unreadable or oversized attributes are
// skipped; at most [MaxMetadataKeys] keys.
func (f *FS) readMetadata(fd int) map[string]string {
	size, err := unix.Flistxattr(fd, nil)
	if err != nil || size <= 0 {
		return nil
	}
	buf := make([]byte, min(size, 64<<10))
	n, err := unix.Flistxattr(fd, buf)
	if err != nil {
		return nil
	}
	var md map[string]string
	own := map[string]bool{}
	val := make([]byte, MaxMetadataBytes)
	for _, attr := range splitNul(buf[:n]) {
		key, ok := strings.CutPrefix(attr, f.mdPrefix)
		mine := ok
		if !ok {
			other := MetadataPrefix
			if f.mdPrefix == MetadataPrefix {
				other = EnvdMetadataPrefix
			}
			key, ok = strings.CutPrefix(attr, other)
		}
		if !ok || key == "" || !mine && own[key] {
			continue
		}
		if _, seen := md[key]; !seen && len(md) >= MaxMetadataKeys {
			continue
		}
		vn, err := unix.Fgetxattr(fd, attr, val)
		if err != nil {
			continue
		}
		if md == nil {
			md = make(map[string]string)
		}
		md[key] = string(val[:vn])
		own[key] = own[key] || mine
	}
	return md
}

func splitNul(b []byte) []string {
	var out []string
	start := 0
	for i, c := range b {
		if c == 0 {
			if i > start {
				out = append(out, string(b[start:i]))
			}
			start = i + 1
		}
	}
	return out
}

// setMetadata sets md as attributes of fd in the FS's own namespace
// (user.rayito.*, or user.e2b.* for [Options.Envd]); fd is a fresh file,
// so there is no previous set to remove.
func (f *FS) setMetadata(op string, fd int, md map[string]string) error {
	for k, v := range md {
		if err := unix.Fsetxattr(fd, f.mdPrefix+k, []byte(v), 0); err != nil {
			switch {
			case errors.Is(err, unix.EOPNOTSUPP):
				return perr(op, "metadata_unsupported", ErrMetadataUnsupported)
			case errors.Is(err, unix.E2BIG) || errors.Is(err, unix.ERANGE) || errors.Is(err, unix.ENOSPC):
				return perr(op, "metadata_too_large", ErrMetadataTooLarge)
			}
			return errnoErr(op, err)
		}
	}
	return nil
}

// fillNames sets Owner and Group from the account databases (read by rayd
// itself, outside any identity switch), falling back to decimal IDs.
func (f *FS) fillNames(e *Entry) {
	e.Owner = f.lookupName('u', e.UID)
	e.Group = f.lookupName('g', e.GID)
}

func (f *FS) lookupName(kind byte, id uint32) string {
	key := string(kind) + strconv.FormatUint(uint64(id), 10)
	if v, ok := f.names.Load(key); ok {
		return v.(string)
	}
	name := strconv.FormatUint(uint64(id), 10)
	if kind == 'u' {
		if u, err := user.LookupId(name); err == nil {
			name = u.Username
		}
	} else if g, err := user.LookupGroupId(name); err == nil {
		name = g.Name
	}
	f.names.Store(key, name)
	return name
}

// split returns the parent components and the last component of a
// canonical path other than "/".
func split(c string) ([]string, string) {
	comps := splitPath(c)
	return comps[:len(comps)-1], comps[len(comps)-1]
}

// isGone reports the errors of an entry that is no longer what was made.
func isGone(err error) bool {
	return errIs(err, unix.ENOENT) || errIs(err, ErrSymlink) || errIs(err, ErrNotDir)
}

func randomHex() string {
	var rnd [8]byte
	rand.Read(rnd[:])
	return hex.EncodeToString(rnd[:])
}

func errIs(err, target error) bool { return errors.Is(err, target) }

package safefs

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"os/user"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// Defaults for [Options].
const (
	DefaultDiskReserve    = 256 << 20
	DefaultMaxListEntries = 10000
	// MaxRemoveDepth bounds the nesting a recursive [FS.Remove] descends.
	MaxRemoveDepth = 512
)

// Options configure an [FS].
type Options struct {
	// Deny is the list of denied path prefixes (absolute, no ".."); nil
	// means [DefaultDeny]. RaydDirs are always added.
	Deny []string
	// RaydDirs are rayd's own directories (e.g. /run/rayd), always denied.
	RaydDirs []string
	// ReadOnly is the list of path prefixes (absolute, no "..") that may
	// be read but not written; nil means [DefaultReadOnly].
	ReadOnly []string
	// DiskReserve is the free space, in bytes, that writes must leave on
	// the target file system; 0 means [DefaultDiskReserve], negative
	// disables the check.
	DiskReserve int64
	// Privileged makes every operation run with the user's fsuid, fsgid
	// and supplementary groups. It needs CAP_SETUID and CAP_SETGID (rayd
	// runs as root). When false, operations run with rayd's own identity
	// and User only supplies the home directory.
	Privileged bool
	// MaxListEntries caps [FS.ListDir]; 0 means [DefaultMaxListEntries].
	MaxListEntries int
	// Envd makes the FS behave as E2B's envd where its protocol shows
	// it: the FS of rayd's E2B envd surface. Metadata is written as
	// [EnvdMetadataPrefix] attributes (both namespaces are read either
	// way); [Entry.Perm] is Go's fs.FileMode rendering, as envd's
	// ("urwxr-xr-x" for a setuid file, "Lrwxrwxrwx" for a link); [FS.Stat],
	// [FS.ListDir] and [FS.Move] describe a symbolic link by where it
	// leads (see [Entry]); and a write, a new directory or a move's
	// destination gets its missing parents even where the user may not
	// create them (see [FS.WriteFile]).
	Envd bool
}

// FS performs file operations on behalf of sandbox users. It is safe for
// concurrent use.
type FS struct {
	deny       []string
	readOnly   []string
	reserve    int64
	privileged bool
	maxList    int
	envd       bool
	mdPrefix   string      // the metadata namespace written
	noOpenat2  atomic.Bool // set once openat2 reports ENOSYS
	names      sync.Map    // "u123"/"g123" -> name
}

// New returns an FS configured by opts.
func New(opts Options) (*FS, error) {
	deny := opts.Deny
	if deny == nil {
		deny = DefaultDeny
	}
	deny, ok := normalizeDeny(append(slices.Clone(deny), opts.RaydDirs...))
	if !ok {
		return nil, errors.New("safefs: deny entries must be absolute paths without '..'")
	}
	readOnly := opts.ReadOnly
	if readOnly == nil {
		readOnly = DefaultReadOnly
	}
	readOnly, ok = normalizeDeny(readOnly)
	if !ok {
		return nil, errors.New("safefs: read-only entries must be absolute paths without '..'")
	}
	f := &FS{deny: deny, readOnly: readOnly, reserve: opts.DiskReserve, privileged: opts.Privileged, maxList: opts.MaxListEntries, envd: opts.Envd, mdPrefix: MetadataPrefix}
	if f.envd {
		f.mdPrefix = EnvdMetadataPrefix
	}
	if f.reserve == 0 {
		f.reserve = DefaultDiskReserve
	}
	if f.maxList <= 0 {
		f.maxList = DefaultMaxListEntries
	}
	return f, nil
}

// Envd reports whether the FS was made with [Options.Envd].
func (f *FS) Envd() bool { return f.envd }

// Resolve validates p for u and returns its canonical absolute path. A
// relative p is taken relative to u.Home. It refuses empty paths, paths over
// [MaxPathLen] bytes and paths containing NUL ([ErrInvalidPath]), and paths
// with a ".." component or equal to or under a denied prefix ([ErrDenied],
// reasons "dotdot" and "denied"). Resolve does not touch the file system
// and resolves no symbolic link: the read-side operations follow links
// afterwards, one component at a time, checking the deny list again on
// every real path (see [followPath]); the write-side operations refuse
// them.
func (f *FS) Resolve(u User, p string) (string, error) {
	return resolvePath(f.deny, u.Home, p)
}

// resolveWrite is Resolve for an operation that changes p: a path equal to
// or under a read-only prefix is refused too ([ErrDenied], reason
// "denied", as for the deny list).
func (f *FS) resolveWrite(u User, p string) (string, error) {
	c, err := f.Resolve(u, p)
	if err == nil && isDenied(f.readOnly, c) {
		return "", perr("resolve", "denied", ErrDenied)
	}
	return c, err
}

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
		if err != unix.EINTR {
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
	switch err {
	case unix.ELOOP:
		return perr(op, "symlink", ErrSymlink)
	case unix.ENOENT:
		return perr(op, "not_found", err)
	case unix.EACCES, unix.EPERM:
		return perr(op, "permission", err)
	case unix.ENOTDIR:
		return perr(op, "not_dir", ErrNotDir)
	case unix.EISDIR:
		return perr(op, "is_dir", ErrIsDir)
	case unix.EEXIST:
		return perr(op, "exists", ErrExist)
	case unix.ENOTEMPTY:
		return perr(op, "not_empty", ErrNotEmpty)
	case unix.ENOSPC, unix.EDQUOT:
		return perr(op, "disk_full", ErrDiskFull)
	case unix.ENAMETOOLONG:
		return perr(op, "too_long", ErrInvalidPath)
	case unix.EXDEV:
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
			switch err {
			case unix.EINTR, unix.EAGAIN:
				continue
			case unix.ENOSYS:
				f.noOpenat2.Store(true)
			default:
				return fd, err
			}
			break
		}
	}
	for {
		fd, err := unix.Openat(dirfd, name, flags, mode)
		if err != unix.EINTR {
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
		if err == unix.ENOENT && create != nil {
			if merr := f.mkdirFor(fd, c, create); merr != nil && merr != unix.EEXIST {
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
	if err != unix.EACCES {
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
			switch err {
			case unix.EOPNOTSUPP:
				return perr(op, "metadata_unsupported", ErrMetadataUnsupported)
			case unix.E2BIG, unix.ERANGE, unix.ENOSPC:
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

// Stat describes the object at p with lstat(2) semantics: the last
// component is not followed, so a symbolic link is reported as a link
// (TypeSymlink, with its target in SymlinkTarget), as [FS.ListDir] reports
// it. Symbolic links in the directories above it are followed as for
// [FS.ReadFile]; the real path of the object must not be denied.
func (f *FS) Stat(ctx context.Context, u User, p string) (Entry, error) {
	return f.stat(ctx, u, p, false)
}

// StatFollow is [FS.Stat] with stat(2) semantics: a symbolic link as the
// last component is followed too (as [FS.ReadFile] follows it) and the
// entry describes its target, under the requested name and path.
func (f *FS) StatFollow(ctx context.Context, u User, p string) (Entry, error) {
	return f.stat(ctx, u, p, true)
}

func (f *FS) stat(ctx context.Context, u User, p string, followLast bool) (Entry, error) {
	const op = "stat"
	c, err := f.Resolve(u, p)
	if err != nil {
		return Entry{}, err
	}
	if err := ctx.Err(); err != nil {
		return Entry{}, perr(op, "canceled", err)
	}
	var e Entry
	err = f.runAs(u, func() error {
		if c == "/" {
			fd, err := openRoot(op)
			if err != nil {
				return err
			}
			defer unix.Close(fd)
			var st unix.Stat_t
			if err := unix.Fstat(fd, &st); err != nil {
				return errnoErr(op, err)
			}
			e = f.entryFromStat("/", "/", &st)
			return nil
		}
		parent, name := split(c)
		if followLast {
			w, rp, atCand, err := f.follow(op, splitPath(c), unix.O_PATH)
			if err != nil {
				return err
			}
			defer w.close()
			if atCand {
				// Described again by its name in its real directory (which
				// also reads its metadata through a descriptor of it).
				var fd int
				e, fd, err = f.entryAt(op, w.cur, path.Base(rp), c, true)
				closeFD(fd)
				e.Name = name
				return err
			}
			e = f.entryFromStat(name, c, &w.curSt)
			if mfd, err := f.openat(w.cur, ".", unix.O_RDONLY|unix.O_DIRECTORY, 0); err == nil {
				e.Metadata = f.readMetadata(mfd)
				unix.Close(mfd)
			}
			return nil
		}
		w, dfd, rp, err := f.followDir(op, parent)
		if err != nil {
			return err
		}
		defer w.close()
		if isDenied(f.deny, path.Join(rp, name)) {
			return perr(op, "denied", ErrDenied)
		}
		var fd int
		e, fd, err = f.entryAt(op, dfd, name, c, true)
		closeFD(fd)
		if err == nil && f.envd && e.Type == TypeSymlink {
			f.describeLink(op, &e, path.Join(rp, name))
		}
		return err
	})
	if err != nil {
		return Entry{}, err
	}
	f.fillNames(&e)
	return e, nil
}

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

// tempPrefix starts the names of WriteFile's temporary files; the next
// letter says what the file will do, for watchers: TempCreates (a new
// file) or TempReplaces (replacing one).
const (
	tempPrefix   = ".rayito-tmp-"
	TempCreates  = tempPrefix + "c"
	TempReplaces = tempPrefix + "r"
)

// WriteFile atomically replaces (or creates) the file at p with the
// contents of r. Missing parent directories are created (mode 0755, owned
// by the user; by an [Options.Envd] FS also where only rayd may create
// them, see [FS.mkdirFor]). The data goes to a randomly named temporary file in the
// target directory, given mode (0 keeps the mode of the file being
// replaced, or 0644 for a new file) and the metadata (which replaces the
// file's previous set), then renamed over p. Nothing is fsynced (see the
// package documentation).
//
// Before and during the copy, the free space of the target file system is
// checked; a write that would leave less than the disk reserve fails with
// [ErrDiskReserve]. On any error, including cancellation of ctx between
// reads from r, the temporary file is removed and the previous file is left
// untouched. r itself runs with rayd's identity, never the user's; a Read
// that blocks is not interrupted by ctx.
func (f *FS) WriteFile(ctx context.Context, u User, p string, r io.Reader, mode os.FileMode, metadata map[string]string) (Entry, error) {
	return f.writeFile(ctx, u, p, r, writeOptions{perm: mode.Perm(), keepMode: mode.Perm() == 0, metadata: metadata})
}

// writeOptions shape [FS.writeFile]: the permission bits (perm; with
// keepMode those of the file replaced, else 0644), the metadata, and the
// modification time to give the file (zero: now).
type writeOptions struct {
	perm     os.FileMode
	keepMode bool
	metadata map[string]string
	mtime    time.Time
}

func (f *FS) writeFile(ctx context.Context, u User, p string, r io.Reader, o writeOptions) (Entry, error) {
	const op = "write"
	metadata := o.metadata
	if err := ValidateMetadata(metadata); err != nil {
		return Entry{}, err
	}
	c, err := f.resolveWrite(u, p)
	if err != nil {
		return Entry{}, err
	}
	if c == "/" {
		return Entry{}, perr(op, "is_dir", ErrIsDir)
	}
	if err := ctx.Err(); err != nil {
		return Entry{}, perr(op, "canceled", err)
	}
	parent, name := split(c)
	perm := uint32(o.perm.Perm())
	keepMode := o.keepMode
	if keepMode {
		perm = 0o644
	}
	dfd, tfd, tmpName := -1, -1, ""
	replacing := false // a file is at p: exchange rather than rename
	cleanup := func() {
		if tmpName != "" {
			_ = f.runAs(u, func() error { return unix.Unlinkat(dfd, tmpName, 0) })
		}
		closeFD(tfd)
		closeFD(dfd)
	}
	// Phase 1, as the user: walk (creating parents) and create the temp file.
	err = f.runAsSudo(u, func(s sudo) error {
		var err error
		dfd, err = f.walkDir(op, parent, f.creatorFor(u, s))
		if err != nil {
			return err
		}
		var st unix.Stat_t
		switch err := unix.Fstatat(dfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); {
		case err == nil:
			if st.Mode&unix.S_IFMT == unix.S_IFDIR {
				return perr(op, "is_dir", ErrIsDir)
			}
			if keepMode && st.Mode&unix.S_IFMT == unix.S_IFREG {
				perm = st.Mode & 0o777
			}
			replacing = true
		case err != unix.ENOENT:
			return errnoErr(op, err)
		}
		if err := f.checkReserve(op, dfd, 0); err != nil {
			return err
		}
		var rnd [8]byte
		rand.Read(rnd[:])
		tmp := TempCreates + hex.EncodeToString(rnd[:])
		if replacing {
			tmp = TempReplaces + hex.EncodeToString(rnd[:])
		}
		fd, err := f.openat(dfd, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL, 0o600)
		if err != nil {
			return errnoErr(op, err)
		}
		tfd, tmpName = fd, tmp
		return nil
	})
	if err != nil {
		cleanup()
		return Entry{}, err
	}
	// Phase 2, as rayd: copy. Writing to an open descriptor needs no
	// identity, and the caller's reader must not run as the user.
	if err := f.copyIn(ctx, op, tfd, r); err != nil {
		cleanup()
		return Entry{}, err
	}
	// Phase 3, as the user: mode, metadata, rename into place.
	var e Entry
	err = f.runAs(u, func() error {
		if err := unix.Fchmod(tfd, perm); err != nil {
			return errnoErr(op, err)
		}
		if err := f.setMetadata(op, tfd, metadata); err != nil {
			return err
		}
		if !o.mtime.IsZero() {
			ts := unix.NsecToTimespec(o.mtime.UnixNano())
			if err := unix.UtimesNanoAt(dfd, tmpName, []unix.Timespec{ts, ts}, unix.AT_SYMLINK_NOFOLLOW); err != nil {
				return errnoErr(op, err)
			}
		}
		if err := ctx.Err(); err != nil {
			return perr(op, "canceled", err)
		}
		var st unix.Stat_t
		if err := unix.Fstat(tfd, &st); err != nil {
			return errnoErr(op, err)
		}
		if err := replace(dfd, tmpName, name, replacing); err != nil {
			return err
		}
		tmpName = ""
		e = f.entryFromStat(name, c, &st)
		if len(metadata) > 0 {
			e.Metadata = f.readMetadata(tfd)
		}
		return nil
	})
	cleanup()
	if err != nil {
		return Entry{}, err
	}
	f.fillNames(&e)
	return e, nil
}

// replace puts the temporary file tmp in place of name, in dfd, atomically.
//
// When a file is there (replacing), the two are exchanged
// (RENAME_EXCHANGE) and the old one, now under the temporary name, is
// unlinked: renaming over an existing file makes ext4 write the new file's
// data out at once (auto_da_alloc), which took 2.8 ms of a 1 MiB write
// here against 0.2 ms for the exchange. Readers see the old file or the
// new one, never neither. If a directory took the file's place meanwhile,
// the exchange is undone and the write fails with ErrIsDir. Where the
// exchange is not supported it falls back to a plain rename.
func replace(dfd int, tmp, name string, replacing bool) error {
	const op = "write"
	if replacing {
		err := unix.Renameat2(dfd, tmp, dfd, name, unix.RENAME_EXCHANGE)
		if err == nil {
			switch uerr := unix.Unlinkat(dfd, tmp, 0); uerr {
			case nil, unix.ENOENT:
				return nil
			case unix.EISDIR, unix.EPERM:
				// A directory was swapped in: put it back.
				if unix.Renameat2(dfd, tmp, dfd, name, unix.RENAME_EXCHANGE) == nil {
					return perr(op, "is_dir", ErrIsDir)
				}
				return errnoErr(op, uerr)
			default:
				// The new file is in place; the old one stays under the
				// temporary name (a dot file, which watches ignore).
				return nil
			}
		}
		if err != unix.EINVAL && err != unix.ENOSYS && err != unix.EOPNOTSUPP && err != unix.ENOENT {
			return errnoErr(op, err)
		}
	}
	if err := unix.Renameat(dfd, tmp, dfd, name); err != nil {
		return errnoErr(op, err)
	}
	return nil
}

// checkReserve fails with ErrDiskReserve when writing n more bytes to the
// file system of fd would leave less than the reserve available to
// unprivileged users: Options.DiskReserve, or half the file system's size
// when that is less.
func (f *FS) checkReserve(op string, fd int, n int) error {
	if f.reserve < 0 {
		return nil
	}
	var st unix.Statfs_t
	if err := fstatfs(fd, &st); err != nil {
		return errnoErr(op, err)
	}
	avail := int64(st.Bavail) * int64(st.Bsize)
	// At most half of the file system: a fixed reserve larger than a
	// small file system (a sandbox's 64 MiB root tmpfs) would refuse
	// every write to it.
	reserve := min(f.reserve, int64(st.Blocks)*int64(st.Bsize)/2)
	if avail-int64(n) < reserve {
		return perr(op, "disk_reserve", ErrDiskReserve)
	}
	return nil
}

// copyIn copies r into fd, checking ctx and the disk reserve before every
// chunk.
func (f *FS) copyIn(ctx context.Context, op string, fd int, r io.Reader) error {
	buf := make([]byte, 256<<10)
	for {
		if err := ctx.Err(); err != nil {
			return perr(op, "canceled", err)
		}
		n, rerr := r.Read(buf)
		if n > 0 {
			if err := ctx.Err(); err != nil {
				return perr(op, "canceled", err)
			}
			if err := f.checkReserve(op, fd, n); err != nil {
				return err
			}
			for b := buf[:n]; len(b) > 0; {
				w, err := unix.Write(fd, b)
				if err == unix.EINTR {
					continue
				}
				if err != nil {
					return errnoErr(op, err)
				}
				b = b[w:]
			}
		}
		if rerr == io.EOF {
			return nil
		}
		if rerr != nil {
			return perr(op, "source", rerr)
		}
	}
}

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

// MakeDir creates the directory p and any missing parents (mode 0755, owned
// by the user). It fails with [ErrExist] when p already is a directory and
// with [ErrNotDir] when a non-directory is in the way (at p or above).
func (f *FS) MakeDir(ctx context.Context, u User, p string) (Entry, error) {
	const op = "mkdir"
	c, err := f.resolveWrite(u, p)
	if err != nil {
		return Entry{}, err
	}
	if c == "/" {
		return Entry{}, perr(op, "exists", ErrExist)
	}
	if err := ctx.Err(); err != nil {
		return Entry{}, perr(op, "canceled", err)
	}
	var e Entry
	err = f.runAsSudo(u, func(s sudo) error {
		parent, name := split(c)
		cr := f.creatorFor(u, s)
		dfd, err := f.walkDir(op, parent, cr)
		if err != nil {
			return err
		}
		defer unix.Close(dfd)
		if err := f.mkdirFor(dfd, name, cr); err != nil {
			if err != unix.EEXIST {
				return errnoErr(op, err)
			}
			var st unix.Stat_t
			if err := unix.Fstatat(dfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err == nil && st.Mode&unix.S_IFMT != unix.S_IFDIR {
				return perr(op, "not_dir", ErrNotDir)
			}
			return perr(op, "exists", ErrExist)
		}
		var fd int
		e, fd, err = f.entryAt(op, dfd, name, c, false)
		closeFD(fd)
		return err
	})
	if err != nil {
		return Entry{}, err
	}
	f.fillNames(&e)
	return e, nil
}

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

// Remove deletes p. A directory needs recursive unless it is empty
// ([ErrNotEmpty]). Recursion goes through directory descriptors opened
// with O_NOFOLLOW and unlinkat, so symbolic links are removed, never
// followed, and denied file systems are never entered.
func (f *FS) Remove(ctx context.Context, u User, p string, recursive bool) error {
	const op = "remove"
	c, err := f.resolveWrite(u, p)
	if err != nil {
		return err
	}
	if c == "/" {
		return perr(op, "denied", ErrDenied)
	}
	if err := ctx.Err(); err != nil {
		return perr(op, "canceled", err)
	}
	return f.runAsSudo(u, func(s sudo) error {
		parent, name := split(c)
		dfd, err := f.walkDir(op, parent, nil)
		if err != nil {
			return err
		}
		defer unix.Close(dfd)
		err = f.removeAt(ctx, op, dfd, name, recursive, 0)
		if f.envd && errors.Is(err, os.ErrPermission) && !errors.Is(err, ErrDenied) {
			return f.unlinkFor(op, dfd, name, u, s, err)
		}
		return err
	})
}

// unlinkFor removes name from dirfd for u where only rayd may, for an
// [Options.Envd] FS: the mirror of [FS.mkdirFor], so that what rayd made
// for the user in a directory the user cannot write (/0 of /0/x), the
// user can remove again, as on envd. Only an entry that belongs to the user
// (what is under it is already gone, removed as the user), in a directory
// the user's walk reached and may search, whose own removal was refused
// for permission (refused is that error); the directory is not writable
// by the user, so the entry cannot be swapped between the check and the
// unlink.
func (f *FS) unlinkFor(op string, dirfd int, name string, u User, s sudo, refused error) error {
	var st unix.Stat_t
	if err := unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil || st.Uid != u.UID {
		return refused
	}
	sfd, err := f.openat(dirfd, ".", unix.O_PATH|unix.O_DIRECTORY, 0)
	if err != nil {
		return refused
	}
	unix.Close(sfd)
	flags := 0
	if st.Mode&unix.S_IFMT == unix.S_IFDIR {
		flags = unix.AT_REMOVEDIR
	}
	return errnoErr(op, s(func() error {
		var now unix.Stat_t
		if err := unix.Fstatat(dirfd, name, &now, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return err
		}
		if now.Ino != st.Ino || now.Dev != st.Dev || now.Uid != u.UID {
			return unix.EACCES
		}
		return unix.Unlinkat(dirfd, name, flags)
	}))
}

func (f *FS) removeAt(ctx context.Context, op string, dirfd int, name string, recursive bool, level int) error {
	if err := ctx.Err(); err != nil {
		return perr(op, "canceled", err)
	}
	if level > MaxRemoveDepth {
		return perr(op, "too_deep", ErrTooDeep)
	}
	fd, err := f.openat(dirfd, name, unix.O_PATH, 0)
	if err != nil {
		return errnoErr(op, err)
	}
	var st unix.Stat_t
	err = unix.Fstat(fd, &st)
	if err == nil {
		err = checkFS(op, fd)
	}
	unix.Close(fd)
	if err != nil {
		return errnoErr(op, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return errnoErr(op, unix.Unlinkat(dirfd, name, 0))
	}
	if recursive {
		sub, err := f.openat(dirfd, name, unix.O_RDONLY|unix.O_DIRECTORY, 0)
		if err != nil {
			return errnoErr(op, err)
		}
		if err := checkFS(op, sub); err != nil {
			unix.Close(sub)
			return err
		}
		d := os.NewFile(uintptr(sub), "safefs")
		defer d.Close()
		names, err := d.Readdirnames(-1)
		if err != nil {
			return errnoErr(op, err)
		}
		for _, n := range names {
			if err := f.removeAt(ctx, op, sub, n, true, level+1); err != nil && !errors.Is(err, os.ErrNotExist) {
				return err
			}
		}
	}
	if err := unix.Unlinkat(dirfd, name, unix.AT_REMOVEDIR); err != nil {
		return errnoErr(op, err)
	}
	return nil
}

// AddWatch adds an inotify watch (on instance inotifyFD, with mask) on the
// directory at p, for u. The directory is reached by the safe walk, as the
// user, and watched through its own descriptor (/proc/self/fd/N), so a
// component swapped for a symbolic link is refused, not followed, and the
// kernel's permission check is the user's. IN_DONT_FOLLOW is dropped from
// mask: the descriptor's magic link must be followed to its directory.
func (f *FS) AddWatch(u User, inotifyFD int, p string, mask uint32) (int, error) {
	const op = "watch"
	c, err := f.Resolve(u, p)
	if err != nil {
		return -1, err
	}
	wd := -1
	err = f.runAs(u, func() error {
		var fd int
		var err error
		if c == "/" {
			fd, err = openRoot(op)
		} else {
			parent, name := split(c)
			var dfd int
			if dfd, err = f.walkDir(op, parent, nil); err != nil {
				return err
			}
			fd, err = f.openat(dfd, name, unix.O_PATH, 0)
			unix.Close(dfd)
			if err != nil {
				return errnoErr(op, err)
			}
		}
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			return errnoErr(op, err)
		}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFDIR:
		case unix.S_IFLNK:
			return perr(op, "symlink", ErrSymlink)
		default:
			return perr(op, "not_dir", ErrNotDir)
		}
		if err := checkFS(op, fd); err != nil {
			return err
		}
		for {
			wd, err = unix.InotifyAddWatch(inotifyFD, "/proc/self/fd/"+strconv.Itoa(fd), mask&^unix.IN_DONT_FOLLOW)
			if err != unix.EINTR {
				break
			}
		}
		if err != nil {
			return errnoErr(op, err)
		}
		return nil
	})
	return wd, err
}

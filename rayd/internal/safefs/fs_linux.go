package safefs

import (
	"errors"
	"slices"
	"sync"
	"sync/atomic"
)

// This file holds the FS itself (options, construction, path resolution);
// each operation has a file of its own (stat, read, write, list, mkdir,
// move, remove, watch, tree, extract, spool) and helpers_linux.go holds
// what they share: the descriptor walk, entries and metadata.

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

// Package safefs is the file layer behind rayd's FilesystemService: every
// file operation that rayd (running as root) performs on behalf of the
// unprivileged sandbox user goes through an [FS], so that rayd can never be
// used as a confused deputy.
//
// # Defences
//
// Path policy. [FS.Resolve] validates a request path before anything touches
// the filesystem: empty paths, paths longer than [MaxPathLen] bytes, paths
// containing NUL and paths with a ".." component are refused; a relative path
// is taken relative to the user's home directory; the result is cleaned and
// must not be, or lie under, a denied prefix (by default /proc, /sys, /dev
// and rayd's own directories, see [Options]). Operations that change the
// file system (write, make dir, move, remove) also refuse a read-only
// prefix (by default /etc and /usr), which may be read.
//
// Descriptor walk. The canonical path is then opened one component at a time
// from "/", each component relative to the descriptor of its parent, with
// openat2(2) and RESOLVE_NO_SYMLINKS|RESOLVE_NO_MAGICLINKS|RESOLVE_BENEATH
// plus O_NOFOLLOW (or, on kernels without openat2, openat(2) with
// O_NOFOLLOW, which is equally safe for a single component): the kernel
// never resolves more than one component, and never a link. Every later
// action (open, mkdirat, renameat2, unlinkat, fstat, xattrs) goes through
// those descriptors.
//
// Writes refuse links. The operations that change the file system
// ([FS.WriteFile], [FS.MakeDir], [FS.Move], [FS.Remove]) and [FS.AddWatch]
// (which also refuses a link as the directory to watch) refuse a
// symbolic link anywhere above the last component with
// [ErrSymlink], also when the sandbox swaps a component for a link between
// a check and a use, so a planted link can never make rayd write, rename,
// chmod or delete anywhere but where the user asked. A link as the last
// component is acted on as itself: Remove and Move remove or move the
// link, WriteFile replaces the link by the new file (the link's target is
// untouched).
//
// Reads follow links. [FS.ReadFile], [FS.ListDir] and [FS.StatFollow]
// follow symbolic links as the user's own `cat` or `ls` would (so
// /etc/os-release, a link to ../usr/lib/os-release, reads as a file), and
// [FS.Stat] follows them above the last component (lstat(2) semantics).
// The links are resolved in user space by the same descriptor walk, never
// by the kernel: a link is opened as itself, its target is read from that
// descriptor (so a link swapped meanwhile is either the old or the new
// one, each checked), and its components take its place; an absolute
// target restarts at "/", ".." goes back to the directory the walk came
// through (verified by device and inode). Before each component is opened,
// the canonical real path it stands for is checked against the deny list,
// so nothing under /proc, /sys, /dev or rayd's directories is ever opened,
// however the links lead there; each directory and the final object are
// also checked by file system type as below. Magic links
// (/proc/self/fd/N, /proc/PID/root, ...) cannot be followed: the kernel
// is told RESOLVE_NO_MAGICLINKS and resolves no link at all, the walk
// never opens anything under /proc or on a proc file system, and a link
// target is only ever used as a path string. At most [MaxSymlinks] links
// are followed ([ErrSymlinkLoop]). As with fs.protected_symlinks, a link
// in a sticky world-writable directory is followed only when it belongs
// to the user or to the directory's owner. The walk runs with the user's
// identity, so the kernel checks search permission on every directory and
// read permission on the file exactly as for the user.
//
// File system types. Every directory and file reached is checked with
// fstatfs(2); proc, sysfs, devpts, cgroup, cgroup2, securityfs, debugfs,
// tracefs, bpf and a few other kernel pseudo file systems are refused with
// [ErrDenied] however they are reached (for example through a bind mount).
//
// Identity. With [Options.Privileged], each operation runs on a dedicated,
// locked OS thread whose fsuid, fsgid and supplementary groups are those of
// the [User] (setfsuid(2), setfsgid(2) and the raw, per-thread setgroups(2)
// system call; Go's syscall.Setgroups would change every thread of the
// process). The kernel's own permission checks therefore apply exactly as
// for the user, and files and directories that rayd creates are owned by
// the user. The thread is unlocked only after the original credentials were
// restored and verified; if restoring fails the thread stays locked to its
// goroutine, which then exits, so the Go runtime terminates the tainted
// thread instead of reusing it. Caller-supplied code (the io.Reader given to
// [FS.WriteFile]) never runs with switched credentials.
//
// E2B's envd surface. An FS made with [Options.Envd], the one rayd's E2B
// adapters use, makes one exception: a directory the user's own mkdir may
// not create (EACCES), missing above a file written, a directory made or a
// move's destination, is created by rayd and given to the user, as E2B's
// envd (root) does, so `/data/x` can be written as `user`. It happens only
// in a directory the user's own walk reached and may search, on a path
// that passed the deny and read-only lists, never through a link; nothing
// else runs with rayd's identity ([FS.mkdirFor]).
//
// Writes. [FS.WriteFile] writes to a randomly named temporary file in the
// target directory, sets its metadata and renames it over the target (or,
// when a file is there, exchanges the two and unlinks the old one); on any
// failure (including context cancellation and the disk
// reserve, see [ErrDiskReserve]) the temporary file is removed and the old
// file is untouched. Nothing is fsynced: the rename makes the write atomic
// for every reader and against a crash of rayd, and a sandbox does not
// outlive a crash of its machine (HOME persistence takes its own
// checkpoints), so a flush to the disk would only make writes slower (a
// 1 MiB write took 34 ms with two fsyncs and 21 ms without, here).
//
// # Errors
//
// Every error is a [*PathError] carrying a stable Reason token and wrapping a
// sentinel such as [ErrDenied], [ErrSymlink] or [ErrDiskReserve], or a
// syscall.Errno (so errors.Is(err, fs.ErrNotExist) and
// errors.Is(err, fs.ErrPermission) work). Error messages never contain
// paths, file contents or metadata values, so they may be logged and
// returned to clients.
package safefs

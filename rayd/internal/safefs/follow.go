package safefs

import (
	"errors"
	"path"
	"strings"
	"syscall"
)

// MaxSymlinks is the most symbolic links one read-side resolution follows,
// as Linux's MAXSYMLINKS; one more fails with [ErrSymlinkLoop].
const MaxSymlinks = 40

// nodeKind is what a walker found at a name.
type nodeKind uint8

const (
	nodeDir   nodeKind = iota // a directory (now the walker's candidate)
	nodeLink                  // a symbolic link (not kept; its target is returned)
	nodeOther                 // anything else (now the walker's candidate)
)

// errRetry is returned by walker.open when the entry changed between the
// walker's two looks at it (a link when opened for reading, no link when
// opened again to read it): the name is looked up again, counting as one
// link so that a flapping entry cannot keep the walk busy.
var errRetry = errors.New("safefs: entry changed during lookup")

// walker is the file system side of [followPath]. It has a current
// directory, initially "/", and at most one candidate: the object it
// opened last.
type walker interface {
	// open opens name, an entry of the current directory, without
	// following it (the kernel resolves only that one component), as the
	// last component of the path when last is set. A link's target is
	// returned and the link is not kept; anything else becomes the
	// candidate. It also refuses denied file system types.
	open(name string, last bool) (kind nodeKind, target string, err error)
	// enter makes the candidate, a directory, the current directory.
	enter() error
	// up makes the parent of the current directory (not "/") current. It
	// must end up in the very directory the walk came through.
	up() error
	// root makes "/" the current directory.
	root() error
}

// followPath resolves comps, the components of a canonical path, as the
// kernel's path resolution does with every symbolic link followed
// (including the last component), but one component at a time in user
// space, so that policy applies to every step: before a name is opened,
// the canonical path it stands for is checked against deny, so nothing
// under a denied prefix is ever opened, whether the walk gets there
// directly, through an absolute or relative link, or through "..". A link
// target is read from the opened link itself (never by name), its
// components take the link's place, an absolute target restarts at "/",
// and ".." goes back to the directory the walk came from. At most
// [MaxSymlinks] links are followed.
//
// It returns the canonical real path of the result and whether the
// result is the walker's candidate (true) or its current directory (false:
// the path ends in "/", "." or "..", or is "/").
func followPath(w walker, op string, deny []string, comps []string) (string, bool, error) {
	pending := make([]string, 0, len(comps))
	for i := len(comps) - 1; i >= 0; i-- {
		pending = append(pending, comps[i])
	}
	cur, links, atCand := "/", 0, false
	if isDenied(deny, cur) {
		return "", false, perr(op, "denied", ErrDenied)
	}
	for len(pending) > 0 {
		name := pending[len(pending)-1]
		pending = pending[:len(pending)-1]
		atCand = false
		switch name {
		case "", ".":
			continue
		case "..":
			if cur != "/" {
				if err := w.up(); err != nil {
					return "", false, err
				}
				cur = path.Dir(cur)
			}
			continue
		}
		next := cur + "/" + name
		if cur == "/" {
			next = "/" + name
		}
		if len(next) > MaxPathLen {
			return "", false, perr(op, "too_long", ErrInvalidPath)
		}
		if isDenied(deny, next) {
			return "", false, perr(op, "denied", ErrDenied)
		}
		kind, target, err := w.open(name, len(pending) == 0)
		if errors.Is(err, errRetry) {
			if links++; links > MaxSymlinks {
				return "", false, perr(op, "symlink_loop", ErrSymlinkLoop)
			}
			pending = append(pending, name)
			continue
		}
		if err != nil {
			return "", false, err
		}
		switch kind {
		case nodeLink:
			if links++; links > MaxSymlinks {
				return "", false, perr(op, "symlink_loop", ErrSymlinkLoop)
			}
			if target == "" || strings.IndexByte(target, 0) >= 0 {
				return "", false, perr(op, "not_found", syscall.ENOENT)
			}
			if target[0] == '/' {
				if err := w.root(); err != nil {
					return "", false, err
				}
				cur = "/"
			}
			tc := strings.Split(target, "/")
			for i := len(tc) - 1; i >= 0; i-- {
				pending = append(pending, tc[i])
			}
		case nodeDir:
			if len(pending) == 0 {
				cur, atCand = next, true
				break
			}
			if err := w.enter(); err != nil {
				return "", false, err
			}
			cur = next
		default:
			if len(pending) > 0 {
				return "", false, perr(op, "not_dir", ErrNotDir)
			}
			cur, atCand = next, true
		}
	}
	return cur, atCand, nil
}

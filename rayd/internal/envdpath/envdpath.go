// Package envdpath resolves the path of an E2B envd request the way E2B's
// envd does before it touches the file system, so that programs written
// for E2B name files the same way on rayd: "" is the sandbox's default
// working directory, "~" and "~/x" are the user's home, a relative path is
// taken from the user's home, and "." and ".." components are cleaned.
//
// The result is only a name: rayd's file layer (safefs) then applies its
// own rules to it (deny and read-only lists, no symbolic link in a
// write's directories, the user's identity). envd leaves ".." in an
// absolute path to the kernel, which resolves it through symbolic links;
// here it is cleaned lexically, always (safefs refuses ".." in the paths
// it is given), so "/a/link/../b" is "/a/b" whatever link is.
package envdpath

import (
	"errors"
	"path"
)

// ErrOtherHome is returned for "~name" paths: envd does not expand
// another user's home either.
var ErrOtherHome = errors.New("cannot expand another user's home directory")

// Resolve returns the absolute, lexically clean path that p names for a
// user whose home directory is home (absolute); workdir is the sandbox's
// default working directory ("" for home). A home that is not absolute
// stands for "/".
func Resolve(p, home, workdir string) (string, error) {
	if !path.IsAbs(home) {
		home = "/"
	}
	if p == "" {
		p = workdir
		if p == "" {
			p = home
		}
	}
	if p[0] == '~' {
		if len(p) > 1 && p[1] != '/' {
			return "", ErrOtherHome
		}
		p = home + p[1:]
	}
	if !path.IsAbs(p) {
		p = path.Join(home, p)
	}
	return path.Clean(p), nil
}

package proc

import (
	"errors"
	"io/fs"
	"os"
	"path"
	"strings"
)

// LookPath resolves file the way a shell would for the child, searching the
// colon-separated directory list pathEnv: the value of the PATH variable in
// the child's environment (not rayd's).
//
// A file containing a slash is not searched for, only checked; a relative
// one ("./x", "bin/x") is taken relative to dir, the child's working
// directory, and returned joined to it. Empty and relative PATH entries
// are ignored, as a login shell's PATH never holds them. A candidate is accepted when it is a
// regular file (or a symlink to one) with at least one execute bit set;
// directories are skipped.
//
// When nothing is found the error matches both ErrNotFound and
// fs.ErrNotExist; when only non-executable candidates exist it matches
// fs.ErrPermission. Error messages never contain file or pathEnv.
func LookPath(file, pathEnv, dir string) (string, error) {
	if file == "" {
		return "", newLookPathError("executable not found", ErrNotFound, fs.ErrNotExist)
	}
	if strings.Contains(file, "/") {
		if !path.IsAbs(file) {
			if !path.IsAbs(dir) {
				return "", newLookPathError("executable not found", ErrNotFound, fs.ErrNotExist)
			}
			file = path.Join(dir, file)
		}
		// Like execve: a directory or a file without execute bits is a
		// permission problem.
		switch checkExecutable(file) {
		case isExecutable:
			return file, nil
		case notFound:
			return "", newLookPathError("executable not found", ErrNotFound, fs.ErrNotExist)
		default:
			return "", newLookPathError("executable not permitted", fs.ErrPermission)
		}
	}
	denied := false
	for dir := range strings.SplitSeq(pathEnv, ":") {
		if dir == "" || !path.IsAbs(dir) {
			continue
		}
		candidate := path.Join(dir, file)
		switch checkExecutable(candidate) {
		case isExecutable:
			return candidate, nil
		case notExecutable:
			denied = true
		}
	}
	if denied {
		return "", newLookPathError("executable not permitted", fs.ErrPermission)
	}
	return "", newLookPathError("executable not found", ErrNotFound, fs.ErrNotExist)
}

type execCheck int

const (
	isExecutable  execCheck = iota
	notFound                // missing (or unreachable for another reason)
	notExecutable           // a regular file without execute bits, or inaccessible
	isDirectory
)

func checkExecutable(name string) execCheck {
	fi, err := os.Stat(name)
	switch {
	case errors.Is(err, fs.ErrPermission):
		return notExecutable
	case err != nil:
		return notFound
	case fi.IsDir():
		return isDirectory
	case !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0:
		return notExecutable
	}
	return isExecutable
}

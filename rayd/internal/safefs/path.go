package safefs

import (
	"path"
	"strings"
)

// MaxPathLen is the longest request path accepted, in bytes (after joining a
// relative path to the home directory).
const MaxPathLen = 4096

// DefaultDeny is the deny list used when [Options.Deny] is nil: nothing
// under it is read or written.
var DefaultDeny = []string{"/proc", "/sys", "/dev"}

// DefaultReadOnly is the read-only list used when [Options.ReadOnly] is
// nil: the user may read under it (as `cat /etc/os-release` in the sandbox
// can, the kernel checking the user's permissions) but rayd never creates,
// writes, moves or removes anything there.
var DefaultReadOnly = []string{"/etc", "/usr"}

// resolvePath implements [FS.Resolve] for a normalized deny list.
func resolvePath(deny []string, home, p string) (string, error) {
	const op = "resolve"
	switch {
	case p == "":
		return "", perr(op, "empty", ErrInvalidPath)
	case len(p) > MaxPathLen:
		return "", perr(op, "too_long", ErrInvalidPath)
	case strings.IndexByte(p, 0) >= 0:
		return "", perr(op, "nul", ErrInvalidPath)
	}
	if p[0] != '/' {
		if home == "" || home[0] != '/' || strings.IndexByte(home, 0) >= 0 {
			return "", perr(op, "no_home", ErrInvalidPath)
		}
		p = home + "/" + p
		if len(p) > MaxPathLen {
			return "", perr(op, "too_long", ErrInvalidPath)
		}
	}
	for c := range strings.SplitSeq(p, "/") {
		if c == ".." {
			return "", perr(op, "dotdot", ErrDotDot)
		}
	}
	c := path.Clean(p)
	if isDenied(deny, c) {
		return "", perr(op, "denied", ErrDenied)
	}
	return c, nil
}

// isDenied reports whether the clean absolute path c equals or lies under a
// denied prefix.
func isDenied(deny []string, c string) bool {
	for _, d := range deny {
		if d == "/" || c == d || (strings.HasPrefix(c, d) && c[len(d)] == '/') {
			return true
		}
	}
	return false
}

// normalizeDeny cleans a deny list; entries must be absolute and free of "..".
func normalizeDeny(list []string) ([]string, bool) {
	out := make([]string, 0, len(list))
	for _, d := range list {
		if d == "" || d[0] != '/' || strings.IndexByte(d, 0) >= 0 {
			return nil, false
		}
		for c := range strings.SplitSeq(d, "/") {
			if c == ".." {
				return nil, false
			}
		}
		out = append(out, path.Clean(d))
	}
	return out, true
}

// splitPath splits a canonical path into its components; "/" has none.
func splitPath(c string) []string {
	if c == "/" {
		return nil
	}
	return strings.Split(c[1:], "/")
}

// MetadataPrefix is the extended attribute namespace that holds metadata
// (rayd's own API writes it).
const MetadataPrefix = "user.rayito."

// EnvdMetadataPrefix is E2B envd's metadata namespace, written by an FS
// with [Options.Envd]. Every FS reads both.
const EnvdMetadataPrefix = "user.e2b."

// Metadata limits.
const (
	MaxMetadataKeys   = 64
	MaxMetadataKeyLen = 64
	// MaxMetadataBytes bounds the sum over all entries of
	// len(MetadataPrefix)+len(key)+len(value).
	MaxMetadataBytes = 4000
)

// ValidateMetadata checks a metadata map against the limits: at most
// [MaxMetadataKeys] keys, each 1 to [MaxMetadataKeyLen] characters from
// [a-z0-9_.-], printable ASCII values (space to '~'), and at most
// [MaxMetadataBytes] bytes in total counting the [MetadataPrefix] of every
// key. The error wraps [ErrInvalidMetadata] and never quotes keys or values.
func ValidateMetadata(md map[string]string) error {
	const op = "write"
	if len(md) > MaxMetadataKeys {
		return perr(op, "metadata", ErrInvalidMetadata)
	}
	total := 0
	for k, v := range md {
		if k == "" || len(k) > MaxMetadataKeyLen {
			return perr(op, "metadata", ErrInvalidMetadata)
		}
		for i := 0; i < len(k); i++ {
			c := k[i]
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '-') {
				return perr(op, "metadata", ErrInvalidMetadata)
			}
		}
		for i := 0; i < len(v); i++ {
			if v[i] < 0x20 || v[i] > 0x7e {
				return perr(op, "metadata", ErrInvalidMetadata)
			}
		}
		total += len(MetadataPrefix) + len(k) + len(v)
	}
	if total > MaxMetadataBytes {
		return perr(op, "metadata", ErrInvalidMetadata)
	}
	return nil
}

// Package s3mount holds the rules of S3 mounts that both sides check: the
// SDK before it sends a ConfigureRequest's s3_mounts section and rayd when
// it receives one. A mount puts a bucket's prefix at a path under /mnt/ or
// /home/user/; at most MaxMounts of them, none inside another. The bucket
// must also be in rayd's allow-list (AllowList), which only rayd checks.
//
// Bucket names and prefixes are not secrets (the sandbox's code sees
// them), but errors still name only the field, never a value.
package s3mount

import (
	"errors"
	"strconv"
	"strings"
	"unicode/utf8"
)

// MaxMounts is the most mounts a sandbox has at once.
const MaxMounts = 4

// Limits of a mount's strings, in bytes.
const (
	MaxPathLen   = 1024
	MaxPrefixLen = 1024
)

// Roots are the directories mount paths must be strictly under.
var Roots = []string{"/mnt/", "/home/user/"}

// Error classes of a mount's outcome (SectionResult.error_class and
// MountError.Code in the SDK).
const (
	ClassInvalid       = "invalid"        // the section breaks a rule of this package
	ClassInvalidPath   = "invalid_path"   // the mount path holds a symbolic link or a non-directory
	ClassNotAllowed    = "not_allowed"    // the bucket is not in RAYITO_ALLOWED_MOUNT_BUCKETS
	ClassHelperMissing = "helper_missing" // this sandbox has no mount helper (or no FUSE)
	ClassNetwork       = "network"        // S3 or the metadata service could not be reached
	ClassIAMDenied     = "iam_denied"     // the role may not list the bucket's prefix
	ClassNotFound      = "not_found"      // the bucket does not exist
	ClassTimeout       = "timeout"        // the helper did not report in time
	ClassFailed        = "failed"         // anything else (the helper crashed, mount(2) failed)
)

// Classes lists every class, for tests and closed-set checks.
var Classes = []string{ClassInvalid, ClassInvalidPath, ClassNotAllowed, ClassHelperMissing,
	ClassNetwork, ClassIAMDenied, ClassNotFound, ClassTimeout, ClassFailed}

// Mount is one S3 mount.
type Mount struct {
	// Path is where the mount appears: absolute, clean, strictly under
	// one of Roots.
	Path string
	// Bucket is the bucket's name (S3's rules, without dots).
	Bucket string
	// Prefix is the key prefix mounted: "" (the whole bucket) or a
	// relative key ending in '/', without empty, "." or ".." segments.
	Prefix string
	// ReadOnly refuses every write (EROFS). AllowOverwrite and
	// AllowDelete need it false.
	ReadOnly       bool
	AllowOverwrite bool
	AllowDelete    bool
}

// ErrInvalid is what every validation error matches (errors.Is).
var ErrInvalid = errors.New("s3mount: invalid mount")

// ErrNotAllowed is what a bucket outside the allow-list matches.
var ErrNotAllowed = errors.New("s3mount: bucket not allowed")

// Error is a mount that breaks a rule. Index is the mount's position (-1
// for the section as a whole), Field its field ("mount_path", "bucket",
// "prefix", "read_only"), Reason a fixed text. It never holds a value.
type Error struct {
	Index  int
	Field  string
	Reason string
	// NotAllowed is set for a bucket outside the allow-list.
	NotAllowed bool
}

// Error returns e.g. "mounts[1].bucket: not a valid bucket name".
func (e *Error) Error() string {
	if e.Index < 0 {
		return "mounts: " + e.Reason
	}
	return "mounts[" + strconv.Itoa(e.Index) + "]." + e.Field + ": " + e.Reason
}

// Is matches ErrInvalid, or ErrNotAllowed for a bucket outside the
// allow-list.
func (e *Error) Is(target error) bool {
	if e.NotAllowed {
		return target == ErrNotAllowed
	}
	return target == ErrInvalid
}

// Class is the error class of e.
func (e *Error) Class() string {
	if e.NotAllowed {
		return ClassNotAllowed
	}
	return ClassInvalid
}

// Validate checks mounts against every rule but the allow-list: their
// number, each path, bucket and prefix, and that no path equals or holds
// another. The first broken rule is returned as an *Error.
func Validate(mounts []Mount) error {
	if len(mounts) > MaxMounts {
		return &Error{Index: -1, Reason: "at most " + strconv.Itoa(MaxMounts) + " mounts"}
	}
	for i, m := range mounts {
		if r := checkPath(m.Path); r != "" {
			return &Error{Index: i, Field: "mount_path", Reason: r}
		}
		if !ValidBucket(m.Bucket) {
			return &Error{Index: i, Field: "bucket", Reason: "not a valid bucket name (3-63 lowercase letters, digits and hyphens, no dots)"}
		}
		if r := checkPrefix(m.Prefix); r != "" {
			return &Error{Index: i, Field: "prefix", Reason: r}
		}
		if m.ReadOnly && (m.AllowOverwrite || m.AllowDelete) {
			return &Error{Index: i, Field: "read_only", Reason: "allow_overwrite and allow_delete need a writable mount"}
		}
		for j := range i {
			if nested(mounts[j].Path, m.Path) {
				return &Error{Index: i, Field: "mount_path", Reason: "the same as or nested with mounts[" + strconv.Itoa(j) + "]"}
			}
		}
	}
	return nil
}

// Check is Validate followed by the allow-list: a bucket allow does not
// hold gives an *Error matching ErrNotAllowed.
func Check(mounts []Mount, allow AllowList) error {
	if err := Validate(mounts); err != nil {
		return err
	}
	for i, m := range mounts {
		if !allow.Allows(m.Bucket) {
			return &Error{Index: i, Field: "bucket", Reason: "not in RAYITO_ALLOWED_MOUNT_BUCKETS", NotAllowed: true}
		}
	}
	return nil
}

// nested reports whether a and b are the same path or one is under the
// other.
func nested(a, b string) bool {
	return a == b || strings.HasPrefix(a, b+"/") || strings.HasPrefix(b, a+"/")
}

// checkPath returns why p is not a valid mount path, or "".
func checkPath(p string) string {
	switch {
	case p == "":
		return "required"
	case len(p) > MaxPathLen:
		return "longer than " + strconv.Itoa(MaxPathLen) + " bytes"
	case !utf8.ValidString(p) || hasControl(p):
		return "not valid UTF-8 without control characters"
	case p[0] != '/':
		return "not absolute"
	}
	under := false
	for _, r := range Roots {
		if strings.HasPrefix(p, r) && len(p) > len(r) {
			under = true
		}
	}
	if !under {
		return "not strictly under /mnt/ or /home/user/"
	}
	for _, c := range strings.Split(p[1:], "/") {
		switch {
		case c == "":
			return "not clean (empty segment or trailing slash)"
		case c == "." || c == "..":
			return "not clean (. or .. segment)"
		case len(c) > 255:
			return "a segment is longer than 255 bytes"
		}
	}
	return ""
}

// checkPrefix returns why p is not a valid prefix, or "".
func checkPrefix(p string) string {
	if p == "" {
		return ""
	}
	switch {
	case len(p) > MaxPrefixLen:
		return "longer than " + strconv.Itoa(MaxPrefixLen) + " bytes"
	case !utf8.ValidString(p) || hasControl(p):
		return "not valid UTF-8 without control characters"
	case p[0] == '/':
		return "starts with /"
	case !strings.HasSuffix(p, "/"):
		return "does not end with /"
	}
	for _, c := range strings.Split(strings.TrimSuffix(p, "/"), "/") {
		switch c {
		case "":
			return "has an empty segment"
		case ".", "..":
			return "has a . or .. segment"
		}
	}
	return ""
}

func hasControl(s string) bool {
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			return true
		}
	}
	return false
}

// ValidBucket reports whether name is a bucket name S3 accepts for a
// general purpose bucket, without dots (a dotted name breaks TLS for
// virtual-host addressing): 3-63 lowercase letters, digits and hyphens,
// starting and ending with a letter or digit, none of S3's reserved
// prefixes and suffixes.
func ValidBucket(name string) bool {
	if len(name) < 3 || len(name) > 63 {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
		case c == '-' && i > 0 && i < len(name)-1:
		default:
			return false
		}
	}
	for _, p := range []string{"xn--", "sthree-", "amzn-s3-demo-"} {
		if strings.HasPrefix(name, p) {
			return false
		}
	}
	for _, s := range []string{"-s3alias", "--ol-s3", "--x-s3", "--table-s3"} {
		if strings.HasSuffix(name, s) {
			return false
		}
	}
	return true
}

// AllowList is the set of buckets mounts may name: RAYITO_ALLOWED_MOUNT_BUCKETS.
// The zero value allows nothing.
type AllowList struct{ buckets map[string]bool }

// AllowEnv is the variable the allow-list is read from.
const AllowEnv = "RAYITO_ALLOWED_MOUNT_BUCKETS"

// ParseAllowList parses a comma-separated list of bucket names; blanks
// around names are ignored, and so are entries that are not valid bucket
// names (they could never match). Empty allows nothing.
func ParseAllowList(s string) AllowList {
	var a AllowList
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if !ValidBucket(f) {
			continue
		}
		if a.buckets == nil {
			a.buckets = map[string]bool{}
		}
		a.buckets[f] = true
	}
	return a
}

// Allows reports whether bucket is in the list.
func (a AllowList) Allows(bucket string) bool { return a.buckets[bucket] }

// Len is the number of buckets in the list.
func (a AllowList) Len() int { return len(a.buckets) }

// Union is the buckets of a and b.
func (a AllowList) Union(b AllowList) AllowList {
	if b.Len() == 0 {
		return a
	}
	out := AllowList{buckets: map[string]bool{}}
	for k := range a.buckets {
		out.buckets[k] = true
	}
	for k := range b.buckets {
		out.buckets[k] = true
	}
	return out
}

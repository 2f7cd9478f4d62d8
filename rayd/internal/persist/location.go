package persist

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Limits of a location.
const (
	// MaxPrefixLen bounds a key prefix in bytes (the run payload's bound).
	MaxPrefixLen = 900
	// MaxNameLen bounds a checkpoint's name.
	MaxNameLen = 128
	// DefaultName is the name of a checkpoint asked without one, before
	// the sandbox used any.
	DefaultName = "default"
)

// Location is a checked checkpoint place: the objects
// s3://Bucket/Prefix/Name/home.tar.gz and .../manifest.json.
type Location struct {
	Bucket string
	// Prefix has no leading or trailing slash; "" is the bucket's root.
	Prefix string
	// Region is the bucket's region; "" is the sandbox's own.
	Region string
	Name   string
}

// Dir is the checkpoint's key prefix: Prefix/Name.
func (l Location) Dir() string {
	if l.Prefix == "" {
		return l.Name
	}
	return l.Prefix + "/" + l.Name
}

// Key is the key of one object of the checkpoint.
func (l Location) Key(object string) string { return l.Dir() + "/" + object }

// ErrInvalidLocation: a bucket, prefix, region or name breaks the rules.
var ErrInvalidLocation = errors.New("persist: invalid checkpoint location")

// NewLocation checks and normalizes a location: a bucket of 3 to 63
// characters of [a-z0-9.-] starting and ending with a letter or digit; a
// prefix of at most 900 bytes of UTF-8 without control characters, whose
// slash-separated segments are neither empty nor "." nor ".." (one
// trailing slash is dropped); a region of [a-z0-9-]; a name of 1 to 128
// characters of [A-Za-z0-9._-], not "." or "..". Errors name the field,
// never its value.
func NewLocation(bucket, prefix, region, name string) (Location, error) {
	if !validBucket(bucket) {
		return Location{}, fmt.Errorf("%w: the bucket must be 3 to 63 characters of a-z, 0-9, '.' and '-'", ErrInvalidLocation)
	}
	p, err := normalizePrefix(prefix)
	if err != nil {
		return Location{}, err
	}
	if !validRegion(region) {
		return Location{}, fmt.Errorf("%w: the region must be characters of a-z, 0-9 and '-'", ErrInvalidLocation)
	}
	if !ValidName(name) {
		return Location{}, fmt.Errorf("%w: the name must be 1 to %d characters of A-Z, a-z, 0-9, '.', '_' and '-', not '.' or '..'", ErrInvalidLocation, MaxNameLen)
	}
	return Location{Bucket: bucket, Prefix: p, Region: region, Name: name}, nil
}

func validBucket(b string) bool {
	if len(b) < 3 || len(b) > 63 {
		return false
	}
	for i := 0; i < len(b); i++ {
		c := b[i]
		alnum := c >= 'a' && c <= 'z' || c >= '0' && c <= '9'
		if !alnum && c != '.' && c != '-' || (i == 0 || i == len(b)-1) && !alnum {
			return false
		}
	}
	return !strings.Contains(b, "..")
}

func validRegion(r string) bool {
	if len(r) > 32 {
		return false
	}
	for i := 0; i < len(r); i++ {
		c := r[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// ValidName reports whether name is a valid checkpoint name.
func ValidName(name string) bool {
	if name == "" || len(name) > MaxNameLen || name == "." || name == ".." {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

func normalizePrefix(p string) (string, error) {
	if len(p) > MaxPrefixLen {
		return "", fmt.Errorf("%w: the key prefix is longer than %d bytes", ErrInvalidLocation, MaxPrefixLen)
	}
	if !utf8.ValidString(p) {
		return "", fmt.Errorf("%w: the key prefix is not UTF-8", ErrInvalidLocation)
	}
	for _, r := range p {
		if r < 0x20 || r == 0x7f || r >= 0x80 && r < 0xa0 {
			return "", fmt.Errorf("%w: the key prefix has a control character", ErrInvalidLocation)
		}
	}
	p = strings.TrimSuffix(p, "/")
	if p == "" {
		return "", nil
	}
	for seg := range strings.SplitSeq(p, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return "", fmt.Errorf("%w: the key prefix has an empty, '.' or '..' segment", ErrInvalidLocation)
		}
	}
	return p, nil
}

// Binding is the bucket and prefix a sandbox is bound to (the run
// payload's persist block): its checkpoints and restores stay inside.
type Binding struct {
	Bucket string
	Prefix string // normalized as a Location's
}

// NewBinding checks a run payload's persist block.
func NewBinding(bucket, prefix string) (*Binding, error) {
	if !validBucket(bucket) {
		return nil, fmt.Errorf("%w: the bound bucket is invalid", ErrInvalidLocation)
	}
	p, err := normalizePrefix(prefix)
	if err != nil {
		return nil, err
	}
	return &Binding{Bucket: bucket, Prefix: p}, nil
}

// Allows reports whether l lies inside the binding: the same bucket, and
// the checkpoint's keys (Prefix/Name/...) under the bound prefix.
func (b *Binding) Allows(l Location) bool {
	if b == nil {
		return true
	}
	if l.Bucket != b.Bucket {
		return false
	}
	if b.Prefix == "" {
		return true
	}
	dir := l.Dir()
	return dir == b.Prefix || strings.HasPrefix(dir, b.Prefix+"/")
}

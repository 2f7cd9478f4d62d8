package archive

import (
	"fmt"
	"path"
	"strings"
)

// MaxExcludes bounds the user's exclude patterns of one checkpoint.
const MaxExcludes = 64

// maxPatternLen bounds one exclude pattern in bytes.
const maxPatternLen = 1024

// FixedExcludes are left out of every checkpoint: caches that rebuild
// themselves, and the runtime files of kernels and of rayd (connection
// files hold a kernel's HMAC key and mean nothing in another sandbox).
var FixedExcludes = []string{
	"/.cache/",
	"__pycache__/",
	"/.local/share/jupyter/runtime/",
	"/.ipython/profile_*/security/",
	".rayito-tmp-*",
}

// Excludes is a checked set of exclude patterns.
type Excludes struct{ ps []pattern }

type pattern struct {
	glob     string
	dirOnly  bool // a trailing "/"
	anchored bool // the pattern has a "/": matched against the whole path
}

// ParseExcludes checks the user's patterns (at most MaxExcludes) and
// returns them with FixedExcludes. A pattern is matched like a simple
// .gitignore line: with path.Match against the path relative to HOME when
// it holds a "/" (a leading "/" only anchors it), else against the base
// name at any depth; a trailing "/" matches directories only; an excluded
// directory excludes all it holds. Empty patterns, NUL, "..", over 1024
// bytes or a malformed glob are ErrBadExclude (naming its index, never
// its text).
func ParseExcludes(user []string) (*Excludes, error) {
	if len(user) > MaxExcludes {
		return nil, fmt.Errorf("%w: at most %d patterns", ErrBadExclude, MaxExcludes)
	}
	e := &Excludes{}
	for _, p := range FixedExcludes {
		pp, _ := parsePattern(p)
		e.ps = append(e.ps, pp)
	}
	for i, p := range user {
		pp, err := parsePattern(p)
		if err != nil {
			return nil, fmt.Errorf("%w: pattern %d: %w", ErrBadExclude, i+1, err)
		}
		e.ps = append(e.ps, pp)
	}
	return e, nil
}

type patternError string

func (e patternError) Error() string { return string(e) }

func parsePattern(p string) (pattern, error) {
	switch {
	case len(p) > maxPatternLen:
		return pattern{}, patternError("longer than 1024 bytes")
	case strings.IndexByte(p, 0) >= 0:
		return pattern{}, patternError("has a NUL")
	}
	var pp pattern
	p = strings.TrimPrefix(p, "./")
	if strings.HasSuffix(p, "/") {
		pp.dirOnly = true
		p = strings.TrimRight(p, "/")
	}
	if strings.HasPrefix(p, "/") {
		pp.anchored = true
		p = strings.TrimLeft(p, "/")
	}
	if p == "" {
		return pattern{}, patternError("empty")
	}
	for c := range strings.SplitSeq(p, "/") {
		if c == ".." {
			return pattern{}, patternError("has '..'")
		}
	}
	if strings.Contains(p, "/") {
		pp.anchored = true
	}
	if _, err := path.Match(p, ""); err != nil {
		return pattern{}, patternError("malformed glob")
	}
	pp.glob = p
	return pp, nil
}

// Match reports whether rel (a clean path relative to HOME) is excluded;
// dir tells a directory.
func (e *Excludes) Match(rel string, dir bool) bool {
	if e == nil {
		return false
	}
	base := path.Base(rel)
	for _, p := range e.ps {
		if p.dirOnly && !dir {
			continue
		}
		subject := base
		if p.anchored {
			subject = rel
		}
		if ok, _ := path.Match(p.glob, subject); ok {
			return true
		}
	}
	return false
}

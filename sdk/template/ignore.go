package template

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"strings"

	"github.com/moby/patternmatcher"
	"github.com/moby/patternmatcher/ignorefile"
)

// IgnoreFile is the name of the context's ignore file.
const IgnoreFile = ".dockerignore"

// maxIgnoreLen bounds the .dockerignore Compile reads.
const maxIgnoreLen = 1 << 20

// ignorer applies a .dockerignore with Docker's own matcher; a nil pm
// excludes nothing.
type ignorer struct {
	pm *patternmatcher.PatternMatcher
}

// parseIgnore reads .dockerignore text: ignorefile strips the BOM,
// comments and surrounding whitespace, cleans each pattern and drops a
// leading '/'; patternmatcher compiles Docker's pattern syntax.
func parseIgnore(r io.Reader) (*ignorer, error) {
	pats, err := ignorefile.ReadAll(io.LimitReader(r, maxIgnoreLen))
	if err != nil {
		return nil, pathErr(ErrContextPath, IgnoreFile, "cannot be read")
	}
	if len(pats) == 0 {
		return &ignorer{}, nil
	}
	pm, err := patternmatcher.New(pats)
	if err != nil {
		return nil, pathErr(ErrContextPath, IgnoreFile, "has an invalid pattern")
	}
	return &ignorer{pm: pm}, nil
}

// loadIgnore reads the context's .dockerignore, if any: a regular file
// (a link there is refused, as everywhere in the context).
func loadIgnore(root *os.Root) (*ignorer, error) {
	fi, err := root.Lstat(IgnoreFile)
	if errors.Is(err, fs.ErrNotExist) {
		return &ignorer{}, nil
	}
	if err != nil {
		return nil, pathErr(ErrContextPath, IgnoreFile, "cannot be read")
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		return nil, pathErr(ErrUnsafeSymlink, IgnoreFile, "is a symbolic link")
	}
	if !fi.Mode().IsRegular() {
		return nil, pathErr(ErrSpecialFile, IgnoreFile, "is not a regular file")
	}
	if fi.Size() > maxIgnoreLen {
		return nil, pathErr(ErrContextTooLarge, IgnoreFile, "is larger than 1 MiB")
	}
	f, err := openChecked(root, IgnoreFile, fi)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return parseIgnore(f)
}

// excluded reports whether rel (slash-separated, relative to the context
// root, not ".") is excluded, given its parent directory's match state
// (the zero MatchInfo makes the matcher check every parent itself).
func (ig *ignorer) excluded(rel string, parent patternmatcher.MatchInfo) (bool, patternmatcher.MatchInfo, error) {
	if ig.pm == nil {
		return false, patternmatcher.MatchInfo{}, nil
	}
	ex, info, err := ig.pm.MatchesUsingParentResults(rel, parent)
	if err != nil {
		return false, info, pathErr(ErrContextPath, IgnoreFile, "has an invalid pattern")
	}
	return ex, info, nil
}

// mayReinclude reports whether a '!' pattern could bring back something
// under the excluded directory dir (then the walk goes on inside it, else
// it skips the whole tree, as Docker does).
//
// What decides a path under dir is what decided dir, plus the patterns
// that match the path itself but not dir or its parents. Without "**",
// a pattern of n slash-separated parts matches paths of n components only
// ('*' and '?' never match a slash), so a '!' pattern can match below dir
// only if it has more parts than dir has components and its first parts
// match dir's. Patterns with "**", '[' or '\' are taken to match anywhere.
func (ig *ignorer) mayReinclude(dir string) bool {
	if ig.pm == nil || !ig.pm.Exclusions() {
		return false
	}
	k := strings.Count(dir, "/") + 1
	for _, p := range ig.pm.Patterns() {
		if !p.Exclusion() {
			continue
		}
		s := p.String()
		if strings.Contains(s, "**") || strings.ContainsAny(s, "[\\") {
			return true
		}
		parts := strings.Split(s, "/")
		if len(parts) <= k {
			continue
		}
		prefix, err := patternmatcher.New([]string{strings.Join(parts[:k], "/")})
		if err != nil {
			return true
		}
		if ok, _, err := prefix.MatchesUsingParentResults(dir, patternmatcher.MatchInfo{}); err != nil || ok {
			return true
		}
	}
	return false
}

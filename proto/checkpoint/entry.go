package checkpoint

import (
	"archive/tar"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strings"
	"time"
)

// Limits of an archive read back.
const (
	// MaxPathLen bounds an entry's path (relative to HOME) in bytes.
	MaxPathLen = 4000
	// MaxDepth bounds an entry's path in components.
	MaxDepth = 200
	// MaxLinkTarget bounds a symbolic link's target in bytes.
	MaxLinkTarget = 4095
	// MaxEntries bounds the entries of one archive.
	MaxEntries = 1 << 20
)

// Kind is what an archive entry becomes.
type Kind int

// Kinds of entries.
const (
	// KindSkip: left out (Skip says why).
	KindSkip Kind = iota
	// KindDir: a directory.
	KindDir
	// KindFile: a regular file.
	KindFile
	// KindSymlink: a symbolic link (never followed).
	KindSymlink
)

// Skip is why an entry is left out.
type Skip int

// Reasons to leave an entry out.
const (
	SkipNone Skip = iota
	// SkipRoot: the root itself ("./"): HOME exists already.
	SkipRoot
	// SkipSpecial: a device or FIFO (mknod is never called).
	SkipSpecial
	// SkipHardLink: a hard link (link is never called).
	SkipHardLink
	// SkipOther: any other kind of entry.
	SkipOther
)

// Entry is the checked form of one tar header.
type Entry struct {
	Kind Kind
	Skip Skip
	// Path is clean and relative ("a/b"), without "." or ".." components.
	Path string
	// Perm holds the permission bits only.
	Perm fs.FileMode
	// Sanitized: setuid, setgid or sticky bits were dropped.
	Sanitized bool
	// Size is a regular file's size.
	Size int64
	// Target is a symbolic link's target.
	Target  string
	ModTime time.Time
	// Owner is the header's numeric owner, for a program that re-packs
	// an archive; an extraction ignores it.
	Owner Owner
}

// CheckHeader checks one tar header as an entry of an archive extracted
// under a root. It refuses (ErrUnsafe) what could leave the root or break
// a limit: an absolute path, a ".." component, a NUL, an over-long or
// over-deep path, a symbolic link without a target or with an over-long
// one, a negative size. It leaves out (KindSkip) the root itself, devices
// and FIFOs, hard links and other kinds. It drops setuid, setgid and sticky
// bits. Ownership in the header is ignored: what is extracted belongs to
// the user who extracts it.
func CheckHeader(h *tar.Header) (Entry, error) {
	p, err := CleanPath(h.Name)
	if err != nil {
		return Entry{}, err
	}
	e := Entry{Path: p, ModTime: h.ModTime, Owner: Owner{UID: h.Uid, GID: h.Gid}}
	if p == "" {
		e.Kind, e.Skip = KindSkip, SkipRoot
		return e, nil
	}
	mode := h.Mode
	e.Perm = fs.FileMode(mode & 0o777)
	e.Sanitized = mode&0o7000 != 0
	switch h.Typeflag {
	case tar.TypeReg, tar.TypeRegA, tar.TypeGNUSparse:
		if h.Size < 0 {
			return Entry{}, fmt.Errorf("%w: negative size", ErrUnsafe)
		}
		if strings.HasSuffix(h.Name, "/") {
			return Entry{}, fmt.Errorf("%w: a file named as a directory", ErrUnsafe)
		}
		e.Kind, e.Size = KindFile, h.Size
	case tar.TypeDir:
		e.Kind = KindDir
	case tar.TypeSymlink:
		t := h.Linkname
		if t == "" || len(t) > MaxLinkTarget || strings.IndexByte(t, 0) >= 0 {
			return Entry{}, fmt.Errorf("%w: a symbolic link's target is empty, too long or has a NUL", ErrUnsafe)
		}
		e.Kind, e.Target = KindSymlink, t
	case tar.TypeLink:
		e.Kind, e.Skip = KindSkip, SkipHardLink
	case tar.TypeChar, tar.TypeBlock, tar.TypeFifo:
		e.Kind, e.Skip = KindSkip, SkipSpecial
	default:
		e.Kind, e.Skip = KindSkip, SkipOther
	}
	if e.Kind == KindSkip {
		e.Perm, e.Sanitized = 0, false
	}
	return e, nil
}

// CleanPath turns an archive name into a clean path relative to the root:
// a leading "./" and "." components and repeated or trailing slashes go;
// an absolute name, a ".." component, a NUL, more than MaxPathLen bytes or
// MaxDepth components are ErrUnsafe. The root itself is "".
func CleanPath(name string) (string, error) {
	switch {
	case strings.HasPrefix(name, "/"):
		return "", fmt.Errorf("%w: an absolute path", ErrUnsafe)
	case strings.IndexByte(name, 0) >= 0:
		return "", fmt.Errorf("%w: a NUL in a path", ErrUnsafe)
	case len(name) > MaxPathLen:
		return "", fmt.Errorf("%w: a path longer than %d bytes", ErrUnsafe, MaxPathLen)
	}
	var b strings.Builder
	depth := 0
	for c := range strings.SplitSeq(name, "/") {
		switch c {
		case "", ".":
			continue
		case "..":
			return "", fmt.Errorf("%w: a path with '..'", ErrUnsafe)
		}
		if depth++; depth > MaxDepth {
			return "", fmt.Errorf("%w: a path deeper than %d levels", ErrUnsafe, MaxDepth)
		}
		if b.Len() > 0 {
			b.WriteByte('/')
		}
		b.WriteString(c)
	}
	return b.String(), nil
}

// Plan is what Scan found in an archive: what an extraction will make.
type Plan struct {
	Files, Directories, Symlinks uint64
	// ContentBytes is the sum of the regular files' sizes.
	ContentBytes uint64
	Skipped      Skipped
}

// Skipped counts entries left out or changed.
type Skipped struct {
	Special, HardLinks, Other, ModesSanitized uint64
	// Conflicts: entries an extraction could not place (a link or a
	// non-directory on the way on disk, a non-empty directory in the
	// place of a file).
	Conflicts uint64
}

// Scan reads a whole tar.gz archive and checks every entry before anything
// is extracted: each header through CheckHeader, and, across entries, that
// no entry lies under a path that an earlier entry made a symbolic link
// (extracting "a" -> /etc and then "a/passwd" must never write through
// the link), at most MaxEntries entries and at most maxContent bytes of
// file contents (0: no bound). Anything else (not gzip, not tar, a
// truncated archive) is ErrUnsafe too.
func Scan(r io.Reader, maxContent uint64) (Plan, error) {
	var p Plan
	err := Walk(r, func(e Entry, _ io.Reader) error {
		switch e.Kind {
		case KindFile:
			p.Files++
			p.ContentBytes += uint64(e.Size)
			if maxContent > 0 && p.ContentBytes > maxContent {
				return fmt.Errorf("%w: its files hold more than %d bytes", ErrTooBig, maxContent)
			}
		case KindDir:
			p.Directories++
		case KindSymlink:
			p.Symlinks++
		}
		p.Skipped.count(e)
		return nil
	})
	return p, err
}

// ErrTooBig is Scan's error when the archive's files would not fit the
// bound it was given (it also matches ErrUnsafe).
var ErrTooBig = fmt.Errorf("%w: too large", ErrUnsafe)

func (s *Skipped) count(e Entry) {
	switch e.Skip {
	case SkipSpecial:
		s.Special++
	case SkipHardLink:
		s.HardLinks++
	case SkipOther:
		s.Other++
	}
	if e.Sanitized {
		s.ModesSanitized++
	}
}

// Walk reads the tar.gz archive r, checks every entry as Scan does
// (CheckHeader, the links rule, MaxEntries) and calls fn with it, in the
// archive's order, and, for a regular file, a reader of its content (nil
// otherwise; valid until fn returns). The first refused entry ends the
// walk with ErrUnsafe before fn sees it; fn's error ends it too. An
// extractor that calls fn's side effects only for accepted entries thus
// never acts on an entry Scan would refuse.
func Walk(r io.Reader, fn func(Entry, io.Reader) error) error {
	zr, err := gzip.NewReader(r)
	if err != nil {
		return fmt.Errorf("%w: not gzip", ErrUnsafe)
	}
	defer zr.Close()
	return WalkTar(zr, fn)
}

// WalkTar is Walk for an uncompressed tar stream: the same checks, the
// same calls of fn. A program that re-packs another tar into the format
// (the E2B gateway re-packs GNU tar's output) reads it through WalkTar.
func WalkTar(r io.Reader, fn func(Entry, io.Reader) error) error {
	tr := tar.NewReader(r)
	links := map[string]bool{} // paths that are symbolic links now
	n := 0
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			if errors.Is(err, tar.ErrInsecurePath) {
				return fmt.Errorf("%w: an insecure path", ErrUnsafe)
			}
			return fmt.Errorf("%w: not a tar archive, or truncated", ErrUnsafe)
		}
		if n++; n > MaxEntries {
			return fmt.Errorf("%w: more than %d entries", ErrUnsafe, MaxEntries)
		}
		e, err := CheckHeader(h)
		if err != nil {
			return err
		}
		if e.Path != "" && underLink(links, e.Path) {
			return fmt.Errorf("%w: a path through a symbolic link of the archive", ErrUnsafe)
		}
		switch e.Kind {
		case KindSymlink:
			links[e.Path] = true
		case KindDir, KindFile:
			delete(links, e.Path)
		}
		var body io.Reader
		if e.Kind == KindFile {
			body = tr
		}
		if err := fn(e, body); err != nil {
			return err
		}
	}
}

// underLink reports whether a strict parent of p is in links.
func underLink(links map[string]bool, p string) bool {
	if len(links) == 0 {
		return false
	}
	for i := 0; i < len(p); i++ {
		if p[i] == '/' && links[p[:i]] {
			return true
		}
	}
	return false
}

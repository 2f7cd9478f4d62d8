// Package image builds the code artifact of a Rayito MicroVM image: the
// zip that CreateMicrovmImage's codeArtifact points at, with the
// Dockerfile at its root (contracts §2.2).
//
// The artifact is deterministic: the same tree gives the same bytes, and
// so the same sha256, on any machine, whatever the files' modification
// times, owners or the umask they were created under. Entries are sorted
// by path; every entry carries the zip epoch (1980-01-01 00:00:00 UTC) as
// its time, mode 0755 (directories and files executable in the source) or
// 0644, no extra fields, no comments; file data is Deflated at a fixed
// level. (The compressed bytes are those of the Go toolchain rayito was
// built with: another compress/flate could compress differently, so two
// rayito builds on different Go releases may disagree.)
//
// The source directory holds a Dockerfile template, Dockerfile.in, whose
// FROM names the base image by digest through the placeholder
// @@BASE_DIGEST@@, and base.digest, one line "sha256:<64 hex>". Build
// writes the template with the digest substituted as the artifact's
// Dockerfile; neither Dockerfile.in nor base.digest is copied into the
// artifact. A source directory with a Dockerfile of its own is refused:
// the artifact's Dockerfile only ever comes from the template.
//
// The kernel's Python packages come from LockName, requirements.lock: a
// complete, hash-pinned lock (every line name==version with at least one
// --hash=sha256:<64 hex>), which the Dockerfile installs with
// `pip install --require-hashes`. Like base.digest it is made from the
// network by whoever publishes (see LockCommand) and is not committed;
// Build refuses a tree without it or with an unhashed line (*LockError).
// It goes into the artifact as it is.
//
// Any symbolic link in the tree, or the source directory being one, is
// refused (*SymlinkError): a link would put a file of the building
// machine into the image. So is anything that is neither a regular file
// nor a directory. .dockerignore is not interpreted: every file of the
// tree goes into the artifact.
package image

import (
	"archive/zip"
	"bytes"
	"compress/flate"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"
)

const (
	// TemplateName is the Dockerfile template in the source directory.
	TemplateName = "Dockerfile.in"
	// DigestName is the file holding the base image's digest.
	DigestName = "base.digest"
	// DockerfileName is the artifact's Dockerfile, at its root.
	DockerfileName = "Dockerfile"
	// Placeholder is what Build replaces in the template with the hex of
	// the base digest (the template reads "…@sha256:@@BASE_DIGEST@@").
	Placeholder = "@@BASE_DIGEST@@"
	// BaseImage is the base image's repository and tag.
	BaseImage = "public.ecr.aws/lambda/microvms:al2023-minimal"
	// DigestCommand prints the base image's current digest.
	DigestCommand = "docker buildx imagetools inspect " + BaseImage
	// LockName is the hash-pinned lock of the kernel's Python packages.
	LockName = "requirements.lock"
	// LockCommand makes LockName from requirements.in for the image's
	// Python (Amazon Linux 2023's 3.9) on ARM_64.
	LockCommand = "uv pip compile requirements.in --generate-hashes --python-version 3.9 --python-platform aarch64-manylinux_2_28 -o requirements.lock"
	// Level is the Deflate level of every entry.
	Level = flate.BestCompression
)

// Epoch is the modification time of every entry: the zip format's own
// epoch, the earliest time an MS-DOS date can hold.
var Epoch = time.Date(1980, 1, 1, 0, 0, 0, 0, time.UTC)

// Options tune Build.
type Options struct {
	// BaseDigest, when set ("sha256:<64 hex>"), is used instead of the
	// source directory's base.digest.
	BaseDigest string
	// Template, when set, merges a template into the artifact: its
	// layer goes into the Dockerfile (InsertLayer) and its files under
	// TemplateDir.
	Template *Template
}

// Template is a template to merge into the artifact.
type Template struct {
	// Layer is the lines to insert before the base's final CMD or
	// ENTRYPOINT (TemplateLayer's, then TemplateTrailer's).
	Layer []string
	// Files are the template's entries, named relative to TemplateDir.
	Files []TemplateFile
}

// TemplateFile is one entry of a merged template: a directory (Name ends
// in "/") or a regular file whose contents Open reads (or Data holds,
// when Open is nil).
type TemplateFile struct {
	Name string
	Exec bool // mode 0755, else 0644
	Data []byte
	Open func() (io.ReadCloser, error)
}

// SymlinkError: Path (relative to the source directory, "." for the
// directory itself) is a symbolic link.
type SymlinkError struct {
	Dir  string // the source directory as given
	Path string
}

func (e *SymlinkError) Error() string {
	if e.Path == "." {
		return fmt.Sprintf("%s is a symbolic link: refused (a link would put a file of this machine into the image)", e.Dir)
	}
	return fmt.Sprintf("%s is a symbolic link: refused (a link would put a file of this machine into the image)", e.Path)
}

// IrregularFileError: Path (relative to the source directory) is neither
// a regular file nor a directory (a socket, a device, a FIFO).
type IrregularFileError struct {
	Path string
	Mode fs.FileMode
}

func (e *IrregularFileError) Error() string {
	return fmt.Sprintf("%s is not a regular file or a directory (%s): refused", e.Path, e.Mode.Type())
}

// DigestError: the base image's digest is missing or malformed. Path is
// the digest file (empty when the digest came from Options).
type DigestError struct {
	Path   string
	Reason string
}

func (e *DigestError) Error() string {
	src := "the base digest"
	if e.Path != "" {
		src = e.Path
	}
	return fmt.Sprintf("%s: %s; it must hold one line sha256:<64 lowercase hex>, the digest of %s (get it with `%s`)",
		src, e.Reason, BaseImage, DigestCommand)
}

// LockError: requirements.lock is missing, or a line of it is not
// name==version with sha256 hashes.
type LockError struct {
	Path   string
	Reason string
}

func (e *LockError) Error() string {
	return fmt.Sprintf("%s: %s; it must be a complete lock with a --hash=sha256: for every package (make it with `%s`)", e.Path, e.Reason, LockCommand)
}

// TemplateError: the source directory's Dockerfile template is missing
// or unusable.
type TemplateError struct {
	Path   string
	Reason string
}

func (e *TemplateError) Error() string { return e.Path + ": " + e.Reason }

var digestRE = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

// ParseDigest checks a digest line ("sha256:<64 hex>", surrounding
// blanks and one trailing newline allowed) and returns its hex.
func ParseDigest(s string) (string, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return "", errors.New("empty")
	}
	if strings.ContainsAny(s, "\r\n") {
		return "", errors.New("more than one line")
	}
	if !digestRE.MatchString(s) {
		return "", fmt.Errorf("%q is not a sha256 digest", s)
	}
	return strings.TrimPrefix(s, "sha256:"), nil
}

type entry struct {
	name string // slash-separated, relative; directories end in "/"
	mode fs.FileMode
	abs  string                        // the source file; "" for a directory or data
	data []byte                        // contents not read from abs (the Dockerfile)
	open func() (io.ReadCloser, error) // a merged template's file
}

// Build writes the artifact of srcDir to dst and returns its sha256 (hex).
// Nothing is written to dst when the tree is refused.
func Build(dst io.Writer, srcDir string, opts Options) (string, error) {
	entries, err := collect(srcDir, opts)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	zw := zip.NewWriter(io.MultiWriter(dst, h))
	zw.RegisterCompressor(zip.Deflate, func(w io.Writer) (io.WriteCloser, error) {
		return flate.NewWriter(w, Level)
	})
	for _, e := range entries {
		if err := add(zw, e); err != nil {
			return "", err
		}
	}
	if err := zw.Close(); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func add(zw *zip.Writer, e entry) error {
	fh := &zip.FileHeader{Name: e.name, Method: zip.Deflate, Modified: Epoch}
	if strings.HasSuffix(e.name, "/") {
		fh.Method = zip.Store
	}
	fh.SetMode(e.mode)
	// archive/zip adds an extended-timestamp extra field when Modified is
	// set; the MS-DOS fields alone are fixed and machine-independent.
	fh.ModifiedDate, fh.ModifiedTime = dosTime(Epoch)
	fh.Modified = time.Time{}
	w, err := zw.CreateHeader(fh)
	if err != nil {
		return err
	}
	switch {
	case strings.HasSuffix(e.name, "/"):
		return nil
	case e.data != nil:
		_, err = w.Write(e.data)
		return err
	case e.open != nil:
		r, err := e.open()
		if err != nil {
			return err
		}
		defer r.Close()
		_, err = io.Copy(w, r)
		return err
	}
	// The file may have been swapped for a link since the walk: do not
	// follow one, and check what was opened.
	f, err := openNoFollow(e.abs)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) && isLoop(pe.Err) {
			return &SymlinkError{Path: e.name}
		}
		return err
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil {
		return err
	} else if !st.Mode().IsRegular() {
		return &IrregularFileError{Path: strings.TrimSuffix(e.name, "/"), Mode: st.Mode()}
	}
	_, err = io.Copy(w, f)
	return err
}

func dosTime(t time.Time) (date, tm uint16) {
	date = uint16(t.Day() + int(t.Month())<<5 + (t.Year()-1980)<<9)
	tm = uint16(t.Second()/2 + t.Minute()<<5 + t.Hour()<<11)
	return date, tm
}

// collect walks srcDir and returns the artifact's entries, sorted.
func collect(srcDir string, opts Options) ([]entry, error) {
	st, err := os.Lstat(srcDir)
	if err != nil {
		return nil, err
	}
	if st.Mode()&fs.ModeSymlink != 0 {
		return nil, &SymlinkError{Dir: srcDir, Path: "."}
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("%s is not a directory", srcDir)
	}
	entries, err := walkTree(srcDir)
	if err != nil {
		return nil, err
	}
	// The template and the digest are consumed, not copied; the
	// Dockerfile is generated.
	var (
		tmpl  *entry
		kept  []entry
		other bool
	)
	for i := range entries {
		switch entries[i].name {
		case TemplateName:
			tmpl = &entries[i]
		case DigestName:
		default:
			// A Dockerfile of the tree's own (any case: builders fall
			// back to "dockerfile") would compete with the generated one.
			if strings.EqualFold(strings.TrimSuffix(entries[i].name, "/"), DockerfileName) {
				other = true
				continue
			}
			kept = append(kept, entries[i])
		}
	}
	tpath := filepath.Join(srcDir, TemplateName)
	if other {
		return nil, &TemplateError{Path: filepath.Join(srcDir, DockerfileName), Reason: "the artifact's Dockerfile is generated from " + TemplateName + ": remove this file"}
	}
	if tmpl == nil {
		return nil, &TemplateError{Path: tpath, Reason: "missing (the Dockerfile template, whose FROM ends in @sha256:" + Placeholder + ")"}
	}
	hexDigest, err := baseDigest(srcDir, opts)
	if err != nil {
		return nil, err
	}
	if err := checkLock(srcDir); err != nil {
		return nil, err
	}
	text, err := os.ReadFile(tmpl.abs)
	if err != nil {
		return nil, err
	}
	if !bytes.Contains(text, []byte("@sha256:"+Placeholder)) {
		return nil, &TemplateError{Path: tpath, Reason: "no FROM pinned by @sha256:" + Placeholder}
	}
	df := bytes.ReplaceAll(text, []byte(Placeholder), []byte(hexDigest))
	if t := opts.Template; t != nil {
		merged, err := InsertLayer(string(df), t.Layer)
		if err != nil {
			return nil, err
		}
		df = []byte(merged)
		tents, err := templateEntries(t)
		if err != nil {
			return nil, err
		}
		kept = append(kept, tents...)
	}
	kept = append(kept, entry{name: DockerfileName, mode: 0o644, data: df})
	sort.Slice(kept, func(i, j int) bool { return kept[i].name < kept[j].name })
	for i := 1; i < len(kept); i++ {
		if path.Clean(kept[i].name) == path.Clean(kept[i-1].name) {
			return nil, fmt.Errorf("%s: two entries", kept[i].name)
		}
	}
	return kept, nil
}

// walkTree lists srcDir's directories and regular files (as 0755 or
// 0644); a symbolic link or another kind of file is an error.
func walkTree(srcDir string) ([]entry, error) {
	var entries []entry
	err := filepath.WalkDir(srcDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(srcDir, p)
		if err != nil {
			return err
		}
		if rel == "." {
			return nil
		}
		name := filepath.ToSlash(rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch m := info.Mode(); {
		case m&fs.ModeSymlink != 0:
			return &SymlinkError{Dir: srcDir, Path: name}
		case m.IsDir():
			entries = append(entries, entry{name: name + "/", mode: fs.ModeDir | 0o755})
		case m.IsRegular():
			mode := fs.FileMode(0o644)
			if m.Perm()&0o111 != 0 {
				mode = 0o755
			}
			entries = append(entries, entry{name: name, mode: mode, abs: p})
		default:
			return &IrregularFileError{Path: name, Mode: m}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return entries, nil
}

// templateEntries are the entries of t's files under TemplateDir, the
// directory itself first.
func templateEntries(t *Template) ([]entry, error) {
	kept := []entry{{name: TemplateDir, mode: fs.ModeDir | 0o755}}
	for _, f := range t.Files {
		if !validTemplateName(f.Name) {
			return nil, fmt.Errorf("%w: a template entry's name is not a clean relative path", ErrLayer)
		}
		e := entry{name: TemplateDir + f.Name, mode: 0o644, data: f.Data, open: f.Open}
		switch {
		case strings.HasSuffix(f.Name, "/"):
			e.mode, e.data, e.open = fs.ModeDir|0o755, nil, nil
		case f.Exec:
			e.mode = 0o755
		}
		if e.data == nil && e.open == nil && e.mode.IsRegular() {
			e.data = []byte{}
		}
		kept = append(kept, e)
	}
	return kept, nil
}

func baseDigest(srcDir string, opts Options) (string, error) {
	if opts.BaseDigest != "" {
		h, err := ParseDigest(opts.BaseDigest)
		if err != nil {
			return "", &DigestError{Reason: err.Error()}
		}
		return h, nil
	}
	p := filepath.Join(srcDir, DigestName)
	b, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return "", &DigestError{Path: p, Reason: "missing"}
	}
	if err != nil {
		return "", &DigestError{Path: p, Reason: "unreadable (" + err.Error() + ")"}
	}
	h, err := ParseDigest(string(b))
	if err != nil {
		return "", &DigestError{Path: p, Reason: err.Error()}
	}
	return h, nil
}

// validTemplateName: a clean, relative, slash-separated name, a directory
// ending in "/".
func validTemplateName(n string) bool {
	p := strings.TrimSuffix(n, "/")
	if p == "" || strings.ContainsAny(p, "\\\x00") || path.IsAbs(p) || path.Clean(p) != p {
		return false
	}
	for _, part := range strings.Split(p, "/") {
		if part == ".." || part == "." {
			return false
		}
	}
	return true
}

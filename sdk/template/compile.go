package template

import (
	"archive/zip"
	"bytes"
	"compress/flate"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/moby/patternmatcher"

	ptemplate "github.com/rayito-dev/rayito/proto/template"
)

// Defaults of Compile's limits.
const (
	DefaultMaxContextBytes = 1 << 30 // bytes of copied files and links
	DefaultMaxFiles        = 100_000 // entries copied (files, links, directories)
	DefaultSpillThreshold  = 64 << 20
	// deflateLevel is fixed: the zip's bytes depend on it.
	deflateLevel = 6
)

// CompileOption configures Compile.
type CompileOption interface{ applyCompile(*compileConfig) }

type compileConfig struct {
	warn     func(string)
	logger   *slog.Logger
	maxBytes int64
	maxFiles int
	spill    int64
	tempDir  string
}

type compileOption func(*compileConfig)

func (f compileOption) applyCompile(c *compileConfig) { f(c) }

// WithWarn receives each warning (a file that may hold a secret is about
// to be packaged) before the file is read; it replaces WithLogger's
// warnings.
func WithWarn(fn func(string)) CompileOption {
	return compileOption(func(c *compileConfig) { c.warn = fn })
}

// WithLogger logs each warning at WARN level when no WithWarn is given
// (the path relative to the context, never contents).
func WithLogger(l *slog.Logger) CompileOption {
	return compileOption(func(c *compileConfig) { c.logger = l })
}

// WithMaxContextBytes bounds the bytes of copied files (default
// DefaultMaxContextBytes).
func WithMaxContextBytes(n int64) CompileOption {
	return compileOption(func(c *compileConfig) { c.maxBytes = n })
}

// WithMaxFiles bounds the number of copied entries (default
// DefaultMaxFiles).
func WithMaxFiles(n int) CompileOption {
	return compileOption(func(c *compileConfig) { c.maxFiles = n })
}

// WithSpillThreshold is the largest zip held in memory (Artifact.Zip);
// a larger one goes to a temporary file (Artifact.Path). Default
// DefaultSpillThreshold.
func WithSpillThreshold(n int64) CompileOption {
	return compileOption(func(c *compileConfig) { c.spill = n })
}

// WithTempDir is where a large zip's temporary file goes (default
// os.TempDir()).
func WithTempDir(dir string) CompileOption {
	return compileOption(func(c *compileConfig) { c.tempDir = dir })
}

// Artifact is a compiled template: a zip with the Dockerfile layer
// (ptemplate.DockerfileName), the spec (ptemplate.SpecName) and the copied
// files under ptemplate.ContextDir.
type Artifact struct {
	// Zip holds the zip when it is at most the spill threshold; otherwise
	// it is nil and Path names a 0600 temporary file holding it, which
	// Close removes.
	Zip  []byte
	Path string
	// Size is the zip's length in bytes.
	Size int64
	// SHA256 is the hex SHA-256 of the zip: the artifact's identity.
	SHA256 string
	// Spec is the build spec (also in the zip).
	Spec *ptemplate.Spec
	// Dockerfile is the Dockerfile layer (also in the zip).
	Dockerfile string
	// Warnings lists the files that may hold secrets, as WithWarn got
	// them.
	Warnings []string
	// Files counts the copied files and links; Bytes is their size.
	Files int
	Bytes int64
}

// entry is one copied context path.
type entry struct {
	rel    string
	fi     fs.FileInfo
	target string // a link's target
}

type collector struct {
	ctx      context.Context
	root     *os.Root
	ig       *ignorer
	cfg      *compileConfig
	entries  map[string]*entry
	isDir    map[string]bool // copy source -> is a directory
	count    int             // entries, directories included (the limit)
	files    int             // files and links
	bytes    int64
	warned   map[string]bool
	warnings []string
}

// Compile checks t, reads the files its Copy steps name from contextDir
// (which may be "" when there is none) and returns the artifact. Every
// mistake recorded by the builder is returned at once (errors.Join of
// *Error); context problems stop the compile at the first.
func Compile(ctx context.Context, t *Template, contextDir string, opts ...CompileOption) (*Artifact, error) {
	cfg := &compileConfig{maxBytes: DefaultMaxContextBytes, maxFiles: DefaultMaxFiles, spill: DefaultSpillThreshold}
	for _, o := range opts {
		o.applyCompile(cfg)
	}
	t = t.orEmpty()
	errs := slices.Clone(t.errs)
	if len(t.steps) > ptemplate.MaxSteps {
		errs = append(errs, stepErr(-1, "steps", "a template has at most 256 steps"))
	}
	if len(errs) > 0 {
		return nil, joinErrs(errs)
	}
	c := &collector{ctx: ctx, cfg: cfg, entries: map[string]*entry{}, isDir: map[string]bool{}, warned: map[string]bool{}}
	hasCopy := slices.ContainsFunc(t.steps, func(s step) bool { return s.copy != nil })
	if hasCopy {
		if contextDir == "" {
			return nil, pathErr(ErrContextPath, ".", "Copy steps need a context directory")
		}
		root, err := os.OpenRoot(contextDir)
		if err != nil {
			return nil, pathErr(ErrContextPath, ".", "the context directory cannot be opened")
		}
		defer root.Close()
		c.root = root
		if c.ig, err = loadIgnore(root); err != nil {
			return nil, err
		}
		for i, s := range t.steps {
			if s.copy == nil {
				continue
			}
			if err := c.copySource(s.copy.src); err != nil {
				var e *Error
				if errors.As(err, &e) && e.Step < 0 {
					e.Step = i
				}
				return nil, err
			}
		}
	}
	spec := t.spec(func(src string) bool { return c.isDir[src] })
	specJSON, err := ptemplate.Encode(spec)
	if err != nil {
		return nil, &Error{Kind: ErrInvalidTemplate, Step: -1, Field: "spec", Reason: err.Error()}
	}
	a := &Artifact{Spec: spec, Dockerfile: renderDockerfile(spec), Warnings: c.warnings, Files: c.files, Bytes: c.bytes}
	if err := c.writeZip(a, specJSON); err != nil {
		return nil, err
	}
	return a, nil
}

// copySource checks src's path (no link, no special file on the way) and
// collects what it names.
func (c *collector) copySource(src string) error {
	if src == "." {
		fi, err := c.root.Lstat(".")
		if err != nil || !fi.IsDir() {
			return pathErr(ErrContextPath, ".", "the context directory cannot be read")
		}
		c.isDir[src] = true
		return c.walkDir(".", ".", fi, patternmatcher.MatchInfo{})
	}
	parts := strings.Split(src, "/")
	for i := range parts {
		rel := strings.Join(parts[:i+1], "/")
		fi, err := c.root.Lstat(rel)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return pathErr(ErrContextPath, src, "does not exist in the context")
		case err != nil:
			return pathErr(ErrContextPath, src, "cannot be read")
		case fi.Mode()&fs.ModeSymlink != 0 && i < len(parts)-1:
			return pathErr(ErrUnsafeSymlink, src, "a symbolic link is in the path of a Copy source")
		case fi.Mode()&fs.ModeSymlink != 0:
			return pathErr(ErrUnsafeSymlink, src, "a Copy source is a symbolic link")
		case i < len(parts)-1 && !fi.IsDir():
			return pathErr(ErrContextPath, src, "does not exist in the context")
		case i < len(parts)-1:
			continue
		}
		excluded, info, err := c.ig.excluded(src, patternmatcher.MatchInfo{})
		if err != nil {
			return err
		}
		if fi.IsDir() {
			c.isDir[src] = true
			if excluded && !c.ig.mayReinclude(src) {
				return pathErr(ErrContextPath, src, "is excluded by .dockerignore")
			}
			if !excluded {
				if err := c.add(src, fi, ""); err != nil {
					return err
				}
			}
			return c.walkDir(src, src, fi, info)
		}
		if excluded {
			return pathErr(ErrContextPath, src, "is excluded by .dockerignore")
		}
		return c.addLeaf(src, src, fi)
	}
	return nil
}

// walkDir collects the entries under dir (tree is the Copy source it
// belongs to), in name order, applying .dockerignore.
func (c *collector) walkDir(tree, dir string, dirFI fs.FileInfo, info patternmatcher.MatchInfo) error {
	if err := c.ctx.Err(); err != nil {
		return err
	}
	f, err := openChecked(c.root, dir, dirFI)
	if err != nil {
		return err
	}
	names, err := f.Readdirnames(-1)
	f.Close()
	if err != nil {
		return pathErr(ErrContextPath, dir, "cannot be read")
	}
	slices.Sort(names)
	for _, name := range names {
		rel := name
		if dir != "." {
			rel = dir + "/" + name
		}
		fi, err := c.root.Lstat(rel)
		if err != nil {
			return pathErr(ErrContextPath, rel, "cannot be read")
		}
		var parent patternmatcher.MatchInfo
		if dir != "." {
			parent = info
		}
		excluded, childInfo, err := c.ig.excluded(rel, parent)
		if err != nil {
			return err
		}
		if fi.IsDir() {
			if excluded && !c.ig.mayReinclude(rel) {
				continue
			}
			if !excluded {
				if err := c.add(rel, fi, ""); err != nil {
					return err
				}
			}
			if err := c.walkDir(tree, rel, fi, childInfo); err != nil {
				return err
			}
			continue
		}
		if excluded {
			continue
		}
		if err := c.addLeaf(tree, rel, fi); err != nil {
			return err
		}
	}
	return nil
}

// addLeaf collects a file or a link (anything else is refused).
func (c *collector) addLeaf(tree, rel string, fi fs.FileInfo) error {
	switch {
	case fi.Mode().IsRegular():
		return c.add(rel, fi, "")
	case fi.Mode()&fs.ModeSymlink != 0:
		target, err := c.root.Readlink(rel)
		if err != nil {
			return pathErr(ErrContextPath, rel, "cannot be read")
		}
		if !linkStaysIn(tree, rel, target) {
			return pathErr(ErrUnsafeSymlink, rel, "a symbolic link's target must be relative and stay inside the copied tree")
		}
		return c.add(rel, fi, target)
	default:
		return pathErr(ErrSpecialFile, rel, "devices, fifos and sockets cannot be copied")
	}
}

// linkStaysIn reports whether a link at rel with target stays inside the
// tree: a relative target whose ".." all come first (a ".." after a name
// could climb out of a directory reached through another link), and
// whose lexical resolution is tree or under it.
func linkStaysIn(tree, rel, target string) bool {
	if target == "" || path.IsAbs(target) || strings.ContainsRune(target, 0) {
		return false
	}
	named := false
	for _, part := range strings.Split(target, "/") {
		switch part {
		case "", ".":
		case "..":
			if named {
				return false
			}
		default:
			named = true
		}
	}
	resolved := path.Join(path.Dir(rel), target)
	if tree == "." {
		return resolved != ".." && !strings.HasPrefix(resolved, "../")
	}
	return resolved == tree || strings.HasPrefix(resolved, tree+"/")
}

// add records an entry once, warning first about a likely secret, within
// the limits.
func (c *collector) add(rel string, fi fs.FileInfo, target string) error {
	if _, ok := c.entries[rel]; ok {
		return nil
	}
	if !fi.IsDir() {
		c.warnSecret(rel)
	}
	c.count++
	switch {
	case fi.Mode().IsRegular():
		c.files++
		c.bytes += fi.Size()
	case target != "":
		c.files++
		c.bytes += int64(len(target))
	}
	if c.count > c.cfg.maxFiles {
		return pathErr(ErrContextTooLarge, "", fmt.Sprintf("more than %d entries", c.cfg.maxFiles))
	}
	if c.bytes > c.cfg.maxBytes {
		return pathErr(ErrContextTooLarge, "", fmt.Sprintf("more than %d bytes", c.cfg.maxBytes))
	}
	c.entries[rel] = &entry{rel: rel, fi: fi, target: target}
	return nil
}

// secretDirs hold credentials as a whole; secret files are named by
// secretFile.
var secretDirs = []string{".git", ".aws", ".ssh"}

func secretFile(name string) bool {
	return name == ".env" || strings.HasPrefix(name, ".env.") || strings.HasSuffix(name, ".pem") || strings.HasSuffix(name, ".key")
}

// warnSecret warns, once per file or secret directory, before a likely
// secret is packaged.
func (c *collector) warnSecret(rel string) {
	parts := strings.Split(rel, "/")
	what := ""
	for i, p := range parts[:len(parts)-1] {
		if slices.Contains(secretDirs, p) {
			what = strings.Join(parts[:i+1], "/") + "/"
			break
		}
	}
	if what == "" && secretFile(parts[len(parts)-1]) {
		what = rel
	}
	if what == "" || c.warned[what] {
		return
	}
	c.warned[what] = true
	msg := fmt.Sprintf("packaging %q, which may hold secrets: any code in a sandbox of the template can read it (exclude it in .dockerignore)", what)
	c.warnings = append(c.warnings, msg)
	switch {
	case c.cfg.warn != nil:
		c.cfg.warn(msg)
	case c.cfg.logger != nil:
		c.cfg.logger.Warn("rayito: template: packaging a file that may hold secrets", slog.String("path", what))
	}
}

// openChecked opens rel inside root and checks that it is the file
// Lstat saw (not something swapped in since): os.Root keeps the open
// inside the context, SameFile keeps it on the checked file.
func openChecked(root *os.Root, rel string, want fs.FileInfo) (*os.File, error) {
	f, err := root.Open(rel)
	if err != nil {
		return nil, pathErr(ErrContextPath, rel, "cannot be opened")
	}
	got, err := f.Stat()
	if err != nil || !os.SameFile(got, want) {
		f.Close()
		return nil, pathErr(ErrContextPath, rel, "changed while the context was read")
	}
	return f, nil
}

// zipEntry is one entry of the artifact.
type zipEntry struct {
	name string
	mode fs.FileMode
	data []byte // Dockerfile, template.json, a link's target
	file *entry // a context file
}

// msdos1980 is 1980-01-01 00:00 as an MS-DOS date (day 1, month 1).
const msdos1980 = 1<<5 | 1

func (c *collector) writeZip(a *Artifact, specJSON []byte) error {
	ents := map[string]*zipEntry{
		ptemplate.DockerfileName: {name: ptemplate.DockerfileName, mode: 0o644, data: []byte(a.Dockerfile)},
		ptemplate.SpecName:       {name: ptemplate.SpecName, mode: 0o644, data: specJSON},
	}
	addDir := func(name string) { ents[name] = &zipEntry{name: name, mode: fs.ModeDir | 0o755} }
	for rel, e := range c.entries {
		name := ptemplate.ContextDir + rel
		switch {
		case e.fi.IsDir():
			addDir(name + "/")
		case e.target != "":
			ents[name] = &zipEntry{name: name, mode: fs.ModeSymlink | 0o777, data: []byte(e.target)}
		default:
			mode := fs.FileMode(0o644)
			if e.fi.Mode()&0o111 != 0 {
				mode = 0o755
			}
			ents[name] = &zipEntry{name: name, mode: mode, file: e}
		}
		for d := path.Dir(rel); d != "."; d = path.Dir(d) {
			addDir(ptemplate.ContextDir + d + "/")
		}
	}
	if len(c.entries) > 0 {
		addDir(ptemplate.ContextDir)
	}
	names := slices.Sorted(maps.Keys(ents))

	out := &spillWriter{limit: c.cfg.spill, dir: c.cfg.tempDir}
	h := sha256.New()
	zw := zip.NewWriter(io.MultiWriter(out, h))
	zw.RegisterCompressor(zip.Deflate, func(w io.Writer) (io.WriteCloser, error) {
		return flate.NewWriter(w, deflateLevel)
	})
	fail := func(err error) error {
		out.discard()
		return err
	}
	for _, n := range names {
		if err := c.ctx.Err(); err != nil {
			return fail(err)
		}
		ze := ents[n]
		fh := &zip.FileHeader{Name: n, Method: zip.Deflate, ModifiedDate: msdos1980}
		fh.SetMode(ze.mode)
		if ze.mode.IsDir() {
			fh.Method = zip.Store
		}
		w, err := zw.CreateHeader(fh)
		if err != nil {
			return fail(zipErr(err))
		}
		if ze.file == nil {
			if _, err := w.Write(ze.data); err != nil {
				return fail(zipErr(err))
			}
			continue
		}
		if err := c.copyFile(w, ze.file); err != nil {
			return fail(err)
		}
	}
	if err := zw.Close(); err != nil {
		return fail(zipErr(err))
	}
	zipBytes, p, size, err := out.finish()
	if err != nil {
		return fail(zipErr(err))
	}
	a.Zip, a.Path, a.Size, a.SHA256 = zipBytes, p, size, hex.EncodeToString(h.Sum(nil))
	return nil
}

func zipErr(err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return &Error{Kind: ErrContextPath, Step: -1, Reason: "the artifact cannot be written"}
}

// copyFile copies exactly the size Lstat saw from the checked file.
func (c *collector) copyFile(w io.Writer, e *entry) error {
	f, err := openChecked(c.root, e.rel, e.fi)
	if err != nil {
		return err
	}
	defer f.Close()
	n, err := io.CopyN(w, f, e.fi.Size())
	if err != nil && !errors.Is(err, io.EOF) {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			return pathErr(ErrContextPath, e.rel, "cannot be read")
		}
		return zipErr(err)
	}
	var one [1]byte
	if k, _ := f.Read(one[:]); n != e.fi.Size() || k != 0 {
		return pathErr(ErrContextPath, e.rel, "changed while the context was read")
	}
	return nil
}

// spillWriter keeps up to limit bytes in memory, then moves to a 0600
// temporary file.
type spillWriter struct {
	buf   bytes.Buffer
	f     *os.File
	limit int64
	dir   string
	n     int64
}

func (s *spillWriter) Write(p []byte) (int, error) {
	if s.f == nil && int64(s.buf.Len()+len(p)) > s.limit {
		f, err := os.CreateTemp(s.dir, "rayito-template-*.zip")
		if err != nil {
			return 0, err
		}
		s.f = f
		if _, err := f.Write(s.buf.Bytes()); err != nil {
			return 0, err
		}
		s.buf = bytes.Buffer{}
	}
	s.n += int64(len(p))
	if s.f != nil {
		return s.f.Write(p)
	}
	return s.buf.Write(p)
}

func (s *spillWriter) finish() ([]byte, string, int64, error) {
	if s.f == nil {
		return s.buf.Bytes(), "", s.n, nil
	}
	if err := s.f.Close(); err != nil {
		return nil, "", 0, err
	}
	return nil, s.f.Name(), s.n, nil
}

func (s *spillWriter) discard() {
	if s.f != nil {
		s.f.Close()
		os.Remove(s.f.Name())
	}
}

// WriteTo writes the zip to w.
func (a *Artifact) WriteTo(w io.Writer) (int64, error) {
	if a.Path == "" {
		n, err := w.Write(a.Zip)
		return int64(n), err
	}
	f, err := os.Open(a.Path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	return io.Copy(w, f)
}

// Save writes the zip to path (mode 0600), through a temporary file in
// the same directory renamed into place.
func (a *Artifact) Save(path string) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = a.WriteTo(f)
	if err == nil {
		err = f.Chmod(0o600)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
	}
	return err
}

// Close removes the temporary file of a large artifact; the artifact's
// zip is gone after it.
func (a *Artifact) Close() error {
	if a.Path == "" {
		return nil
	}
	err := os.Remove(a.Path)
	a.Path = ""
	return err
}

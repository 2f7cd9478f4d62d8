// Package templates keeps the local platform's templates: each a root
// filesystem layer built from a template artifact (proto/template) in a
// sandbox of its own, which RunMicrovm then lays over the host's /usr
// (launcher.TemplateLayer).
//
// Layout, under the platform's state directory (0700):
//
//	templates/<name>/status.json       the localplatform.Template
//	templates/<name>/build.log         the last build's output (0600)
//	templates/<name>/layers/<id>/      a layer: usr/ opt/ home/ runtime.json
//	templates/<name>/builds/<id>/      a build sandbox's directory
//
// A build never replaces a ready layer in place: a new one is made beside
// it and the status switches to it once it is complete. Layers stay while
// the platform runs (a sandbox may still have one mounted); at start the
// platform removes every layer the statuses do not name and every build
// left by a platform that stopped during it (its status says
// "interrupted").
package templates

import (
	"archive/zip"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/rayito-dev/rayito/localvm/internal/registry"
	"github.com/rayito-dev/rayito/proto/localplatform"
	ptemplate "github.com/rayito-dev/rayito/proto/template"
)

// Limits.
const (
	maxEntries       = 100_000
	maxUncompressed  = 2 << 30
	maxLinkTarget    = 4096
	maxLog           = 16 << 20
	maxConcurrent    = 2
	defaultBuildTime = 30 * time.Minute
)

// Errors. Each answers a fixed text.
var (
	ErrInvalid  = errors.New("invalid template request")
	ErrNotFound = errors.New("no such template")
	ErrBusy     = errors.New("the template is being built")
	ErrTooMany  = errors.New("too many builds at once")
	ErrNoRoot   = errors.New("templates need the root local platform")
)

// Store is the platform's templates. It is safe for concurrent use.
type Store struct {
	dir     string
	log     *slog.Logger
	builder Builder
	timeout time.Duration
	now     func() time.Time

	mu       sync.Mutex
	building map[string]bool
	inUse    func() map[string]bool
	wg       sync.WaitGroup
	base     context.Context
	cancel   context.CancelFunc
}

// Builder runs a build: the steps of spec in a sandbox with layer in
// build mode, writing their output to log. It returns nil, or a *BuildError.
type Builder interface {
	Build(ctx context.Context, layer string, spec *ptemplate.Spec, log io.Writer) error
}

// BuildError is a failed build: a closed reason, the step, fixed text.
type BuildError struct {
	Reason  string
	Step    int
	Message string
}

func (e *BuildError) Error() string { return e.Reason + ": " + e.Message }

// Options configure a Store.
type Options struct {
	// StateDir is the platform's state directory.
	StateDir string
	Logger   *slog.Logger
	// Builder builds layers; nil: builds fail with ErrNoRoot.
	Builder Builder
	// BuildTimeout bounds a build (default 30 minutes).
	BuildTimeout time.Duration
}

// Open opens the store, marks builds a stopped platform left as FAILED
// (interrupted) and removes the layers no status names.
func Open(opts Options) (*Store, error) {
	s := &Store{dir: filepath.Join(opts.StateDir, "templates"), log: opts.Logger, builder: opts.Builder,
		timeout: opts.BuildTimeout, now: time.Now, building: map[string]bool{}}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.timeout <= 0 {
		s.timeout = defaultBuildTime
	}
	if err := os.MkdirAll(s.dir, 0o700); err != nil {
		return nil, err
	}
	if err := os.Chmod(s.dir, 0o700); err != nil {
		return nil, err
	}
	s.base, s.cancel = context.WithCancel(context.Background())
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		if e.IsDir() && ptemplate.ValidName(e.Name()) {
			s.recover(e.Name())
		}
	}
	return s, nil
}

// Close stops the builds in progress and waits for them.
func (s *Store) Close() {
	s.cancel()
	s.wg.Wait()
}

// recover ends what a stopped platform left of name.
func (s *Store) recover(name string) {
	st, err := s.status(name)
	if err != nil {
		return
	}
	if st.State == localplatform.TemplateBuilding {
		st.State, st.Reason, st.Message, st.Step = localplatform.TemplateFailed, localplatform.TemplateReasonInterrupted, "the platform stopped during the build", -1
		st.UpdatedAt = s.now().UTC()
		_ = s.writeStatus(name, st, "")
	}
	_ = os.RemoveAll(filepath.Join(s.dir, name, "builds"))
}

// SetInUse gives the store the layers sandboxes run (registry
// LayersInUse): Sweep keeps them.
func (s *Store) SetInUse(f func() map[string]bool) {
	s.mu.Lock()
	s.inUse = f
	s.mu.Unlock()
}

// Sweep removes the layers that are neither a template's current one, nor
// being built, nor run by a sandbox. The platform sweeps once its
// sandboxes are adopted, and after each build and delete.
func (s *Store) Sweep() {
	s.mu.Lock()
	defer s.mu.Unlock()
	entries, _ := os.ReadDir(s.dir)
	for _, e := range entries {
		if e.IsDir() && ptemplate.ValidName(e.Name()) {
			s.sweepLocked(e.Name())
		}
	}
}

// sweepLocked is Sweep for one template; s.mu is held.
func (s *Store) sweepLocked(name string) {
	if s.building[name] {
		return
	}
	var used map[string]bool
	if s.inUse != nil {
		used = s.inUse()
	}
	keep, _ := s.layerOf(name)
	layers, _ := os.ReadDir(filepath.Join(s.dir, name, "layers"))
	for _, l := range layers {
		p := filepath.Join(s.dir, name, "layers", l.Name())
		if p != keep && !used[p] {
			_ = os.RemoveAll(p)
		}
	}
}

type statusFile struct {
	localplatform.Template
	Layer string `json:"layer,omitempty"` // the ready layer's id
}

func (s *Store) status(name string) (*statusFile, error) {
	b, err := os.ReadFile(filepath.Join(s.dir, name, "status.json"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	var st statusFile
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, fmt.Errorf("templates: %s: status unreadable", name)
	}
	return &st, nil
}

// writeStatus writes st atomically; layer, when not "", becomes its layer.
func (s *Store) writeStatus(name string, st *statusFile, layer string) error {
	if layer != "" {
		st.Layer = layer
	}
	b, err := json.Marshal(st)
	if err != nil {
		return err
	}
	p := filepath.Join(s.dir, name, "status.json")
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, p)
}

func (s *Store) layerOf(name string) (string, bool) {
	st, err := s.status(name)
	if err != nil || st.Layer == "" || !validID(st.Layer) {
		return "", false
	}
	return filepath.Join(s.dir, name, "layers", st.Layer), true
}

// Layer implements registry.Templates: the ready layer of name.
func (s *Store) Layer(name string) (string, error) {
	if !ptemplate.ValidName(name) {
		return "", registry.ErrNoTemplate
	}
	if dir, ok := s.layerOf(name); ok {
		return dir, nil
	}
	return "", registry.ErrNoTemplate
}

// Get returns name's state.
func (s *Store) Get(name string) (*localplatform.Template, error) {
	if !ValidName(name) {
		return nil, ErrNotFound
	}
	st, err := s.status(name)
	if err != nil {
		return nil, err
	}
	out := st.Template
	out.Runnable = st.Layer != ""
	return &out, nil
}

// List returns every template, by name.
func (s *Store) List() ([]localplatform.Template, error) {
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return nil, err
	}
	out := []localplatform.Template{}
	for _, e := range entries {
		if !ValidName(e.Name()) {
			continue
		}
		if st, err := s.status(e.Name()); err == nil {
			t := st.Template
			t.Runnable = st.Layer != ""
			out = append(out, t)
		}
	}
	return out, nil
}

// Logs opens the last build's log.
func (s *Store) Logs(name string) (*os.File, error) {
	if !ValidName(name) {
		return nil, ErrNotFound
	}
	f, err := os.Open(filepath.Join(s.dir, name, "build.log"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, ErrNotFound
	}
	return f, err
}

// Delete removes name; not while it is being built. Sandboxes running it
// keep their mounts; its layers go at the next platform start.
func (s *Store) Delete(name string) error {
	if !ValidName(name) {
		return ErrNotFound
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.building[name] {
		return ErrBusy
	}
	if _, err := s.status(name); err != nil {
		return err
	}
	if err := os.Remove(filepath.Join(s.dir, name, "status.json")); err != nil {
		return err
	}
	s.sweepLocked(name)
	return nil
}

// ValidName reports whether name may name a template here: a template name
// other than the platform's own images.
func ValidName(name string) bool {
	return ptemplate.ValidName(name) && name != localplatform.Image && name != localplatform.RootImage
}

// Put reads an artifact from r (at most localplatform.MaxTemplateArtifact
// bytes; wantSHA, when not "", must be its hex sha256), checks it and
// starts its build. The same artifact already READY is not built again
// unless force.
func (s *Store) Put(ctx context.Context, name string, r io.Reader, wantSHA string, force bool) (*localplatform.Template, error) {
	if !ValidName(name) {
		return nil, fmt.Errorf("%w: a template name is 1 to %d of a-z, 0-9, '-' and '_' (not local or local-root)", ErrInvalid, ptemplate.MaxNameLen)
	}
	if s.builder == nil {
		return nil, ErrNoRoot
	}
	tmp, err := os.CreateTemp(s.dir, ".upload-*")
	if err != nil {
		return nil, err
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()
	zr, spec, sum, err := receive(tmp, r, wantSHA)
	if err != nil {
		return nil, err
	}
	done, release, err := s.claim(name, sum, force)
	if done != nil || err != nil {
		return done, err
	}
	layer, id, st, err := s.stage(name, zr, spec, sum)
	if err != nil {
		release()
		return nil, err
	}
	out := st.Template
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.run(name, layer, id, spec, st)
		release()
		s.Sweep()
	}()
	return &out, nil
}

// receive copies the artifact from r into tmp and checks it: its size,
// its sha256 against wantSHA (when not ""), a zip with a valid spec on
// the local platform's base.
func receive(tmp *os.File, r io.Reader, wantSHA string) (*zip.Reader, *ptemplate.Spec, string, error) {
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(tmp, h), io.LimitReader(r, localplatform.MaxTemplateArtifact+1))
	if err != nil {
		return nil, nil, "", fmt.Errorf("%w: the artifact could not be read", ErrInvalid)
	}
	if n > localplatform.MaxTemplateArtifact {
		return nil, nil, "", fmt.Errorf("%w: the artifact is larger than %d bytes", ErrInvalid, localplatform.MaxTemplateArtifact)
	}
	sum := hex.EncodeToString(h.Sum(nil))
	if wantSHA != "" && !strings.EqualFold(wantSHA, sum) {
		return nil, nil, "", fmt.Errorf("%w: the artifact's sha256 is not the one announced", ErrInvalid)
	}
	zr, err := zip.NewReader(tmp, n)
	if err != nil {
		return nil, nil, "", fmt.Errorf("%w: the artifact is not a zip", ErrInvalid)
	}
	spec, err := readSpec(zr)
	if err != nil {
		return nil, nil, "", err
	}
	if spec.Base != localplatform.Image {
		return nil, nil, "", fmt.Errorf("%w: the local platform builds templates on %q only (FromBaseImage(%q))", ErrInvalid, localplatform.Image, localplatform.Image)
	}
	return zr, spec, sum, nil
}

// claim marks name as building and returns the release of that mark; or
// done, the READY template, when it was built from the same artifact and
// force is not set; or ErrBusy, ErrTooMany.
func (s *Store) claim(name, sum string, force bool) (done *localplatform.Template, release func(), err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.building[name] {
		return nil, nil, ErrBusy
	}
	if len(s.building) >= maxConcurrent {
		return nil, nil, ErrTooMany
	}
	if st, err := s.status(name); err == nil && !force && st.State == localplatform.TemplateReady && st.SHA256 == sum {
		out := st.Template
		out.Unchanged = true
		return &out, nil, nil
	}
	s.building[name] = true
	return nil, func() {
		s.mu.Lock()
		delete(s.building, name)
		s.mu.Unlock()
	}, nil
}

// stage makes the new layer's directory with the context and the runtime
// configuration, and records the build as BUILDING (the ready layer, if
// any, stays current meanwhile). On error nothing of it is left.
func (s *Store) stage(name string, zr *zip.Reader, spec *ptemplate.Spec, sum string) (layer, id string, st *statusFile, err error) {
	id = newID()
	tdir := filepath.Join(s.dir, name)
	layer = filepath.Join(tdir, "layers", id)
	if err := os.MkdirAll(filepath.Join(tdir, "layers"), 0o700); err != nil {
		return "", "", nil, err
	}
	if err := os.Mkdir(layer, 0o755); err != nil {
		return "", "", nil, err
	}
	dir := layer // the returns below clear layer
	defer func() {
		if err != nil {
			_ = os.RemoveAll(dir)
		}
	}()
	if err := extractContext(zr, filepath.Join(layer, "context")); err != nil {
		return "", "", nil, err
	}
	rt, err := ptemplate.EncodeRuntime(ptemplate.RuntimeOf(name, spec))
	if err == nil {
		err = os.WriteFile(filepath.Join(layer, "runtime.json"), rt, 0o644)
	}
	if err != nil {
		return "", "", nil, err
	}
	prev, _ := s.status(name)
	now := s.now().UTC()
	st = &statusFile{Template: localplatform.Template{Name: name, State: localplatform.TemplateBuilding, SHA256: sum, Step: -1, CreatedAt: now, UpdatedAt: now}}
	if prev != nil {
		st.CreatedAt = prev.CreatedAt
		st.Layer = prev.Layer // still the ready one while this builds
	}
	if err := s.writeStatus(name, st, ""); err != nil {
		return "", "", nil, err
	}
	return layer, id, st, nil
}

// run builds layer and records the outcome.
func (s *Store) run(name, layer, id string, spec *ptemplate.Spec, st *statusFile) {
	ctx, cancel := context.WithTimeout(s.base, s.timeout)
	defer cancel()
	logPath := filepath.Join(s.dir, name, "build.log")
	logf, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	var berr error
	if err != nil {
		berr = &BuildError{Reason: localplatform.TemplateReasonInternal, Step: -1, Message: "the build log could not be opened"}
	} else {
		w := &capped{w: logf, left: maxLog}
		berr = s.builder.Build(ctx, layer, spec, w)
		_ = logf.Close()
	}
	if berr == nil {
		berr = finishLayer(layer)
	}
	st.UpdatedAt = s.now().UTC()
	if berr != nil {
		var be *BuildError
		if !errors.As(berr, &be) {
			be = &BuildError{Reason: localplatform.TemplateReasonInternal, Step: -1, Message: "the build failed"}
		}
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			be = &BuildError{Reason: localplatform.TemplateReasonBuildTimeout, Step: be.Step, Message: fmt.Sprintf("the build took longer than %s", s.timeout)}
		}
		st.State, st.Reason, st.Step, st.Message = localplatform.TemplateFailed, be.Reason, be.Step, be.Message
		_ = os.RemoveAll(layer)
		if err := s.writeStatus(name, st, ""); err != nil {
			s.log.Error("templates: cannot record a failed build", "template", name)
		}
		s.log.Info("templates: build failed", "template", name, "reason", be.Reason, "step", be.Step)
		return
	}
	st.State, st.Reason, st.Step, st.Message = localplatform.TemplateReady, "", -1, ""
	if err := s.writeStatus(name, st, id); err != nil {
		_ = os.RemoveAll(layer)
		s.log.Error("templates: cannot record a finished build", "template", name)
		return
	}
	s.log.Info("templates: build done", "template", name)
}

// readSpec finds, checks and decodes the artifact's spec, and checks every
// entry of the zip.
func readSpec(zr *zip.Reader) (*ptemplate.Spec, error) {
	if len(zr.File) > maxEntries {
		return nil, fmt.Errorf("%w: more than %d entries", ErrInvalid, maxEntries)
	}
	var total uint64
	var specFile *zip.File
	seen := map[string]bool{}
	kinds := map[string]fs.FileMode{} // context paths (without the trailing /) by type
	for _, f := range zr.File {
		name := f.Name
		key := strings.TrimSuffix(name, "/")
		if seen[name] || seen[key] {
			return nil, fmt.Errorf("%w: a duplicate entry", ErrInvalid)
		}
		seen[name], seen[key] = true, true
		if rel, ok := strings.CutPrefix(key, strings.TrimSuffix(ptemplate.ContextDir, "/")+"/"); ok {
			kinds[rel] = f.Mode().Type()
		}
		total += f.UncompressedSize64
		if total > maxUncompressed {
			return nil, fmt.Errorf("%w: more than %d bytes uncompressed", ErrInvalid, maxUncompressed)
		}
		switch {
		case name == ptemplate.SpecName:
			specFile = f
		case name == ptemplate.DockerfileName:
		case strings.HasPrefix(name, ptemplate.ContextDir):
			rel := strings.TrimSuffix(strings.TrimPrefix(name, ptemplate.ContextDir), "/")
			if rel != "" && !ptemplate.ValidSrc(rel) {
				return nil, fmt.Errorf("%w: an entry's path leaves the context or is not clean", ErrInvalid)
			}
			m := f.Mode()
			if !m.IsDir() && !m.IsRegular() && m&fs.ModeSymlink == 0 {
				return nil, fmt.Errorf("%w: an entry is neither a file, a directory nor a link", ErrInvalid)
			}
		default:
			return nil, fmt.Errorf("%w: an entry outside Dockerfile, template.json and context/", ErrInvalid)
		}
	}
	// No entry under a link: extracting it would go through the link (a
	// link that stays inside where it is written may lead elsewhere once
	// it sits under another link).
	for rel := range kinds {
		for p := path.Dir(rel); p != "." && p != "/"; p = path.Dir(p) {
			if kinds[p]&fs.ModeSymlink != 0 {
				return nil, fmt.Errorf("%w: an entry lies under a link", ErrInvalid)
			}
		}
	}
	if specFile == nil {
		return nil, fmt.Errorf("%w: no %s", ErrInvalid, ptemplate.SpecName)
	}
	rc, err := specFile.Open()
	if err != nil {
		return nil, fmt.Errorf("%w: %s unreadable", ErrInvalid, ptemplate.SpecName)
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, ptemplate.MaxSpecLen+1))
	if err != nil {
		return nil, fmt.Errorf("%w: %s unreadable", ErrInvalid, ptemplate.SpecName)
	}
	spec, err := ptemplate.Decode(b)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	for i, st := range spec.Steps {
		if st.Copy != nil && st.Copy.Src != "." && !seen[ptemplate.ContextDir+st.Copy.Src] && !seen[ptemplate.ContextDir+st.Copy.Src+"/"] {
			return nil, fmt.Errorf("%w: steps[%d]: copy.src is not in the artifact's context", ErrInvalid, i)
		}
	}
	return spec, nil
}

// extractContext writes the zip's context/ entries under dst (0755 dirs,
// files 0644 or 0755, links kept as links when they stay inside the
// context), owned by the platform.
func extractContext(zr *zip.Reader, dst string) error {
	if err := os.Mkdir(dst, 0o755); err != nil {
		return err
	}
	for _, f := range zr.File {
		rel, ok := strings.CutPrefix(f.Name, ptemplate.ContextDir)
		rel = strings.TrimSuffix(rel, "/")
		if !ok || rel == "" {
			continue
		}
		out := filepath.Join(dst, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
			return fmt.Errorf("%w: an entry's parent is not a directory", ErrInvalid)
		}
		m := f.Mode()
		switch {
		case m.IsDir():
			if err := os.Mkdir(out, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
				return fmt.Errorf("%w: a directory entry clashes", ErrInvalid)
			}
		case m&fs.ModeSymlink != 0:
			target, err := readEntry(f, maxLinkTarget)
			if err != nil {
				return err
			}
			t := string(target)
			if t == "" || path.IsAbs(t) || strings.ContainsRune(t, 0) || !within(path.Join(path.Dir(rel), t)) {
				return fmt.Errorf("%w: a link points outside the context", ErrInvalid)
			}
			if err := os.Symlink(t, out); err != nil {
				return fmt.Errorf("%w: a link entry clashes", ErrInvalid)
			}
		default:
			mode := fs.FileMode(0o644)
			if m.Perm()&0o111 != 0 {
				mode = 0o755
			}
			if err := writeEntry(f, out, mode); err != nil {
				return err
			}
		}
	}
	return nil
}

// within reports whether the cleaned slash path p stays inside the
// context.
func within(p string) bool {
	p = path.Clean(p)
	return p != ".." && !strings.HasPrefix(p, "../") && !path.IsAbs(p)
}

func readEntry(f *zip.File, limit int64) ([]byte, error) {
	rc, err := f.Open()
	if err != nil {
		return nil, fmt.Errorf("%w: an entry is unreadable", ErrInvalid)
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, limit+1))
	if err != nil || int64(len(b)) > limit {
		return nil, fmt.Errorf("%w: an entry is unreadable or too long", ErrInvalid)
	}
	return b, nil
}

func writeEntry(f *zip.File, out string, mode fs.FileMode) error {
	rc, err := f.Open()
	if err != nil {
		return fmt.Errorf("%w: an entry is unreadable", ErrInvalid)
	}
	defer rc.Close()
	w, err := os.OpenFile(out, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return fmt.Errorf("%w: a file entry clashes", ErrInvalid)
	}
	// The size was bounded by readSpec; the reader checks the CRC.
	if _, err := io.Copy(w, io.LimitReader(rc, maxUncompressed)); err != nil {
		w.Close()
		return fmt.Errorf("%w: an entry is corrupt", ErrInvalid)
	}
	return w.Close()
}

// finishLayer makes a built layer the platform's: the build's scratch
// (work/, context/) goes, every entry of usr/, opt/ and home/ becomes
// root's without set-id bits (sandboxes see it read-only; the launcher
// copies home/ for each sandbox's user).
func finishLayer(layer string) error {
	for _, d := range []string{"work", "context"} {
		if err := os.RemoveAll(filepath.Join(layer, d)); err != nil {
			return &BuildError{Reason: localplatform.TemplateReasonInternal, Step: -1, Message: "the build's scratch could not be removed"}
		}
	}
	for _, d := range []string{"usr", "opt", "home"} {
		err := filepath.WalkDir(filepath.Join(layer, d), func(p string, e fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if err := os.Lchown(p, 0, 0); err != nil {
				return err
			}
			info, err := e.Info()
			if err != nil {
				return err
			}
			if m := info.Mode(); m&(fs.ModeSetuid|fs.ModeSetgid) != 0 && m&fs.ModeSymlink == 0 {
				return os.Chmod(p, m.Perm())
			}
			return nil
		})
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return &BuildError{Reason: localplatform.TemplateReasonInternal, Step: -1, Message: "the layer could not be made the platform's"}
		}
	}
	return nil
}

func newID() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func validID(id string) bool {
	if len(id) != 16 {
		return false
	}
	_, err := hex.DecodeString(id)
	return err == nil
}

// capped writes at most left bytes to w, then drops the rest (once noting
// it).
type capped struct {
	mu   sync.Mutex
	w    io.Writer
	left int64
	cut  bool
}

func (c *capped) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.left <= 0 {
		if !c.cut {
			c.cut = true
			_, _ = io.WriteString(c.w, "\n[build log cut: more than 16 MiB]\n")
		}
		return len(p), nil
	}
	q := p
	if int64(len(q)) > c.left {
		q = q[:c.left]
	}
	n, err := c.w.Write(q)
	c.left -= int64(n)
	if err != nil {
		return n, err
	}
	return len(p), nil
}

package e2b

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/rayito-dev/rayito/proto/checkpoint"
)

// A snapshot is a checkpoint of a sandbox's HomeDir in Rayito's open
// checkpoint format (package proto/checkpoint, docs/persistence.md), the
// format of rayd's HOME checkpoints: the gateway keeps it in
// Options.SnapshotDir as a directory <id>/ (0700) holding home.tar.gz
// (the archive, gzip level 1), e2b.json (the gateway's own metadata: its
// names, source sandbox, templates) and manifest.json (version 1, the
// archive's sha256 and size), written last; files are 0600, and the
// directory is made under a temporary name and renamed whole. A
// checkpoint that rayd wrote to S3 (home.tar.gz and manifest.json, without
// e2b.json), copied into SnapshotDir/snap-<name>/, is a snapshot too: of
// the gateway's default template. Creating a sandbox with the snapshot's
// id as templateID makes a sandbox of the source's template and extracts
// the archive into its HomeDir, once the archive matches its manifest and
// every entry is checked. Memory, processes and everything outside
// HomeDir are not in a snapshot. Snapshots of the gateway's former layout
// (<id>.tar beside <id>.json) are not listed; a create from one is
// refused with a message saying so, and deleteSnapshot removes it.

// SnapshotIDPrefix starts every snapshot id.
const SnapshotIDPrefix = "snap-"

// Snapshot caps: how many the directory holds (Options.MaxSnapshots) and
// their total size (Options.MaxSnapshotBytes); each is also at most
// Options.MaxCopyBytes.
const (
	DefaultMaxSnapshots     = 100
	DefaultMaxSnapshotBytes = 10 << 30
)

const (
	maxSnapshotName = 128
	maxMetaBytes    = 64 << 10
	tmpPrefix       = ".tmp-"
	// metaName is the gateway's metadata in a snapshot's directory.
	metaName = "e2b.json"
)

// snapshotMeta is <id>/e2b.json.
type snapshotMeta struct {
	SnapshotID string    `json:"snapshotID"`
	Names      []string  `json:"names"`
	TemplateID string    `json:"templateID"` // the source's E2B templateID
	Template   string    `json:"template"`   // the source's Rayito template
	SandboxID  string    `json:"sandboxID"`  // the source
	CreatedAt  time.Time `json:"createdAt"`
	SizeBytes  int64     `json:"sizeBytes"`
}

// snapshotOut is E2B's SnapshotInfo.
type snapshotOut struct {
	SnapshotID string   `json:"snapshotID"`
	Names      []string `json:"names"`
}

type snapshotReq struct {
	Name *string `json:"name"`
}

// validSnapshotID says id is a snapshot id: the prefix, then 1 to 59 of
// [a-z0-9-] (never a path separator or a dot).
func validSnapshotID(id string) bool {
	rest, ok := strings.CutPrefix(id, SnapshotIDPrefix)
	if !ok || rest == "" || len(id) > 64 {
		return false
	}
	for _, c := range rest {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '-' {
			return false
		}
	}
	return true
}

func newSnapshotID() (string, error) {
	var b [12]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return SnapshotIDPrefix + hex.EncodeToString(b[:]), nil
}

func validSnapshotName(n string) bool {
	if n == "" || len(n) > maxSnapshotName || !utf8.ValidString(n) {
		return false
	}
	for _, c := range n {
		if unicode.IsControl(c) {
			return false
		}
	}
	return true
}

// snapshotStore is the snapshot directory.
type snapshotStore struct {
	dir      string
	maxCount int
	maxBytes int64

	mu           sync.Mutex
	pendingCount int
	pendingBytes int64
}

// openSnapshotStore makes dir (0700) when missing, refuses one that is a
// symbolic link, not a directory or another user's, makes it 0700, and
// removes what an interrupted write left.
func openSnapshotStore(dir string, maxCount int, maxBytes int64) (*snapshotStore, error) {
	if !filepath.IsAbs(dir) {
		d, err := filepath.Abs(dir)
		if err != nil {
			return nil, err
		}
		dir = d
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("e2b: snapshot directory: %w", err)
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return nil, fmt.Errorf("e2b: snapshot directory: %w", err)
	}
	switch {
	case fi.Mode()&os.ModeSymlink != 0:
		return nil, fmt.Errorf("e2b: snapshot directory %s is a symbolic link: refusing it", dir)
	case !fi.IsDir():
		return nil, fmt.Errorf("e2b: snapshot directory %s is not a directory", dir)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() {
		return nil, fmt.Errorf("e2b: snapshot directory %s belongs to another user", dir)
	}
	if fi.Mode().Perm() != 0o700 {
		// Ours: made private, whatever it was.
		if err := os.Chmod(dir, 0o700); err != nil {
			return nil, fmt.Errorf("e2b: snapshot directory: %w", err)
		}
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("e2b: snapshot directory: %w", err)
	}
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), tmpPrefix) {
			_ = os.RemoveAll(filepath.Join(dir, e.Name()))
		}
	}
	return &snapshotStore{dir: dir, maxCount: maxCount, maxBytes: maxBytes}, nil
}

// file is the path of name in snapshot id's directory.
func (st *snapshotStore) file(id, name string) string { return filepath.Join(st.dir, id, name) }

// oldPath is a file of the gateway's former layout: <id>.tar, <id>.json.
func (st *snapshotStore) oldPath(id, ext string) string { return filepath.Join(st.dir, id+ext) }

func snapshotNotFound(id string) error {
	return &httpError{http.StatusNotFound, fmt.Sprintf("snapshot %q not found", id)}
}

func openNoFollow(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
}

// isDir says path is a directory itself (not a link to one).
func isDir(path string) bool {
	fi, err := os.Lstat(path)
	return err == nil && fi.IsDir()
}

// manifest reads and checks snapshot id's manifest.json.
func (st *snapshotStore) manifest(id string) (*checkpoint.Manifest, error) {
	if !validSnapshotID(id) {
		return nil, snapshotNotFound(id)
	}
	if !isDir(filepath.Join(st.dir, id)) {
		if _, err := os.Lstat(st.oldPath(id, ".json")); err == nil {
			return nil, &httpError{http.StatusBadRequest, fmt.Sprintf("snapshot %q is in the gateway's former layout (a plain tar archive), which it no longer restores: delete it (Sandbox.deleteSnapshot) and take the snapshot again", id)}
		}
		return nil, snapshotNotFound(id)
	}
	f, err := openNoFollow(st.file(id, checkpoint.ManifestName))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, unusable(id, "it has no "+checkpoint.ManifestName+" (an incomplete checkpoint)")
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return nil, unusable(id, checkpoint.ManifestName+" is not a regular file")
	}
	m, err := checkpoint.ParseManifest(f)
	if err != nil {
		if errors.Is(err, checkpoint.ErrUnsupported) {
			return nil, unusable(id, "its manifest is not version 1 of Rayito's checkpoint format: "+reason(err))
		}
		return nil, err
	}
	return m, nil
}

// load reads the metadata of snapshot id: its e2b.json, or, for a
// checkpoint without one (rayd's), the gateway's default template and
// the manifest's time.
func (st *snapshotStore) load(id string) (*snapshotMeta, error) {
	man, err := st.manifest(id)
	if err != nil {
		return nil, err
	}
	m := snapshotMeta{SnapshotID: id, Names: []string{}, CreatedAt: man.CreatedAt, SizeBytes: man.Size}
	f, err := openNoFollow(st.file(id, metaName))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return &m, nil
	case err != nil:
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxMetaBytes+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxMetaBytes || json.Unmarshal(b, &m) != nil || m.SnapshotID != id {
		return nil, fmt.Errorf("the metadata of snapshot %q is damaged", id)
	}
	m.SizeBytes = man.Size
	return &m, nil
}

// list reads every snapshot's metadata, and their total size (every
// snapshot directory's archive, listed or not).
func (st *snapshotStore) list() ([]snapshotMeta, int64, error) {
	ents, err := os.ReadDir(st.dir)
	if err != nil {
		return nil, 0, err
	}
	var out []snapshotMeta
	var used int64
	for _, e := range ents {
		id := e.Name()
		if !e.IsDir() || !validSnapshotID(id) {
			continue
		}
		if fi, err := os.Lstat(st.file(id, checkpoint.ArchiveName)); err == nil {
			used += fi.Size()
		}
		m, err := st.load(id)
		if err != nil {
			continue
		}
		out = append(out, *m)
	}
	return out, used, nil
}

// reserve holds room for one more snapshot: its size budget, and the
// release to call when it is written or given up.
func (st *snapshotStore) reserve(maxCopy int64) (int64, func(), error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	metas, used, err := st.list()
	if err != nil {
		return 0, nil, err
	}
	if len(metas)+st.pendingCount >= st.maxCount {
		return 0, nil, &httpError{http.StatusConflict, fmt.Sprintf("the gateway holds its maximum of %d snapshots: delete one first (Sandbox.deleteSnapshot)", st.maxCount)}
	}
	left := st.maxBytes - used - st.pendingBytes
	if left <= 0 {
		return 0, nil, &httpError{http.StatusConflict, fmt.Sprintf("the gateway's snapshots use their total of %s: delete one first (Sandbox.deleteSnapshot)", sizeStr(st.maxBytes))}
	}
	budget := min(maxCopy, left)
	st.pendingCount++
	st.pendingBytes += budget
	var once sync.Once
	return budget, func() {
		once.Do(func() {
			st.mu.Lock()
			defer st.mu.Unlock()
			st.pendingCount--
			st.pendingBytes -= budget
		})
	}, nil
}

// create writes snapshot m in a temporary directory, renamed to its id
// once whole: fill writes its archive (at most budget bytes, hashed as
// written), then e2b.json, then manifest.json.
func (st *snapshotStore) create(m snapshotMeta, budget int64, overTotal bool, fill func(io.Writer) (packCounts, error)) (err error) {
	tmpDir, err := os.MkdirTemp(st.dir, tmpPrefix+"*")
	if err != nil {
		return err
	}
	defer func() {
		if tmpDir != "" {
			os.RemoveAll(tmpDir)
		}
	}()
	f, err := os.OpenFile(filepath.Join(tmpDir, checkpoint.ArchiveName), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	h := sha256.New()
	bw := bufio.NewWriterSize(f, 256<<10)
	lw := &limitWriter{w: io.MultiWriter(bw, h), max: budget}
	if overTotal {
		lw.err = &httpError{http.StatusConflict, fmt.Sprintf("the snapshot does not fit in what is left of the gateway's %s for snapshots: delete one first (Sandbox.deleteSnapshot)", sizeStr(st.maxBytes))}
	}
	c, err := fill(lw)
	if err != nil {
		return err
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	m.SizeBytes = lw.n
	b, _ := json.MarshalIndent(m, "", "  ")
	if err := writeFileAtomic(tmpDir, filepath.Join(tmpDir, metaName), b); err != nil {
		return err
	}
	man := &checkpoint.Manifest{Version: checkpoint.Version, Format: checkpoint.Format, Archive: checkpoint.ArchiveName,
		SHA256: hex.EncodeToString(h.Sum(nil)), Size: lw.n, CreatedAt: m.CreatedAt.UTC().Truncate(time.Second),
		Files: c.files, Directories: c.dirs, Symlinks: c.symlinks, ContentBytes: c.content, Producer: snapshotProducer}
	// Last: a snapshot without its manifest is incomplete.
	if err := writeFileAtomic(tmpDir, filepath.Join(tmpDir, checkpoint.ManifestName), man.Encode()); err != nil {
		return err
	}
	syncDir(tmpDir)
	if err := os.Rename(tmpDir, filepath.Join(st.dir, m.SnapshotID)); err != nil {
		return err
	}
	tmpDir = ""
	syncDir(st.dir)
	return nil
}

// writeFileAtomic writes b to path (0600) through a temporary file in dir.
func writeFileAtomic(dir, path string, b []byte) error {
	f, err := os.CreateTemp(dir, tmpPrefix+"*")
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
	}
	return err
}

func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
}

// remove deletes snapshot id (or one of the former layout); false when
// there is none.
func (st *snapshotStore) remove(id string) (bool, error) {
	if !validSnapshotID(id) {
		return false, nil
	}
	found := false
	if d := filepath.Join(st.dir, id); isDir(d) {
		// The manifest first: without it the snapshot is gone for the
		// listing and for a restore, whatever happens to the rest.
		if err := os.Remove(st.file(id, checkpoint.ManifestName)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return false, err
		}
		if err := os.RemoveAll(d); err != nil {
			return true, err
		}
		found = true
	}
	for _, ext := range []string{".json", ".tar"} {
		err := os.Remove(st.oldPath(id, ext))
		if err == nil {
			found = true
		} else if !errors.Is(err, fs.ErrNotExist) {
			return found, err
		}
	}
	if found {
		syncDir(st.dir)
	}
	return found, nil
}

// snapshotsOff answers a snapshot route of a gateway without a snapshot
// directory.
func snapshotsOff(w http.ResponseWriter) {
	writeError(w, http.StatusNotImplemented, unsupportedMsg("snapshots")+" without a snapshot directory (Options.SnapshotDir, `rayito e2b serve --snapshot-dir`)")
}

func (s *Server) handleSnapshotCreate(w http.ResponseWriter, r *http.Request) {
	id, ok := s.sandboxID(w, r)
	if !ok {
		return
	}
	if s.snaps == nil {
		snapshotsOff(w)
		return
	}
	var req snapshotReq
	if code, msg := decode(r, &req); code != 0 {
		writeError(w, code, msg)
		return
	}
	names := []string{}
	if req.Name != nil && *req.Name != "" {
		if !validSnapshotName(*req.Name) {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("name must be 1 to %d printable characters", maxSnapshotName))
			return
		}
		names = append(names, *req.Name)
	}
	ctx, cancel := context.WithTimeout(r.Context(), callTimeout+copyTimeout)
	defer cancel()
	info, c, ok := s.running(ctx, w, id, pausedCopyMsg)
	if !ok {
		return
	}
	rec := s.learn(ctx, info)
	tmpl := info.Template
	if tmpl == "" {
		tmpl, _ = s.template(rec.templateID)
	}
	budget, release, err := s.snaps.reserve(s.maxCopy)
	if err != nil {
		code, msg := errorStatus(id, err)
		writeError(w, code, msg)
		return
	}
	defer release()
	sid, err := newSnapshotID()
	if err != nil {
		writeError(w, http.StatusInternalServerError, "internal error")
		return
	}
	m := snapshotMeta{SnapshotID: sid, Names: names, TemplateID: rec.templateID, Template: tmpl, SandboxID: id, CreatedAt: time.Now().UTC()}
	cctx, ccancel := context.WithTimeout(ctx, copyTimeout)
	defer ccancel()
	err = s.snaps.create(m, budget, budget < s.maxCopy, func(w io.Writer) (packCounts, error) {
		return repackHome(func(w io.Writer) error { return c.sbx.TarHome(cctx, w, true) }, w, s.maxCopy)
	})
	if err != nil {
		code, msg := errorStatus(id, err)
		if code == http.StatusInternalServerError && msg == "platform error" {
			var pe *fs.PathError
			if errors.As(err, &pe) {
				msg = "the gateway could not write the snapshot"
			}
		}
		s.log.Warn("e2b snapshot failed", "sandbox", id, "status", code)
		writeError(w, code, msg)
		return
	}
	writeJSON(w, http.StatusCreated, snapshotOut{SnapshotID: sid, Names: names})
}

func (s *Server) handleSnapshotList(w http.ResponseWriter, r *http.Request) {
	if s.snaps == nil {
		snapshotsOff(w)
		return
	}
	q := r.URL.Query()
	limit, cursor, err := pageParams(q)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	sandboxID, name := q.Get("sandboxID"), q.Get("name")
	metas, _, err := s.snaps.list()
	if err != nil {
		writeError(w, http.StatusInternalServerError, "the gateway could not read its snapshots")
		return
	}
	// Newest first, as the sandbox listing.
	slices.SortFunc(metas, func(a, b snapshotMeta) int {
		if c := b.CreatedAt.Compare(a.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(b.SnapshotID, a.SnapshotID)
	})
	out := []snapshotOut{}
	var last *pageKey
	more := false
	for _, m := range metas {
		if sandboxID != "" && m.SandboxID != sandboxID {
			continue
		}
		if name != "" && name != m.SnapshotID && !slices.Contains(m.Names, name) {
			continue
		}
		k := pageKey{m.CreatedAt.UnixNano(), m.SnapshotID}
		if cursor != nil && !k.after(*cursor, false) {
			continue
		}
		if len(out) == limit {
			more = true
			break
		}
		names := m.Names
		if names == nil {
			names = []string{}
		}
		out = append(out, snapshotOut{SnapshotID: m.SnapshotID, Names: names})
		last = &k
	}
	if more && last != nil {
		w.Header().Set("X-Next-Token", last.String())
	}
	writeJSON(w, http.StatusOK, out)
}

// handleSnapshotDelete is DELETE /templates/{templateID}, what the SDK's
// deleteSnapshot sends: the gateway deletes its snapshots only (Rayito's
// templates are images).
func (s *Server) handleSnapshotDelete(w http.ResponseWriter, r *http.Request) {
	if s.snaps == nil {
		writeError(w, http.StatusNotImplemented, unsupportedMsg("templates"))
		return
	}
	id := r.PathValue("templateID")
	ok, err := s.snaps.remove(id)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "the gateway could not delete the snapshot")
		return
	}
	if !ok {
		writeError(w, http.StatusNotFound, fmt.Sprintf("snapshot %q not found (the gateway deletes its snapshots only: Rayito's templates are images)", id))
		return
	}
	noContent(w)
}

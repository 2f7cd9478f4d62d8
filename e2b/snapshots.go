package e2b

import (
	"bufio"
	"context"
	"crypto/rand"
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
)

// A snapshot is the tar archive of a sandbox's HomeDir, kept by the
// gateway in Options.SnapshotDir as <id>.tar (0600) with <id>.json beside
// it (its names, source sandbox, templates, time, size). Creating a
// sandbox with the snapshot's id as templateID makes a sandbox of the
// source's template and extracts the archive into its HomeDir. Memory,
// processes and everything outside HomeDir are not in a snapshot.

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
)

// snapshotMeta is <id>.json.
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
			_ = os.Remove(filepath.Join(dir, e.Name()))
		}
	}
	return &snapshotStore{dir: dir, maxCount: maxCount, maxBytes: maxBytes}, nil
}

func (st *snapshotStore) dataPath(id string) string { return filepath.Join(st.dir, id+".tar") }
func (st *snapshotStore) metaPath(id string) string { return filepath.Join(st.dir, id+".json") }

func snapshotNotFound(id string) error {
	return &httpError{http.StatusNotFound, fmt.Sprintf("snapshot %q not found", id)}
}

// load reads the metadata of snapshot id.
func (st *snapshotStore) load(id string) (*snapshotMeta, error) {
	if !validSnapshotID(id) {
		return nil, snapshotNotFound(id)
	}
	f, err := os.OpenFile(st.metaPath(id), os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, snapshotNotFound(id)
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxMetaBytes+1))
	if err != nil {
		return nil, err
	}
	var m snapshotMeta
	if len(b) > maxMetaBytes || json.Unmarshal(b, &m) != nil || m.SnapshotID != id {
		return nil, fmt.Errorf("the metadata of snapshot %q is damaged", id)
	}
	return &m, nil
}

// list reads every snapshot's metadata, and their total size.
func (st *snapshotStore) list() ([]snapshotMeta, int64, error) {
	ents, err := os.ReadDir(st.dir)
	if err != nil {
		return nil, 0, err
	}
	var out []snapshotMeta
	var used int64
	for _, e := range ents {
		id, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok || !validSnapshotID(id) || !e.Type().IsRegular() {
			continue
		}
		m, err := st.load(id)
		if err != nil {
			continue
		}
		if fi, err := os.Lstat(st.dataPath(id)); err == nil {
			used += fi.Size()
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

// create writes snapshot m: fill writes its archive (at most budget
// bytes). Both files are written to temporary names and renamed: a
// snapshot is listed only once whole.
func (st *snapshotStore) create(m snapshotMeta, budget int64, overTotal bool, fill func(io.Writer) error) (err error) {
	tmp, err := os.CreateTemp(st.dir, tmpPrefix+"*")
	if err != nil {
		return err
	}
	defer func() {
		if tmp != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	bw := bufio.NewWriterSize(tmp, 256<<10)
	lw := &limitWriter{w: bw, max: budget}
	if overTotal {
		lw.err = &httpError{http.StatusConflict, fmt.Sprintf("the snapshot does not fit in what is left of the gateway's %s for snapshots: delete one first (Sandbox.deleteSnapshot)", sizeStr(st.maxBytes))}
	}
	if err := fill(lw); err != nil {
		return err
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	if err := tmp.Sync(); err != nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	m.SizeBytes = lw.n
	data := st.dataPath(m.SnapshotID)
	if err := os.Rename(tmp.Name(), data); err != nil {
		return err
	}
	tmp = nil
	b, _ := json.MarshalIndent(m, "", "  ")
	if err := writeFileAtomic(st.dir, st.metaPath(m.SnapshotID), b); err != nil {
		os.Remove(data)
		return err
	}
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

// remove deletes snapshot id; false when there is none.
func (st *snapshotStore) remove(id string) (bool, error) {
	if !validSnapshotID(id) {
		return false, nil
	}
	// The metadata first: without it the snapshot is gone for the
	// listing, whatever happens to the archive.
	err := os.Remove(st.metaPath(id))
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if err := os.Remove(st.dataPath(id)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return true, err
	}
	syncDir(st.dir)
	return true, nil
}

// open opens the archive of snapshot id.
func (st *snapshotStore) open(id string) (*os.File, error) {
	if !validSnapshotID(id) {
		return nil, snapshotNotFound(id)
	}
	f, err := os.OpenFile(st.dataPath(id), os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, snapshotNotFound(id)
	}
	return f, err
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
	err = s.snaps.create(m, budget, budget < s.maxCopy, func(w io.Writer) error { return c.sbx.TarHome(cctx, w) })
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

// restoreSnapshot extracts snapshot id into the new sandbox sbx.
func (s *Server) restoreSnapshot(ctx context.Context, sbx sandbox, id string) error {
	f, err := s.snaps.open(id)
	if err != nil {
		return err
	}
	defer f.Close()
	cctx, cancel := context.WithTimeout(ctx, copyTimeout)
	defer cancel()
	return copyInto(cctx, sbx, bufio.NewReaderSize(f, stdinChunk))
}

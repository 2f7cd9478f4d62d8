package rayito

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/rayito-dev/rayito/proto/accesstoken"
	"github.com/rayito-dev/rayito/sdk/internal/tokenstore"
)

// PoolSlot is one sandbox of a SandboxPool as its PoolStore records it:
// the sandbox's id, its access token (the slot's secret: whoever holds it
// can drive the sandbox), when the pool created it and when the platform
// will end it. A record never holds the sandbox's envs, secrets,
// metadata or anything else of its options.
type PoolSlot struct {
	// ID is the sandbox id.
	ID string `json:"id"`
	// AccessToken is the sandbox's access token. Treat it as a secret.
	AccessToken string `json:"access_token"`
	// CreatedAt is when the pool created the sandbox.
	CreatedAt time.Time `json:"created_at"`
	// ExpiresAt is when the platform ends the sandbox at the latest (its
	// maximum lifetime; zero when unknown).
	ExpiresAt time.Time `json:"expires_at,omitzero"`
	// Filling is true while the pool is still making the slot ready
	// (created, not paused yet): a pool that finds such a record when it
	// starts kills its sandbox.
	Filling bool `json:"filling,omitempty"`
}

// String shows the slot without its access token.
func (s PoolSlot) String() string {
	return fmt.Sprintf("pool slot %s (created %s)", s.ID, s.CreatedAt.UTC().Format(time.RFC3339))
}

// GoString is String: a slot printed with %#v does not show its token
// either.
func (s PoolSlot) GoString() string { return s.String() }

// PoolStore keeps the records of a SandboxPool's slots, so that a pool
// made again over the same store (in this process or another) adopts the
// paused sandboxes of the previous one instead of leaking them. One pool
// at a time may use a store. Implementations are safe for concurrent use.
type PoolStore interface {
	// Load returns the records saved last (none for a new store).
	Load(ctx context.Context) ([]PoolSlot, error)
	// Save replaces the records with slots.
	Save(ctx context.Context, slots []PoolSlot) error
}

// NewPoolMemoryStore is a PoolStore in this process's memory (the
// default of PoolConfig.Store): the slots of a pool that ends with the
// process are not adopted by another.
func NewPoolMemoryStore() PoolStore { return &poolMemoryStore{} }

type poolMemoryStore struct {
	mu    sync.Mutex
	slots []PoolSlot
}

func (m *poolMemoryStore) Load(context.Context) ([]PoolSlot, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.slots), nil
}

func (m *poolMemoryStore) Save(_ context.Context, slots []PoolSlot) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.slots = slices.Clone(slots)
	return nil
}

// poolFileVersion is the version of the file store's format.
const poolFileVersion = 1

// maxPoolFileBytes bounds the file store's file (64 slots need a few KB).
const maxPoolFileBytes = 1 << 20

// poolFile is the file store's JSON document.
type poolFile struct {
	Version int        `json:"version"`
	Slots   []PoolSlot `json:"slots"`
}

// NewPoolFileStore is a PoolStore in a JSON file at path. The file holds
// each slot's access token, so it is written with mode 0600 (its
// directory is made 0700 when missing), replaced atomically (a temporary
// file in the same directory, fsync, rename), and Load refuses a file
// that others may read or write, or that is not a regular file (a
// symbolic link, say), with ErrPermissionDenied. A file that is not the
// store's format is ErrInvalidArgument. A missing file is an empty store.
func NewPoolFileStore(path string) PoolStore { return &poolFileStore{path: path} }

type poolFileStore struct {
	mu   sync.Mutex
	path string
}

func (f *poolFileStore) Load(context.Context) ([]PoolSlot, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fh, err := os.OpenFile(f.path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, nil
	case errors.Is(err, syscall.ELOOP):
		return nil, newError(ReasonPermissionDenied, "pool store: its file is a symbolic link")
	case err != nil:
		return nil, newError(ReasonInternal, "pool store: cannot read its file", err)
	}
	defer fh.Close()
	st, err := fh.Stat()
	if err != nil {
		return nil, newError(ReasonInternal, "pool store: cannot read its file", err)
	}
	if !st.Mode().IsRegular() {
		return nil, newError(ReasonPermissionDenied, "pool store: its file is not a regular file")
	}
	if st.Mode().Perm()&0o077 != 0 {
		return nil, newError(ReasonPermissionDenied, fmt.Sprintf("pool store: its file holds access tokens and is open to other users (mode %04o, want 0600)", st.Mode().Perm()))
	}
	b, err := io.ReadAll(io.LimitReader(fh, maxPoolFileBytes+1))
	if err != nil {
		return nil, newError(ReasonInternal, "pool store: cannot read its file", err)
	}
	return decodePoolFile(b)
}

// decodePoolFile parses the file store's document strictly: its version,
// no unknown fields, valid ids and tokens, at most MaxPoolSize*2 slots.
func decodePoolFile(b []byte) ([]PoolSlot, error) {
	if len(b) > maxPoolFileBytes {
		return nil, newError(ReasonInvalidArgument, "pool store: the file is too large")
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var doc poolFile
	if err := dec.Decode(&doc); err != nil {
		return nil, newError(ReasonInvalidArgument, "pool store: the file is not a pool store")
	}
	if dec.More() {
		return nil, newError(ReasonInvalidArgument, "pool store: the file has data after its document")
	}
	if doc.Version != poolFileVersion {
		return nil, newError(ReasonInvalidArgument, fmt.Sprintf("pool store: unknown version %d (want %d)", doc.Version, poolFileVersion))
	}
	if len(doc.Slots) > 2*MaxPoolSize {
		return nil, newError(ReasonInvalidArgument, fmt.Sprintf("pool store: %d slots (at most %d)", len(doc.Slots), 2*MaxPoolSize))
	}
	seen := make(map[string]bool, len(doc.Slots))
	for i, s := range doc.Slots {
		if !tokenstore.ValidID(s.ID) {
			return nil, newError(ReasonInvalidArgument, fmt.Sprintf("pool store: slot %d: invalid sandbox id", i))
		}
		if seen[s.ID] {
			return nil, newError(ReasonInvalidArgument, fmt.Sprintf("pool store: slot %d: sandbox listed twice", i))
		}
		seen[s.ID] = true
		if _, err := accesstoken.Decode(s.AccessToken); err != nil {
			return nil, newError(ReasonInvalidArgument, fmt.Sprintf("pool store: slot %d: malformed access token", i))
		}
	}
	return doc.Slots, nil
}

func (f *poolFileStore) Save(_ context.Context, slots []PoolSlot) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if slots == nil {
		slots = []PoolSlot{}
	}
	b, err := json.MarshalIndent(poolFile{Version: poolFileVersion, Slots: slots}, "", "  ")
	if err != nil {
		return newError(ReasonInternal, "pool store: cannot encode its records", err)
	}
	dir := filepath.Dir(f.path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return newError(ReasonInternal, "pool store: cannot make its directory", err)
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(f.path)+".*.tmp")
	if err != nil {
		return newError(ReasonInternal, "pool store: cannot write its file", err)
	}
	ok := false
	defer func() {
		if !ok {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	// CreateTemp makes the file 0600 already; say so explicitly.
	if err := tmp.Chmod(0o600); err != nil {
		return newError(ReasonInternal, "pool store: cannot write its file", err)
	}
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		return newError(ReasonInternal, "pool store: cannot write its file", err)
	}
	if err := tmp.Sync(); err != nil {
		return newError(ReasonInternal, "pool store: cannot write its file", err)
	}
	if err := tmp.Close(); err != nil {
		return newError(ReasonInternal, "pool store: cannot write its file", err)
	}
	if err := os.Rename(tmp.Name(), f.path); err != nil {
		return newError(ReasonInternal, "pool store: cannot write its file", err)
	}
	ok = true
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
	return nil
}

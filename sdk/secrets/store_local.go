package secrets

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	rayito "github.com/rayito-dev/rayito/sdk"
)

// localSecretVersions is how many versions of a secret the local store
// keeps.
const localSecretVersions = 10

// LocalStore is a Store of files on this machine: one 0600
// file per secret in a 0700 directory of the user's, named by the
// SHA-256 of the secret's name (so a name never becomes a path), holding
// the last 10 versions. Writes are atomic (a temporary file, fsync,
// rename), and an advisory lock on the directory's .lock file orders the
// processes that share it. Values are stored as they are, not encrypted:
// the directory's permissions protect them. It is safe for concurrent use.
type LocalStore struct {
	dir string
}

// localSecretDoc is a secret's file.
type localSecretDoc struct {
	Name     string               `json:"name"`
	Versions []localSecretVersion `json:"versions"` // oldest first; the last is current
}

type localSecretVersion struct {
	ID        string    `json:"id"`
	CreatedAt time.Time `json:"created_at"`
	Value     []byte    `json:"value"` // base64
}

// DefaultLocalDir is the local secret store's directory for the
// environment getenv reads (nil: the process's): $RAYITO_SECRETS_DIR,
// else $XDG_CONFIG_HOME/rayito/secrets, else
// $HOME/.config/rayito/secrets.
func DefaultLocalDir(getenv func(string) string) (string, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	if d := getenv("RAYITO_SECRETS_DIR"); d != "" {
		return d, nil
	}
	if d := getenv("XDG_CONFIG_HOME"); d != "" && filepath.IsAbs(d) {
		return filepath.Join(d, "rayito", "secrets"), nil
	}
	if h := getenv("HOME"); h != "" {
		return filepath.Join(h, ".config", "rayito", "secrets"), nil
	}
	return "", rayito.NewError(rayito.ReasonInvalidArgument, "rayito: no directory for the local secret store: set RAYITO_SECRETS_DIR or HOME")
}

// NewLocalStore opens the store in dir, creating it (mode 0700)
// when it does not exist. It refuses a dir that is a symbolic link, is
// not a directory, is writable by the group or others, or belongs to
// another user.
func NewLocalStore(dir string) (*LocalStore, error) {
	if dir == "" {
		return nil, rayito.NewError(rayito.ReasonInvalidArgument, "rayito: empty secret store directory")
	}
	dir = filepath.Clean(dir)
	if _, err := os.Lstat(dir); errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, rayito.NewError(rayito.ReasonPermissionDenied, "rayito: cannot create the secret store directory", err)
		}
	}
	if err := checkSecretDir(dir); err != nil {
		return nil, err
	}
	return &LocalStore{dir: dir}, nil
}

// checkSecretDir refuses a directory others could tamper with.
func checkSecretDir(dir string) error {
	st, err := os.Lstat(dir)
	if err != nil {
		return rayito.NewError(rayito.ReasonPermissionDenied, "rayito: cannot read the secret store directory", err)
	}
	switch {
	case st.Mode()&fs.ModeSymlink != 0:
		return rayito.NewError(rayito.ReasonPermissionDenied, "rayito: the secret store directory is a symbolic link")
	case !st.IsDir():
		return rayito.NewError(rayito.ReasonInvalidArgument, "rayito: the secret store directory is not a directory")
	case st.Mode().Perm()&0o022 != 0:
		return rayito.NewError(rayito.ReasonPermissionDenied, "rayito: the secret store directory is writable by the group or others (chmod 700 it)")
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok && int(sys.Uid) != os.Getuid() {
		return rayito.NewError(rayito.ReasonPermissionDenied, "rayito: the secret store directory belongs to another user")
	}
	return nil
}

// Dir is the store's directory.
func (s *LocalStore) Dir() string { return s.dir }

// path is the file of a (valid) name.
func (s *LocalStore) path(name string) string {
	sum := sha256.Sum256([]byte(name))
	return filepath.Join(s.dir, hex.EncodeToString(sum[:])+".json")
}

// lock takes the directory's advisory lock (exclusive or shared) and
// returns its release.
func (s *LocalStore) lock(exclusive bool) (func(), error) {
	f, err := os.OpenFile(filepath.Join(s.dir, ".lock"), os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, rayito.NewError(rayito.ReasonPermissionDenied, "rayito: cannot lock the secret store", err)
	}
	how := syscall.LOCK_SH
	if exclusive {
		how = syscall.LOCK_EX
	}
	for {
		err = syscall.Flock(int(f.Fd()), how)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	if err != nil {
		f.Close()
		return nil, rayito.NewError(rayito.ReasonInternal, "rayito: cannot lock the secret store", err)
	}
	return func() { f.Close() }, nil // closing releases the lock
}

// read loads the file of name; rayito.ErrSecretNotFound when there is none.
func (s *LocalStore) read(name string) (*localSecretDoc, error) {
	doc, err := readSecretFile(s.path(name))
	if err != nil {
		return nil, err
	}
	if doc.Name != name {
		return nil, errSecretNotFound()
	}
	return doc, nil
}

func readSecretFile(path string) (*localSecretDoc, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, errSecretNotFound()
	}
	if err != nil {
		return nil, rayito.NewError(rayito.ReasonPermissionDenied, "rayito: cannot read a secret's file", err)
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		return nil, rayito.NewError(rayito.ReasonInvalidArgument, "rayito: a secret's file is not a regular file")
	}
	// The JSON of 10 versions of 64 KiB, base64, with room to spare.
	data, err := io.ReadAll(io.LimitReader(f, 2<<20))
	if err != nil {
		return nil, rayito.NewError(rayito.ReasonInternal, "rayito: cannot read a secret's file", err)
	}
	var doc localSecretDoc
	if err := json.Unmarshal(data, &doc); err != nil || len(doc.Versions) == 0 {
		// Never the JSON error: it may quote the file.
		return nil, rayito.NewError(rayito.ReasonInternal, "rayito: a secret's file is corrupt")
	}
	return &doc, nil
}

// write replaces name's file atomically: a temporary file in the
// directory, fsync, rename, and fsync of the directory. Nothing is left
// behind on error.
func (s *LocalStore) write(doc *localSecretDoc) (err error) {
	data, err := json.Marshal(doc)
	if err != nil {
		return rayito.NewError(rayito.ReasonInternal, "rayito: cannot encode a secret")
	}
	tmp, err := os.CreateTemp(s.dir, ".tmp-*")
	if err != nil {
		return rayito.NewError(rayito.ReasonPermissionDenied, "rayito: cannot write the secret store", err)
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if err := tmp.Chmod(0o600); err != nil {
		return rayito.NewError(rayito.ReasonPermissionDenied, "rayito: cannot write the secret store", err)
	}
	if _, err := tmp.Write(data); err != nil {
		return writeErr(err)
	}
	if err := tmp.Sync(); err != nil {
		return writeErr(err)
	}
	if err := tmp.Close(); err != nil {
		return writeErr(err)
	}
	if err := os.Rename(tmp.Name(), s.path(doc.Name)); err != nil {
		return writeErr(err)
	}
	syncDir(s.dir)
	return nil
}

func writeErr(err error) error {
	if errors.Is(err, syscall.ENOSPC) {
		return rayito.NewError(rayito.ReasonDiskFull, "rayito: the secret store's disk is full", err)
	}
	return rayito.NewError(rayito.ReasonInternal, "rayito: cannot write the secret store", err)
}

func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
}

// newLocalVersion makes a version with a random 16-hex-digit id.
func newLocalVersion(value []byte) (localSecretVersion, error) {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return localSecretVersion{}, rayito.NewError(rayito.ReasonInternal, "rayito: no randomness for a secret version", err)
	}
	return localSecretVersion{ID: hex.EncodeToString(b[:]), CreatedAt: time.Now().UTC(), Value: slices.Clone(value)}, nil
}

func (d *localSecretDoc) info(v localSecretVersion) Info {
	return Info{Name: d.Name, Version: v.ID, CreatedAt: v.CreatedAt}
}

// CreateSecret stores a new secret.
func (s *LocalStore) CreateSecret(ctx context.Context, name string, value []byte) (Info, error) {
	if err := checkPut(ctx, name, value); err != nil {
		return Info{}, err
	}
	unlock, err := s.lock(true)
	if err != nil {
		return Info{}, err
	}
	defer unlock()
	if _, err := s.read(name); err == nil {
		return Info{}, errSecretExists()
	} else if !errors.Is(err, rayito.ErrSecretNotFound) {
		return Info{}, err
	}
	v, err := newLocalVersion(value)
	if err != nil {
		return Info{}, err
	}
	doc := &localSecretDoc{Name: name, Versions: []localSecretVersion{v}}
	if err := s.write(doc); err != nil {
		return Info{}, err
	}
	return doc.info(v), nil
}

// UpdateSecret stores a new current version, keeping the last 10.
func (s *LocalStore) UpdateSecret(ctx context.Context, name string, value []byte) (Info, error) {
	if err := checkPut(ctx, name, value); err != nil {
		return Info{}, err
	}
	unlock, err := s.lock(true)
	if err != nil {
		return Info{}, err
	}
	defer unlock()
	doc, err := s.read(name)
	if err != nil {
		return Info{}, err
	}
	v, err := newLocalVersion(value)
	if err != nil {
		return Info{}, err
	}
	doc.Versions = append(doc.Versions, v)
	if n := len(doc.Versions); n > localSecretVersions {
		doc.Versions = slices.Clone(doc.Versions[n-localSecretVersions:])
	}
	if err := s.write(doc); err != nil {
		return Info{}, err
	}
	return doc.info(v), nil
}

func checkPut(ctx context.Context, name string, value []byte) error {
	if err := ValidateName(name); err != nil {
		return err
	}
	if err := validateSecretValue(value); err != nil {
		return err
	}
	return ctx.Err()
}

// GetSecret reads a version of a secret (Version "": the current one).
func (s *LocalStore) GetSecret(ctx context.Context, ref Ref) (Secret, error) {
	if err := validateSecretRef(ref); err != nil {
		return Secret{}, err
	}
	if err := ctx.Err(); err != nil {
		return Secret{}, err
	}
	unlock, err := s.lock(false)
	if err != nil {
		return Secret{}, err
	}
	defer unlock()
	doc, err := s.read(ref.Name)
	if err != nil {
		return Secret{}, err
	}
	v := doc.Versions[len(doc.Versions)-1]
	if ref.Version != "" {
		i := slices.IndexFunc(doc.Versions, func(v localSecretVersion) bool { return v.ID == ref.Version })
		if i < 0 {
			return Secret{}, errSecretNotFound()
		}
		v = doc.Versions[i]
	}
	return newSecret(doc.info(v), v.Value), nil
}

// DeleteSecret removes a secret and its versions.
func (s *LocalStore) DeleteSecret(ctx context.Context, name string) error {
	if err := ValidateName(name); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	unlock, err := s.lock(true)
	if err != nil {
		return err
	}
	defer unlock()
	if _, err := s.read(name); err != nil {
		return err
	}
	if err := os.Remove(s.path(name)); err != nil {
		return rayito.NewError(rayito.ReasonPermissionDenied, "rayito: cannot delete a secret's file", err)
	}
	syncDir(s.dir)
	return nil
}

// ListSecrets describes every secret's current version, sorted by name.
// Files that are not the store's are skipped.
func (s *LocalStore) ListSecrets(ctx context.Context) ([]Info, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	unlock, err := s.lock(false)
	if err != nil {
		return nil, err
	}
	defer unlock()
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return nil, rayito.NewError(rayito.ReasonPermissionDenied, "rayito: cannot read the secret store directory", err)
	}
	out := []Info{}
	for _, e := range entries {
		base, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok || len(base) != 64 || !e.Type().IsRegular() {
			continue
		}
		doc, err := readSecretFile(filepath.Join(s.dir, e.Name()))
		if err != nil || ValidateName(doc.Name) != nil || s.path(doc.Name) != filepath.Join(s.dir, e.Name()) {
			continue
		}
		out = append(out, doc.info(doc.Versions[len(doc.Versions)-1]))
	}
	slices.SortFunc(out, func(a, b Info) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

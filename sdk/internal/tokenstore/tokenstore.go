// Package tokenstore keeps the access tokens of sandboxes, one 0600 file
// per sandbox in a 0700 directory under the user's state directory, so
// that any process of the user (the SDK's Connect, the rayito CLI) can
// reach a sandbox another one created. Tokens are secrets: nothing here
// logs or returns them in errors.
package tokenstore

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/rayito-dev/rayito/proto/microvmsapi"
)

// ErrNoToken is returned by Load when no token is stored for the id.
var ErrNoToken = errors.New("no access token stored for this sandbox")

// ErrInvalidID is returned for an id that cannot name a file safely.
var ErrInvalidID = errors.New("invalid sandbox id")

// Store is a token directory.
type Store struct{ Dir string }

// DefaultDir is $XDG_STATE_HOME/rayito/tokens, or
// ~/.local/state/rayito/tokens when XDG_STATE_HOME is unset or relative
// (the XDG rule).
func DefaultDir(getenv func(string) string) (string, error) {
	base := getenv("XDG_STATE_HOME")
	if base == "" || !filepath.IsAbs(base) {
		home := getenv("HOME")
		if home == "" {
			var err error
			if home, err = os.UserHomeDir(); err != nil {
				return "", fmt.Errorf("no state directory for access tokens: %w", err)
			}
		}
		base = filepath.Join(home, ".local", "state")
	}
	return filepath.Join(base, "rayito", "tokens"), nil
}

// ValidID reports whether id may name a token file:
// microvmsapi.ValidSandboxID (1 to 128 characters of [A-Za-z0-9._-], not
// starting with a dot: no "..", no hidden or temporary files, no path
// separators).
func ValidID(id string) bool { return microvmsapi.ValidSandboxID(id) }

func (s Store) path(id string) (string, error) {
	if !ValidID(id) {
		return "", ErrInvalidID
	}
	if s.Dir == "" {
		return "", errors.New("token store has no directory")
	}
	return filepath.Join(s.Dir, id), nil
}

// Save stores the token of sandbox id atomically (temporary file, fsync,
// rename), creating the directory with mode 0700 and the file with 0600.
// An existing directory with a wider mode is narrowed to 0700.
func (s Store) Save(id, token string) error {
	p, err := s.path(id)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(s.Dir, 0o700); err != nil {
		return fmt.Errorf("token store: %w", err)
	}
	if st, err := os.Stat(s.Dir); err == nil && st.Mode().Perm() != 0o700 {
		if err := os.Chmod(s.Dir, 0o700); err != nil {
			return fmt.Errorf("token store: %w", err)
		}
	}
	f, err := os.CreateTemp(s.Dir, tmpPrefix)
	if err != nil {
		return fmt.Errorf("token store: %w", err)
	}
	tmp := f.Name()
	defer os.Remove(tmp)
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return fmt.Errorf("token store: %w", err)
	}
	if _, err := f.WriteString(token); err != nil {
		f.Close()
		return fmt.Errorf("token store: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("token store: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("token store: %w", err)
	}
	if err := os.Rename(tmp, p); err != nil {
		return fmt.Errorf("token store: %w", err)
	}
	return nil
}

// Load returns the token of sandbox id, or ErrNoToken.
func (s Store) Load(id string) (string, error) {
	p, err := s.path(id)
	if err != nil {
		return "", err
	}
	b, err := os.ReadFile(p)
	if errors.Is(err, os.ErrNotExist) {
		return "", ErrNoToken
	}
	if err != nil {
		return "", fmt.Errorf("token store: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}

// Remove forgets the token of sandbox id; a missing one is not an error.
func (s Store) Remove(id string) error {
	p, err := s.path(id)
	if err != nil {
		return err
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("token store: %w", err)
	}
	return nil
}

// tmpPrefix names Save's temporary files.
const tmpPrefix = ".tmp-"

// TmpMaxAge is how old a temporary file of Save must be before Sweep
// removes it: a Save takes milliseconds, so an older one was interrupted
// (its process died between the write and the rename).
const TmpMaxAge = time.Hour

// maxTokenFile bounds what Sweep reads of a file to tell a token.
const maxTokenFile = 1024

// Sweep removes what the store holds for sandboxes that cannot be alive
// any more: the tokens saved more than maxAge before now (Save's write
// sets the file's modification time; pass the longest a sandbox can live,
// plus a margin), and the temporary files of interrupted saves older than
// TmpMaxAge. It removes only regular files (never through a symbolic
// link) named by a valid id whose content isToken accepts, so a directory
// shared with other files by mistake loses nothing else. It returns how
// many files it removed; a missing directory is not an error.
func (s Store) Sweep(now time.Time, maxAge time.Duration, isToken func(string) bool) (int, error) {
	if s.Dir == "" {
		return 0, errors.New("token store has no directory")
	}
	ents, err := os.ReadDir(s.Dir)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("token store: %w", err)
	}
	removed := 0
	var errs []error
	for _, e := range ents {
		name := e.Name()
		tmp := strings.HasPrefix(name, tmpPrefix)
		if !tmp && !ValidID(name) {
			continue
		}
		fi, err := e.Info() // lstat: a symbolic link is not a regular file
		if err != nil || !fi.Mode().IsRegular() {
			continue
		}
		age := now.Sub(fi.ModTime())
		p := filepath.Join(s.Dir, name)
		switch {
		case tmp && age > TmpMaxAge:
		case !tmp && age > maxAge && fi.Size() <= maxTokenFile && isToken(readToken(p)):
		default:
			continue
		}
		if err := os.Remove(p); err != nil {
			if !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, fmt.Errorf("token store: %w", err))
			}
			continue
		}
		removed++
	}
	return removed, errors.Join(errs...)
}

// readToken reads a small file without following a symbolic link: ""
// when it cannot.
func readToken(p string) string {
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return ""
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxTokenFile+1))
	if err != nil || len(b) > maxTokenFile {
		return ""
	}
	return strings.TrimSpace(string(b))
}

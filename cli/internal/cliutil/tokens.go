package cliutil

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// TokenStore keeps the access tokens of sandboxes this user created with
// the CLI, one 0600 file per sandbox in a 0700 directory, so later commands
// (exec) can reach them. The tokens are secrets: they never appear in
// output unless asked with --show-token.
type TokenStore struct{ Dir string }

// DefaultTokenStore is under $XDG_STATE_HOME/rayito/tokens (or
// ~/.local/state/rayito/tokens).
func DefaultTokenStore(getenv func(string) string) TokenStore {
	base := getenv("XDG_STATE_HOME")
	if base == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			home = os.TempDir()
		}
		base = filepath.Join(home, ".local", "state")
	}
	return TokenStore{Dir: filepath.Join(base, "rayito", "tokens")}
}

func (s TokenStore) path(id string) (string, error) {
	if id == "" || strings.ContainsAny(id, `/\`) || id == "." || id == ".." || len(id) > 256 {
		return "", errors.New("invalid sandbox id")
	}
	return filepath.Join(s.Dir, id), nil
}

// Save stores the token of sandbox id.
func (s TokenStore) Save(id, token string) error {
	p, err := s.path(id)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(s.Dir, 0o700); err != nil {
		return err
	}
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, []byte(token), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, p)
}

// Load returns the token of sandbox id.
func (s TokenStore) Load(id string) (string, error) {
	p, err := s.path(id)
	if err != nil {
		return "", err
	}
	b, err := os.ReadFile(p)
	if errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("no access token stored for this sandbox: pass --token or RAYITO_ACCESS_TOKEN")
	}
	return strings.TrimSpace(string(b)), err
}

// Remove forgets the token of sandbox id.
func (s TokenStore) Remove(id string) {
	if p, err := s.path(id); err == nil {
		_ = os.Remove(p)
	}
}

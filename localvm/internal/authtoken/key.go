package authtoken

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// LoadOrCreateKey returns the platform key stored at path, creating it
// first if the file does not exist: KeySize random bytes in a file of mode
// 0600, in a directory created with mode 0700 if missing (an existing
// directory is left as it is).
//
// An existing file is refused, never repaired, when it is not a regular
// file, is not exactly KeySize bytes, or has any group or other permission
// bit set.
//
// Creation is atomic: the key is written to a temporary file in the same
// directory and linked into place, so concurrent callers all end up with
// the same key and nobody ever reads a partial one.
func LoadOrCreateKey(path string) ([]byte, error) {
	key, err := loadKey(path)
	if err == nil || !errors.Is(err, fs.ErrNotExist) {
		return key, err
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("authtoken: create key directory: %w", err)
	}
	tmp, err := os.CreateTemp(dir, ".authkey-*") // mode 0600
	if err != nil {
		return nil, fmt.Errorf("authtoken: create key: %w", err)
	}
	defer os.Remove(tmp.Name())
	_, err = tmp.Write(NewKey())
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, fmt.Errorf("authtoken: write key: %w", err)
	}
	// Link fails if path appeared meanwhile; then the other key wins.
	if err := os.Link(tmp.Name(), path); err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, fmt.Errorf("authtoken: install key: %w", err)
	}
	return loadKey(path)
}

// loadKey reads and checks an existing key file.
func loadKey(path string) ([]byte, error) {
	// Stat before opening so that a FIFO or device is refused, not opened.
	if fi, err := os.Stat(path); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
		return nil, fmt.Errorf("authtoken: stat key: %w", err)
	} else if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("authtoken: key %s is not a regular file", path)
	}
	f, err := os.Open(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
		return nil, fmt.Errorf("authtoken: open key: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("authtoken: stat key: %w", err)
	}
	switch {
	case !fi.Mode().IsRegular():
		return nil, fmt.Errorf("authtoken: key %s is not a regular file", path)
	case fi.Mode().Perm()&0o077 != 0:
		return nil, fmt.Errorf("authtoken: key %s has mode %04o; want no group or other permissions (0600)", path, fi.Mode().Perm())
	case fi.Size() != KeySize:
		return nil, fmt.Errorf("authtoken: key %s is %d bytes, want %d", path, fi.Size(), KeySize)
	}
	key := make([]byte, KeySize)
	if _, err := io.ReadFull(f, key); err != nil {
		return nil, fmt.Errorf("authtoken: read key: %w", err)
	}
	// The file must not have grown since Stat.
	if n, _ := f.Read(make([]byte, 1)); n != 0 {
		return nil, fmt.Errorf("authtoken: key %s is longer than %d bytes", path, KeySize)
	}
	return key, nil
}

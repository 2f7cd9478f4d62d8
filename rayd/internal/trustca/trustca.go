// Package trustca makes the sandbox's tools trust the secret placeholders'
// per-sandbox CA without anyone configuring them: it writes the CA
// certificate and a bundle (the system's roots followed by the CA) under a
// root-owned directory, lays the bundle read-only over the system bundle
// files (so that tools reading the system store see it), and names both in
// the variables Node, Python (ssl, requests, httpx), curl, git and Go read.
//
// Only certificates are written: the CA's key stays in rayd's memory
// (gateway.Gateway). Nothing here is secret.
package trustca

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
)

// DefaultDir is where the certificate and the bundle are written.
const DefaultDir = "/run/rayito/ca"

// SystemBundles are the system bundle files of the distributions we run
// on (Debian and Ubuntu, Amazon Linux and Fedora, Alpine and others); each
// one that exists is covered.
var SystemBundles = []string{
	"/etc/ssl/certs/ca-certificates.crt",
	"/etc/pki/tls/certs/ca-bundle.crt",
	"/etc/ssl/cert.pem",
}

// Mounter lays src read-only over the file dst (a bind mount).
type Mounter interface {
	BindReadOnly(src, dst string) error
}

// Options configure an Installer. The zero value works on a sandbox.
type Options struct {
	Dir     string   // default DefaultDir
	Bundles []string // default SystemBundles
	// Mounter covers the system bundles; nil: the bind mount of this OS
	// (Linux), or none elsewhere.
	Mounter Mounter
}

// Installer installs one CA, once.
type Installer struct {
	opts Options

	mu        sync.Mutex
	installed []byte // the CA installed, PEM
	covered   []string
}

// New returns an Installer.
func New(opts Options) *Installer {
	if opts.Dir == "" {
		opts.Dir = DefaultDir
	}
	if opts.Bundles == nil {
		opts.Bundles = SystemBundles
	}
	if opts.Mounter == nil {
		opts.Mounter = osMounter{}
	}
	return &Installer{opts: opts}
}

// ErrInstalled is returned when another CA is already installed (a CA is
// made once per sandbox).
var ErrInstalled = errors.New("trustca: another CA is already installed")

// Install writes caPEM and the bundle and covers the system bundles. It is
// idempotent for the same CA. A system bundle that cannot be covered is
// left alone (the variables still point at the bundle); a failure to
// write the files is an error and leaves no partial file.
func (i *Installer) Install(caPEM []byte) error {
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.installed != nil {
		if bytes.Equal(i.installed, caPEM) {
			return nil
		}
		return ErrInstalled
	}
	if err := ownDir(i.opts.Dir); err != nil {
		return err
	}
	if err := os.Chmod(i.opts.Dir, 0o755); err != nil {
		return fmt.Errorf("trustca: %w", err)
	}
	// The system roots first: the bundle replaces the system file for
	// tools that read only one.
	var system []byte
	var present []string
	for _, b := range i.opts.Bundles {
		data, err := os.ReadFile(b)
		if err != nil {
			continue
		}
		present = append(present, b)
		if system == nil {
			system = data
		}
	}
	bundle := append(bytes.Clone(system), '\n')
	bundle = append(bundle, caPEM...)
	if err := writeFile(filepath.Join(i.opts.Dir, "ca.pem"), caPEM); err != nil {
		return err
	}
	if err := writeFile(i.BundlePath(), bundle); err != nil {
		return err
	}
	for _, b := range present {
		if err := i.opts.Mounter.BindReadOnly(i.BundlePath(), b); err == nil {
			i.covered = append(i.covered, b)
		}
	}
	i.installed = bytes.Clone(caPEM)
	return nil
}

// Covered returns the system bundle files the bundle lies over.
func (i *Installer) Covered() []string {
	i.mu.Lock()
	defer i.mu.Unlock()
	return append([]string(nil), i.covered...)
}

// CAPath is the CA certificate's file.
func (i *Installer) CAPath() string { return filepath.Join(i.opts.Dir, "ca.pem") }

// BundlePath is the bundle's file (system roots and the CA).
func (i *Installer) BundlePath() string { return filepath.Join(i.opts.Dir, "bundle.pem") }

// Env returns the variables that make tools trust the CA: nil until
// Install succeeded.
func (i *Installer) Env() map[string]string {
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.installed == nil {
		return nil
	}
	b := i.BundlePath()
	return map[string]string{
		"NODE_EXTRA_CA_CERTS": i.CAPath(), // added to Node's own roots
		"SSL_CERT_FILE":       b,          // OpenSSL (Python ssl, httpx), Go, Ruby
		"REQUESTS_CA_BUNDLE":  b,          // Python requests (certifi users)
		"CURL_CA_BUNDLE":      b,
		"GIT_SSL_CAINFO":      b,
	}
}

// ErrNotOwnDir is returned when the directory, or its parent, is a
// symbolic link or belongs to another user: someone else could then swap
// the bundle or have rayd write (and chmod) elsewhere.
var ErrNotOwnDir = errors.New("trustca: the CA directory is not rayd's own")

// ownDir makes dir and its parent where missing (never through a link)
// and checks both: real directories owned by rayd's user, writable by no
// one else. The grandparent (/run) is the system's.
func ownDir(dir string) error {
	if err := os.MkdirAll(filepath.Dir(filepath.Dir(dir)), 0o755); err != nil {
		return fmt.Errorf("trustca: %w", err)
	}
	for _, d := range []string{filepath.Dir(dir), dir} {
		fi, err := os.Lstat(d)
		if errors.Is(err, os.ErrNotExist) {
			if err = os.Mkdir(d, 0o755); err == nil || errors.Is(err, os.ErrExist) {
				fi, err = os.Lstat(d)
			}
		}
		if err != nil {
			return fmt.Errorf("trustca: %w", err)
		}
		if !fi.IsDir() || !ownedBySelf(fi) || fi.Mode().Perm()&0o022 != 0 {
			return ErrNotOwnDir
		}
	}
	return nil
}

// writeFile writes data to path atomically, mode 0644 (public
// certificates).
func writeFile(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp-*")
	if err != nil {
		return fmt.Errorf("trustca: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("trustca: %w", err)
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return fmt.Errorf("trustca: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("trustca: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("trustca: %w", err)
	}
	return nil
}

package localvm

// A platform owns the sandboxes of its state directory and nothing else.
// The machine-wide names of its sandboxes (cgroup parent, veth prefix,
// nftables table) come from a scope derived from the state directory:
//
//   - the scope is chosen once, from a hash of the state directory's
//     absolute path, and stored in the state directory (scopeFile), so a
//     restarted platform finds its sandboxes again;
//   - a machine-wide claim, a file /run/rayito/localvm/scopes/<scope>
//     holding the state directory's path, is flock-held while the platform
//     runs and stays behind while sandboxes of the scope live. A claim that
//     is held or names another state directory belongs to someone else: the
//     next candidate (a hash of the path and a counter) is tried, so two
//     state directories never get the same scope even on a hash collision.
//
// The claim is removed when the platform closes with no sandbox left.

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// scopeFile is the file in the state directory that holds the platform's
// scope.
const scopeFile = "scope"

// scopeLen is the length of a derived scope: 4 characters of [a-z0-9]
// (36^4 ≈ 1.7 million); the launcher's explicit test scopes have at most
// 3, so they never meet a derived one.
const scopeLen = 4

// maxScopeTries bounds the candidates tried before giving up.
const maxScopeTries = 64

// rootClaimDir holds the machine-wide scope claims (root).
const rootClaimDir = "/run/rayito/localvm/scopes"

// scopeClaim is a held claim on a scope.
type scopeClaim struct {
	scope string
	f     *os.File // flock-held; nil without root (nothing machine-wide to claim)
	path  string
}

// scopeCandidate returns the k-th candidate scope of state dir dir.
func scopeCandidate(dir string, k int) string {
	in := dir
	if k > 0 {
		in += "\x00" + strconv.Itoa(k)
	}
	sum := sha256.Sum256([]byte(in))
	v := binary.BigEndian.Uint64(sum[:8])
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
	var b [scopeLen]byte
	for i := range b {
		b[i] = alphabet[v%36]
		v /= 36
	}
	return string(b[:])
}

func validScope(s string) bool {
	if len(s) != scopeLen {
		return false
	}
	for _, c := range s {
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9') {
			return false
		}
	}
	return true
}

// readStoredScope returns the scope stored in the state directory, or "".
func readStoredScope(dir string) string {
	b, err := os.ReadFile(filepath.Join(dir, scopeFile))
	if err != nil {
		return ""
	}
	s := strings.TrimSpace(string(b))
	if !validScope(s) {
		return ""
	}
	return s
}

// claimScope chooses and claims the scope of state directory dir (absolute
// and clean; the caller holds its lock). Without root there is nothing
// machine-wide to protect: the scope is chosen and stored, not claimed.
func claimScope(dir string) (*scopeClaim, error) {
	if os.Geteuid() != 0 {
		return claimScopeIn(dir, "")
	}
	return claimScopeIn(dir, rootClaimDir)
}

// claimScopeIn is claimScope with the claims in claimDir ("": none).
func claimScopeIn(dir, claimDir string) (*scopeClaim, error) {
	stored := readStoredScope(dir)
	var cands []string
	if stored != "" {
		cands = append(cands, stored)
	}
	for k := 0; k < maxScopeTries; k++ {
		if c := scopeCandidate(dir, k); c != stored {
			cands = append(cands, c)
		}
	}
	var claim *scopeClaim
	if claimDir == "" {
		claim = &scopeClaim{scope: cands[0]}
	} else {
		if err := os.MkdirAll(claimDir, 0o700); err != nil {
			return nil, fmt.Errorf("localvm: scope claims: %w", err)
		}
		for _, c := range cands {
			cl, err := tryClaim(claimDir, c, dir)
			if err != nil {
				return nil, err
			}
			if cl != nil {
				claim = cl
				break
			}
		}
		if claim == nil {
			return nil, fmt.Errorf("localvm: no free platform scope for state dir %s after %d tries (claims in %s)", dir, len(cands), claimDir)
		}
	}
	if claim.scope != stored {
		if err := writeFileAtomic(filepath.Join(dir, scopeFile), []byte(claim.scope+"\n")); err != nil {
			claim.close()
			return nil, fmt.Errorf("localvm: storing the scope: %w", err)
		}
	}
	return claim, nil
}

// tryClaim claims scope for dir: nil, nil when another state directory
// holds or owns it.
func tryClaim(claimDir, scope, dir string) (*scopeClaim, error) {
	p := filepath.Join(claimDir, scope)
	for attempt := 0; attempt < 10; attempt++ {
		f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o600)
		if err != nil {
			return nil, fmt.Errorf("localvm: scope claim: %w", err)
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			_ = f.Close()
			if errors.Is(err, syscall.EWOULDBLOCK) {
				return nil, nil // a running platform holds it
			}
			return nil, fmt.Errorf("localvm: scope claim: %w", err)
		}
		// The file may have been removed (by a platform releasing its
		// claim) between our open and our lock: then start over.
		var st1, st2 syscall.Stat_t
		if syscall.Fstat(int(f.Fd()), &st1) != nil || syscall.Stat(p, &st2) != nil || st1.Ino != st2.Ino || st1.Dev != st2.Dev {
			_ = f.Close()
			continue
		}
		b := make([]byte, 4097)
		n, _ := f.ReadAt(b, 0)
		owner := string(bytes.TrimRight(b[:n], "\n"))
		switch owner {
		case dir:
			return &scopeClaim{scope: scope, f: f, path: p}, nil
		case "":
			if _, err := f.WriteAt([]byte(dir+"\n"), 0); err != nil {
				_ = f.Close()
				return nil, fmt.Errorf("localvm: scope claim: %w", err)
			}
			return &scopeClaim{scope: scope, f: f, path: p}, nil
		}
		// Another state directory's scope (its sandboxes may still run).
		_ = f.Close()
		return nil, nil
	}
	return nil, fmt.Errorf("localvm: scope claim %s keeps changing", p)
}

// drop removes the claim (the platform closes with nothing of its scope
// left) and releases it.
func (c *scopeClaim) drop() {
	if c == nil || c.f == nil {
		return
	}
	_ = os.Remove(c.path) // while still locked: see tryClaim
	c.close()
}

// close releases the claim and keeps the file: sandboxes of the scope
// still run, and only this state directory may sweep them.
func (c *scopeClaim) close() {
	if c == nil || c.f == nil {
		return
	}
	_ = c.f.Close()
	c.f = nil
}

func writeFileAtomic(path string, b []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		_ = os.Remove(tmp)
		return err
	}
	return nil
}

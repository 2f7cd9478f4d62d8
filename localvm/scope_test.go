package localvm

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestScopeCandidates(t *testing.T) {
	t.Parallel()
	a, b := scopeCandidate("/a", 0), scopeCandidate("/a", 1)
	if !validScope(a) || !validScope(b) || a == b {
		t.Fatalf("candidates %q %q", a, b)
	}
	if scopeCandidate("/a", 0) != a {
		t.Fatal("not stable")
	}
	if validScope("tst") || validScope("ABCD") || validScope("ab-d") {
		t.Fatal("validScope accepts a bad scope")
	}
}

// TestScopeClaims checks that a state dir keeps its scope across
// restarts, that a held claim or a claim naming another state dir is never
// taken (even when a state dir's hash, or its stored scope, points at it),
// and that a dropped claim disappears.
func TestScopeClaims(t *testing.T) {
	t.Parallel()
	claims := filepath.Join(t.TempDir(), "scopes")
	dirA, dirB, dirC := t.TempDir(), t.TempDir(), t.TempDir()

	a, err := claimScopeIn(dirA, claims)
	if err != nil {
		t.Fatal(err)
	}
	if a.scope != scopeCandidate(dirA, 0) || readStoredScope(dirA) != a.scope {
		t.Fatalf("scope %q, stored %q", a.scope, readStoredScope(dirA))
	}
	if b, _ := os.ReadFile(filepath.Join(claims, a.scope)); string(b) != dirA+"\n" {
		t.Fatalf("claim holds %q", b)
	}

	// B's stored scope is A's (as if their hashes collided): A holds it,
	// so B gets another one, and stores it.
	if err := os.WriteFile(filepath.Join(dirB, scopeFile), []byte(a.scope+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	b, err := claimScopeIn(dirB, claims)
	if err != nil {
		t.Fatal(err)
	}
	if b.scope == a.scope || readStoredScope(dirB) != b.scope {
		t.Fatalf("B got %q (A %q), stored %q", b.scope, a.scope, readStoredScope(dirB))
	}

	// A closes with sandboxes left: its claim stays, and a third state dir
	// whose stored scope is A's still cannot take it.
	a.close()
	if err := os.WriteFile(filepath.Join(dirC, scopeFile), []byte(a.scope+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := claimScopeIn(dirC, claims)
	if err != nil {
		t.Fatal(err)
	}
	if c.scope == a.scope || c.scope == b.scope {
		t.Fatalf("C got %q (A %q, B %q)", c.scope, a.scope, b.scope)
	}

	// A restarts: same scope.
	a2, err := claimScopeIn(dirA, claims)
	if err != nil {
		t.Fatal(err)
	}
	if a2.scope != a.scope {
		t.Fatalf("A restarted with %q, had %q", a2.scope, a.scope)
	}
	// Nothing left: the claim goes, and can be claimed by another dir.
	a2.drop()
	if _, err := os.Stat(filepath.Join(claims, a.scope)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("dropped claim: %v", err)
	}
	b.close()
	c.close()

	// No claims (not root): the scope is still derived and stored.
	d := t.TempDir()
	u, err := claimScopeIn(d, "")
	if err != nil || u.scope != scopeCandidate(d, 0) || readStoredScope(d) != u.scope {
		t.Fatalf("unclaimed: %+v %v", u, err)
	}
}

func TestInUseMessage(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s, f := newFakeServer(t, Options{StateDir: dir})
	_, err := open(t.Context(), s.opts, f.deps)
	if !errors.Is(err, ErrInUse) {
		t.Fatalf("second Server: %v", err)
	}
	want := fmt.Sprintf("another local platform is using state dir %s (pid %d)", s.opts.StateDir, os.Getpid())
	if !strings.Contains(err.Error(), want) {
		t.Fatalf("message %q, want %q", err, want)
	}
}

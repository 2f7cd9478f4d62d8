package rayito

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rayito-dev/rayito/proto/microvmsapi"
	"github.com/rayito-dev/rayito/sdk/internal/tokenstore"
)

// tokenOpts are the fake platform's options with a token store of the
// test's own, and that store.
func tokenOpts(t *testing.T, p *platform) ([]Option, tokenstore.Store) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "tokens")
	return p.opts(t, WithTokenStoreDir(dir)), tokenstore.Store{Dir: dir}
}

func hasToken(st tokenstore.Store, id string) bool {
	_, err := st.Load(id)
	return err == nil
}

// A sandbox that ended otherwise than by Kill loses its stored token as
// soon as the SDK learns that it ended, from any call: List, GetInfo,
// Info, Connect, Pause. A RUNNING one keeps it; so does an id the
// platform does not know (a sandbox of another platform may have it).
func TestTokensOfEndedSandboxesAreForgotten(t *testing.T) {
	t.Parallel()
	p := newPlatform(t)
	opts, st := tokenOpts(t, p)
	sbx, err := Create(t.Context(), opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer sbx.dp.close()
	if err := st.Save(endedID, testToken(t)); err != nil {
		t.Fatal(err)
	}
	if _, err := List(t.Context(), append(opts, WithStates("RUNNING"))...); err != nil {
		t.Fatal(err)
	}
	if hasToken(st, endedID) {
		t.Error("List reported the sandbox TERMINATED and its token stayed")
	}
	if !hasToken(st, fakeID) {
		t.Fatal("List removed the token of a RUNNING sandbox")
	}

	// fakeID ends at its maximum duration.
	p.setVM(func(vm *microvmsapi.Microvm) {
		vm.State, vm.StateReason = microvmsapi.StateTerminated, "max_duration"
	})
	for name, call := range map[string]func() error{
		"GetInfo": func() error { _, err := GetInfo(t.Context(), fakeID, opts...); return err },
		"Info":    func() error { _, err := sbx.Info(t.Context()); return err },
		"Connect": func() error { _, err := Connect(t.Context(), fakeID, opts...); return err },
		"Pause":   func() error { return Pause(t.Context(), fakeID, opts...) },
	} {
		if err := st.Save(fakeID, sbx.AccessToken()); err != nil {
			t.Fatal(err)
		}
		err := call()
		var ee *SandboxEndedError
		if err != nil && !errors.As(err, &ee) {
			t.Fatalf("%s: %v", name, err)
		}
		if hasToken(st, fakeID) {
			t.Errorf("%s saw the sandbox ended and its token stayed", name)
		}
	}

	const unknown = "microvm-on-another-platform"
	if err := st.Save(unknown, testToken(t)); err != nil {
		t.Fatal(err)
	}
	if err := Kill(t.Context(), unknown, opts...); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Kill of an unknown id = %v", err)
	}
	if !hasToken(st, unknown) {
		t.Error("Kill removed the token of an id this platform does not know")
	}
}

// Create sweeps the tokens saved longer ago than any sandbox lives, and
// only those.
func TestCreateSweepsStaleTokens(t *testing.T) {
	t.Parallel()
	p := newPlatform(t)
	opts, st := tokenOpts(t, p)
	now := time.Now()
	for id, age := range map[string]time.Duration{
		"microvm-stale": tokenMaxAge + time.Minute,
		"microvm-young": maxLifetime - time.Minute,
	} {
		if err := st.Save(id, testToken(t)); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(filepath.Join(st.Dir, id), now.Add(-age), now.Add(-age)); err != nil {
			t.Fatal(err)
		}
	}
	junk := filepath.Join(st.Dir, "microvm-junk")
	if err := os.WriteFile(junk, []byte("not a token"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(junk, now.Add(-30*time.Hour), now.Add(-30*time.Hour)); err != nil {
		t.Fatal(err)
	}
	sbx, err := Create(t.Context(), opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer sbx.dp.close()
	if hasToken(st, "microvm-stale") {
		t.Error("the stale token survived Create")
	}
	if !hasToken(st, "microvm-young") || !hasToken(st, fakeID) {
		t.Error("Create removed a token that may serve a live sandbox")
	}
	if _, err := os.Stat(junk); err != nil {
		t.Errorf("Create removed a file that is no token: %v", err)
	}
}

// A Sandbox whose own control plane no longer knows it (the platform
// dropped the record of the ended sandbox) loses its token too: it was
// made from that platform's answer, so no other platform holds it.
func TestTokenOfPurgedSandboxIsForgotten(t *testing.T) {
	t.Parallel()
	p := newPlatform(t)
	opts, st := tokenOpts(t, p)
	cfg := newConfig(opts)
	mv, err := controlPlane(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	const purged = "microvm-purged"
	tok := testToken(t)
	if err := st.Save(purged, tok); err != nil {
		t.Fatal(err)
	}
	s := newSandbox(cfg, mv, &microvmsapi.Microvm{MicrovmID: purged, State: microvmsapi.StateRunning, Endpoint: "x.microvms.localhost"}, tok)
	defer s.dp.close()
	var ee *SandboxEndedError
	if err := s.endOf(t.Context()); !errors.As(err, &ee) || ee.Reason != EndUnknown {
		t.Fatalf("endOf = %v", err)
	}
	if hasToken(st, purged) {
		t.Error("the token of a sandbox its platform no longer knows stayed")
	}
}

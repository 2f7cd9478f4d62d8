package registry_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rayito-dev/rayito/localvm/internal/launcher"
	"github.com/rayito-dev/rayito/localvm/internal/registry"
	"github.com/rayito-dev/rayito/localvm/internal/registry/registrytest"
	"github.com/rayito-dev/rayito/proto/microvmsapi"
)

// restart closes r and gives e a fresh launcher (alive: the ids).
func (e *env) restart(t *testing.T, r *registry.Registry, alive ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := r.Close(ctx); err != nil {
		t.Fatal(err)
	}
	e.l = &registrytest.Launcher{HooksAddr: e.hooks.Addr(), APIAddr: "127.0.0.1:18080"}
	e.l.SetAlive(alive...)
	e.opts.Launcher = e.l
}

func TestReopenReadoptsOrCleansUp(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r1 := e.open(t)
	tokIn := microvmsapi.RunMicrovmInput{ImageIdentifier: "local", ClientToken: "keep-me"}
	a := run(t, r1, tokIn)
	b := run(t, r1, microvmsapi.RunMicrovmInput{})
	c := run(t, r1, microvmsapi.RunMicrovmInput{})
	for _, m := range []microvmsapi.Microvm{a, b, c} {
		wait(t, r1, m.MicrovmID, microvmsapi.StateRunning)
	}
	if err := r1.Terminate(c.MicrovmID); err != nil {
		t.Fatal(err)
	}
	wait(t, r1, c.MicrovmID, microvmsapi.StateTerminated)
	e.restart(t, r1, a.MicrovmID)

	r2 := e.open(t)
	if got, _ := r2.Get(a.MicrovmID); got.State != microvmsapi.StateRunning || got.Endpoint != a.Endpoint {
		t.Fatalf("a: %+v", got)
	}
	gotB, _ := r2.Get(b.MicrovmID)
	if gotB.State != microvmsapi.StateTerminated || gotB.StateReason != registry.ReasonPlatformLost || gotB.TerminatedAt == nil {
		t.Fatalf("b: %+v", gotB)
	}
	if got, _ := r2.Get(c.MicrovmID); got.State != microvmsapi.StateTerminated || got.StateReason != registry.ReasonKilledByUser {
		t.Fatalf("c: %+v", got)
	}
	waitFile(t, e.dir, b.MicrovmID, "TERMINATED")
	if cl := e.l.Cleaned(); len(cl) != 1 || cl[0].ID != b.MicrovmID {
		t.Fatalf("Cleanup got %+v", cl)
	}
	if sw := e.l.Swept(); len(sw) != 1 || len(sw[0]) != 1 || sw[0][0].ID != a.MicrovmID {
		t.Fatalf("Sweep got %+v", sw)
	}
	// The endpoint still resolves and the client token is remembered.
	if tg, ok := r2.Lookup(a.Endpoint); !ok || !tg.Running() {
		t.Fatal("adopted microVM not reachable")
	}
	if again := run(t, r2, tokIn); again.MicrovmID != a.MicrovmID {
		t.Fatal("client token forgotten across a restart")
	}
	// New microVMs list before the old ones.
	d := run(t, r2, microvmsapi.RunMicrovmInput{})
	if out, _ := r2.List(registry.ListInput{}); len(out.Items) != 4 || out.Items[0].MicrovmID != d.MicrovmID {
		t.Fatalf("list after restart %+v", out.Items)
	}
	// The adopted one is fully managed: rayd exiting or Terminate ends it.
	before := e.hooks.Terminates()
	if err := r2.Terminate(a.MicrovmID); err != nil {
		t.Fatal(err)
	}
	wait(t, r2, a.MicrovmID, microvmsapi.StateTerminated)
	if e.l.Instance(a.MicrovmID).Terminated() != 1 || e.hooks.Terminates() != before+1 {
		t.Fatal("adopted sandbox not torn down")
	}
}

func TestReopenRearmsMaximumDuration(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r1 := e.open(t)
	m := run(t, r1, microvmsapi.RunMicrovmInput{MaximumDurationInSeconds: 2})
	wait(t, r1, m.MicrovmID, microvmsapi.StateRunning)
	e.restart(t, r1, m.MicrovmID)
	r2 := e.open(t)
	got := wait(t, r2, m.MicrovmID, microvmsapi.StateTerminated)
	if got.StateReason != registry.ReasonMaxDuration || got.TerminatedAt.Sub(*got.StartedAt) < 2*time.Second {
		t.Fatalf("got %+v", got)
	}
}

func TestReopenAdoptedExit(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r1 := e.open(t)
	m := run(t, r1, microvmsapi.RunMicrovmInput{})
	wait(t, r1, m.MicrovmID, microvmsapi.StateRunning)
	e.restart(t, r1, m.MicrovmID)
	r2 := e.open(t)
	e.l.Instance(m.MicrovmID).Exit(0)
	if got := wait(t, r2, m.MicrovmID, microvmsapi.StateTerminated); got.StateReason != "init_exited: exit status unknown" {
		t.Fatalf("got %+v", got)
	}
}

// writeState writes a state file as a crashed platform would have left it.
func writeState(t *testing.T, dir, id string, m microvmsapi.Microvm, rec *launcher.Record) {
	t.Helper()
	m.MicrovmID = id
	b, err := json.Marshal(map[string]any{"version": 1, "seq": 7, "microvm": m, "fingerprint": "x", "record": rec})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "vms", id), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "vms", id+".json"), b, 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestReopenAfterCrash(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	started := time.Now().UTC().Add(-time.Minute)
	long := time.Now().UTC().Add(-time.Hour)
	const (
		pendingAlive = "microvm-00000000-0000-4000-8000-000000000001"
		terminating  = "microvm-00000000-0000-4000-8000-000000000002"
		expired      = "microvm-00000000-0000-4000-8000-000000000003"
		orphan       = "microvm-00000000-0000-4000-8000-000000000004"
		corrupt      = "microvm-00000000-0000-4000-8000-000000000005"
		noRecord     = "microvm-00000000-0000-4000-8000-000000000006"
	)
	rec := func(id string) *launcher.Record { return &launcher.Record{ID: id, Pid: 1, HooksAddr: e.hooks.Addr()} }
	writeState(t, e.dir, pendingAlive, microvmsapi.Microvm{State: microvmsapi.StatePending, StartedAt: &started, MaximumDurationInSeconds: 60}, rec(pendingAlive))
	writeState(t, e.dir, terminating, microvmsapi.Microvm{State: microvmsapi.StateTerminating, StateReason: registry.ReasonMaxDuration, StartedAt: &started}, rec(terminating))
	writeState(t, e.dir, expired, microvmsapi.Microvm{State: microvmsapi.StateTerminated, StartedAt: &long, TerminatedAt: &long}, nil)
	writeState(t, e.dir, noRecord, microvmsapi.Microvm{State: microvmsapi.StateRunning, StartedAt: &started}, nil)
	if err := os.MkdirAll(filepath.Join(e.dir, "vms", orphan), 0o700); err != nil {
		t.Fatal(err)
	}
	_ = os.WriteFile(filepath.Join(e.dir, "vms", corrupt+".json"), []byte("{"), 0o600)
	_ = os.WriteFile(filepath.Join(e.dir, "vms", ".tmp-123"), []byte("half"), 0o600)
	_ = os.WriteFile(filepath.Join(e.dir, "vms", "README"), []byte("mine"), 0o600)
	e.l.SetAlive(pendingAlive)

	r := e.open(t)
	got, _ := r.Get(pendingAlive)
	if got.State != microvmsapi.StateTerminated || got.StateReason != registry.ReasonPlatformLost {
		t.Fatalf("pending: %+v", got)
	}
	if e.l.Instance(pendingAlive).Terminated() != 1 {
		t.Fatal("the interrupted live sandbox was not torn down")
	}
	got, _ = r.Get(terminating)
	if got.State != microvmsapi.StateTerminated || got.StateReason != registry.ReasonMaxDuration {
		t.Fatalf("terminating: %+v", got)
	}
	if cl := e.l.Cleaned(); len(cl) != 1 || cl[0].ID != terminating {
		t.Fatalf("Cleanup got %+v", cl)
	}
	if got, _ := r.Get(noRecord); got.State != microvmsapi.StateTerminated {
		t.Fatalf("noRecord: %+v", got)
	}
	if sw := e.l.Swept(); len(sw) != 1 || len(sw[0]) != 0 {
		t.Fatalf("Sweep got %+v", sw)
	}
	_, err := r.Get(expired)
	wantType(t, err, microvmsapi.ResourceNotFoundException)
	for _, gone := range []string{expired + ".json", expired, orphan, ".tmp-123"} {
		if _, err := os.Stat(filepath.Join(e.dir, "vms", gone)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s still there", gone)
		}
	}
	for _, kept := range []string{corrupt + ".json", "README"} {
		if _, err := os.Stat(filepath.Join(e.dir, "vms", kept)); err != nil {
			t.Errorf("%s removed: %v", kept, err)
		}
	}
	// Sequence numbers continue after the highest loaded one.
	m := run(t, r, microvmsapi.RunMicrovmInput{})
	if out, _ := r.List(registry.ListInput{MaxResults: 1}); out.Items[0].MicrovmID != m.MicrovmID {
		t.Fatal("new microVM not first")
	}
}

func TestStateDirChecks(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	if err := os.Chmod(e.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	e.open(t)
	if fi, _ := os.Stat(e.dir); fi.Mode().Perm() != 0o700 {
		t.Fatalf("state dir mode %v", fi.Mode())
	}
	file := filepath.Join(t.TempDir(), "f")
	_ = os.WriteFile(file, nil, 0o600)
	if _, err := registry.Open(t.Context(), registry.Options{StateDir: file, Launcher: e.l, Minter: e.m}); err == nil {
		t.Fatal("Open on a file")
	}
	if _, err := registry.Open(t.Context(), registry.Options{StateDir: e.dir}); err == nil {
		t.Fatal("Open without a launcher")
	}
}

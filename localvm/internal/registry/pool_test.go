package registry_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rayito-dev/rayito/localvm/internal/launcher"
	"github.com/rayito-dev/rayito/localvm/internal/registry"
	"github.com/rayito-dev/rayito/proto/microvmsapi"
)

// poolEnv is an env whose registry keeps n pre-booted sandboxes.
func poolEnv(t *testing.T, n int) *env {
	t.Helper()
	e := newEnv(t)
	e.l.Priv = true
	e.opts.Prebooted = n
	return e
}

// waitPool waits until the pool holds ready sandboxes.
func waitPool(t *testing.T, r *registry.Registry, ready int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, _ := r.Prebooted()
		if got == ready {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("pool holds %d, want %d", got, ready)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// launchedIDs lists the ids of every Launch, in order.
func launchedIDs(e *env) []string {
	var out []string
	for _, s := range e.l.Launched() {
		out = append(out, s.ID)
	}
	return out
}

// TestPoolHandOut: the pool boots sandboxes without Internet access and
// calls their ready hook; RunMicrovm takes one (its id becomes the
// microVM's), assigns the request's egress, then runs it; the pool
// refills; pooled sandboxes are neither listed nor gettable.
func TestPoolHandOut(t *testing.T) {
	e := poolEnv(t, 2)
	r := e.open(t)
	waitPool(t, r, 2)
	if ready, target := r.Prebooted(); ready != 2 || target != 2 {
		t.Fatalf("Prebooted = %d, %d", ready, target)
	}
	pooled := launchedIDs(e)
	for _, s := range e.l.Launched() {
		if s.Internet || s.MemoryBytes != 0 || s.PidsMax != 0 || len(s.Env) != 0 {
			t.Fatalf("pooled spec %+v", s)
		}
	}
	if n := e.hooks.Calls("ready"); n != 2 {
		t.Fatalf("ready hooks: %d", n)
	}
	if len(e.hooks.Runs()) != 0 {
		t.Fatal("a pooled sandbox got a run hook")
	}
	if l, _ := r.List(registry.ListInput{}); len(l.Items) != 0 {
		t.Fatalf("pooled sandboxes listed: %+v", l.Items)
	}
	for _, id := range pooled {
		if _, err := r.Get(id); !errors.Is(err, registry.ErrNotFound) {
			t.Fatalf("Get of a pooled sandbox: %v", err)
		}
		if err := r.Terminate(id); !errors.Is(err, registry.ErrNotFound) {
			t.Fatalf("Terminate of a pooled sandbox: %v", err)
		}
		if _, ok := r.Lookup(id[len("microvm-"):] + registry.EndpointSuffix); ok {
			t.Fatal("a pooled sandbox's endpoint is routed")
		}
	}

	m := run(t, r, microvmsapi.RunMicrovmInput{RunHookPayload: "p", EgressNetworkConnectors: []string{microvmsapi.ConnectorARN("us-east-1", microvmsapi.ConnectorInternet)}})
	if m.State != microvmsapi.StatePending && m.State != microvmsapi.StateRunning {
		t.Fatalf("state %s", m.State)
	}
	if m.MicrovmID != pooled[0] {
		t.Fatalf("handed out %s, want the oldest pooled %s", m.MicrovmID, pooled[0])
	}
	wait(t, r, m.MicrovmID, microvmsapi.StateRunning)
	if got := e.l.Instance(m.MicrovmID).Assigned(); len(got) != 1 || !got[0].Internet {
		t.Fatalf("assigned %+v", got)
	}
	runs := e.hooks.Runs()
	if len(runs) != 1 || runs[0].MicrovmID != m.MicrovmID || runs[0].RunHookPayload != "p" {
		t.Fatalf("runs %+v", runs)
	}
	if rec := readState(t, e.dir, m.MicrovmID)["record"].(map[string]any); rec["internet"] != true {
		t.Fatalf("state file record %v", rec)
	}
	waitPool(t, r, 2)
	if n := len(e.l.Launched()); n != 3 {
		t.Fatalf("%d launches, want 3", n)
	}
	if l, _ := r.List(registry.ListInput{}); len(l.Items) != 1 || l.Items[0].MicrovmID != m.MicrovmID {
		t.Fatalf("list %+v", l.Items)
	}

	// A second request without Internet access gets the other one, and
	// no egress.
	m2 := run(t, r, microvmsapi.RunMicrovmInput{})
	if m2.MicrovmID != pooled[1] {
		t.Fatalf("handed out %s, want %s", m2.MicrovmID, pooled[1])
	}
	wait(t, r, m2.MicrovmID, microvmsapi.StateRunning)
	if got := e.l.Instance(m2.MicrovmID).Assigned(); len(got) != 1 || got[0].Internet {
		t.Fatalf("assigned %+v", got)
	}
}

// TestPoolRefillAfterRun: the refill waits until the hand-out's run hook
// has answered, and boots one sandbox at a time.
func TestPoolRefillAfterRun(t *testing.T) {
	e := poolEnv(t, 1)
	r := e.open(t)
	waitPool(t, r, 1)
	e.hooks.SetRun(200, 300*time.Millisecond)
	m := run(t, r, microvmsapi.RunMicrovmInput{})
	time.Sleep(150 * time.Millisecond)
	if n := len(e.l.Launched()); n != 1 {
		t.Fatalf("the pool refilled during the hand-out's run hook (%d launches)", n)
	}
	wait(t, r, m.MicrovmID, microvmsapi.StateRunning)
	waitPool(t, r, 1)
}

// TestPoolDeadSandboxReplaced: a pooled sandbox whose rayd exits is
// dropped, destroyed and replaced, and never handed out.
func TestPoolDeadSandboxReplaced(t *testing.T) {
	e := poolEnv(t, 1)
	r := e.open(t)
	waitPool(t, r, 1)
	dead := launchedIDs(e)[0]
	e.l.Instance(dead).Kill(syscall.SIGKILL)
	deadline := time.Now().Add(10 * time.Second)
	for len(e.l.Launched()) < 2 || e.l.Instance(dead).Terminated() == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("not replaced: %d launches, terminated %d", len(e.l.Launched()), e.l.Instance(dead).Terminated())
		}
		time.Sleep(2 * time.Millisecond)
	}
	waitPool(t, r, 1)
	if _, err := os.Stat(filepath.Join(e.dir, "vms", dead)); !os.IsNotExist(err) {
		t.Fatalf("the dead sandbox's directory: %v", err)
	}
	m := run(t, r, microvmsapi.RunMicrovmInput{})
	if m.MicrovmID == dead || m.MicrovmID != launchedIDs(e)[1] {
		t.Fatalf("handed out %s (dead %s, launched %v)", m.MicrovmID, dead, launchedIDs(e))
	}
	wait(t, r, m.MicrovmID, microvmsapi.StateRunning)
}

// TestPoolAssignFailureBootsFresh: a pooled sandbox that cannot be
// assigned is destroyed and the microVM boots its own, under the same id.
func TestPoolAssignFailureBootsFresh(t *testing.T) {
	e := poolEnv(t, 1)
	e.l.AssignErr = launcher.ErrAssignLimits
	r := e.open(t)
	waitPool(t, r, 1)
	pooled := launchedIDs(e)[0]
	first := e.l.Instance(pooled)
	m := run(t, r, microvmsapi.RunMicrovmInput{})
	if m.MicrovmID != pooled {
		t.Fatalf("id %s, want %s", m.MicrovmID, pooled)
	}
	wait(t, r, m.MicrovmID, microvmsapi.StateRunning)
	if first.Terminated() == 0 {
		t.Fatal("the unusable pooled sandbox was not destroyed")
	}
	if got := launchedIDs(e); len(got) < 2 || got[1] != pooled {
		t.Fatalf("launches %v", got)
	}
	if e.l.Instance(pooled) == first {
		t.Fatal("the microVM runs on the unusable sandbox")
	}
}

// TestPoolClose: Close terminates the pool's sandboxes and leaves the
// microVMs' running.
func TestPoolClose(t *testing.T) {
	e := poolEnv(t, 2)
	r, err := registry.Open(t.Context(), e.opts)
	if err != nil {
		t.Fatal(err)
	}
	waitPool(t, r, 2)
	m := run(t, r, microvmsapi.RunMicrovmInput{})
	wait(t, r, m.MicrovmID, microvmsapi.StateRunning)
	waitPool(t, r, 2)
	if err := r.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	live := e.l.Live()
	if len(live) != 1 || live[0] != m.MicrovmID {
		t.Fatalf("alive after Close: %v, want only %s", live, m.MicrovmID)
	}
	for _, id := range launchedIDs(e) {
		if id == m.MicrovmID {
			continue
		}
		if _, err := os.Stat(filepath.Join(e.dir, "vms", id)); !os.IsNotExist(err) {
			t.Fatalf("pooled sandbox directory left: %v", err)
		}
	}
}

// TestPoolQuota: the pool fills only capacity that users leave free
// under MaxSandboxes, and never makes a user's RunMicrovm fail.
func TestPoolQuota(t *testing.T) {
	e := poolEnv(t, 2)
	e.opts.MaxSandboxes = 2
	r := e.open(t)
	waitPool(t, r, 2)
	a := run(t, r, microvmsapi.RunMicrovmInput{})
	wait(t, r, a.MicrovmID, microvmsapi.StateRunning)
	waitPool(t, r, 1) // one user + one pooled
	time.Sleep(50 * time.Millisecond)
	if ready, _ := r.Prebooted(); ready != 1 {
		t.Fatalf("pool %d beyond the quota", ready)
	}
	b := run(t, r, microvmsapi.RunMicrovmInput{})
	wait(t, r, b.MicrovmID, microvmsapi.StateRunning)
	time.Sleep(50 * time.Millisecond)
	if ready, _ := r.Prebooted(); ready != 0 {
		t.Fatalf("pool %d beyond the quota", ready)
	}
	_, err := r.Run(t.Context(), microvmsapi.RunMicrovmInput{ImageIdentifier: "local"})
	wantType(t, err, microvmsapi.ServiceQuotaExceededException)
	if err := r.Terminate(a.MicrovmID); err != nil {
		t.Fatal(err)
	}
	wait(t, r, a.MicrovmID, microvmsapi.StateTerminated)
	waitPool(t, r, 1)
}

// TestPoolUnsupported: a launcher that cannot pre-boot gets no pool.
func TestPoolUnsupported(t *testing.T) {
	e := poolEnv(t, 2)
	e.l.NoPool = launcher.ErrNoPool
	r := e.open(t)
	time.Sleep(50 * time.Millisecond)
	if ready, target := r.Prebooted(); ready != 0 || target != 0 || len(e.l.Launched()) != 0 {
		t.Fatalf("Prebooted = %d, %d; %d launches", ready, target, len(e.l.Launched()))
	}
	m := run(t, r, microvmsapi.RunMicrovmInput{})
	wait(t, r, m.MicrovmID, microvmsapi.StateRunning)
}

// TestPoolRaces: concurrent RunMicrovm calls and Close: every sandbox
// launched is either a microVM Run answered or terminated, and the
// hand-outs never give one sandbox twice.
func TestPoolRaces(t *testing.T) {
	for round := range 5 {
		e := poolEnv(t, 4)
		r, err := registry.Open(t.Context(), e.opts)
		if err != nil {
			t.Fatal(err)
		}
		waitPool(t, r, 4)
		var mu sync.Mutex
		var ids []string
		var wg sync.WaitGroup
		for range 12 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				m, err := r.Run(context.Background(), microvmsapi.RunMicrovmInput{ImageIdentifier: "local"})
				if err == nil {
					mu.Lock()
					ids = append(ids, m.MicrovmID)
					mu.Unlock()
				} else if !errors.Is(err, registry.ErrClosed) {
					t.Errorf("Run: %v", err)
				}
			}()
		}
		time.Sleep(time.Duration(round) * time.Millisecond)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if err := r.Close(ctx); err != nil {
			t.Fatal(err)
		}
		cancel()
		wg.Wait()
		slices.Sort(ids)
		if len(slices.Compact(slices.Clone(ids))) != len(ids) {
			t.Fatalf("one id answered twice: %v", ids)
		}
		for _, id := range e.l.Live() {
			if !slices.Contains(ids, id) {
				t.Fatalf("round %d: %s alive after Close and nobody's (answered: %v)", round, id, ids)
			}
		}
	}
}

// TestRootImage: the image local-root is launched with RAYITO_ALLOW_ROOT=1
// in rayd's environment, never from the pool (whose sandboxes booted
// without it); any other image without it; and a platform whose sandboxes
// have no root (rootless, unisolated) refuses it.
func TestRootImage(t *testing.T) {
	e := poolEnv(t, 1)
	r := e.open(t)
	waitPool(t, r, 1)
	pooled := launchedIDs(e)
	m := run(t, r, microvmsapi.RunMicrovmInput{ImageIdentifier: "local-root"})
	if m.MicrovmID == pooled[0] || m.ImageArn != "local-root" {
		t.Fatalf("local-root: %+v (pooled %v)", m, pooled)
	}
	wait(t, r, m.MicrovmID, microvmsapi.StateRunning)
	var spec *launcher.Spec
	for _, s := range e.l.Launched() {
		if s.ID == m.MicrovmID {
			spec = &s
		}
	}
	if spec == nil || !slices.Equal(spec.Env, []string{"RAYITO_ALLOW_ROOT=1"}) {
		t.Fatalf("local-root's spec %+v", spec)
	}
	plain := run(t, r, microvmsapi.RunMicrovmInput{ImageIdentifier: "local"})
	wait(t, r, plain.MicrovmID, microvmsapi.StateRunning)
	if plain.MicrovmID != pooled[0] {
		t.Fatalf("local: %s, want the pooled %s", plain.MicrovmID, pooled[0])
	}
	for _, s := range e.l.Launched() {
		if s.ID != m.MicrovmID && len(s.Env) != 0 {
			t.Fatalf("%s got %v", s.ID, s.Env)
		}
	}

	unpriv := newEnv(t)
	ur := unpriv.open(t)
	_, err := ur.Run(t.Context(), microvmsapi.RunMicrovmInput{ImageIdentifier: "local-root"})
	wantType(t, err, microvmsapi.ValidationException)
	if !strings.Contains(err.Error(), "needs the root local platform") {
		t.Fatalf("unprivileged local-root: %v", err)
	}
	if n := len(unpriv.l.Launched()); n != 0 {
		t.Fatalf("launched %d", n)
	}
}

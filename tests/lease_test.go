package tests

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rayito-dev/rayito/localvm"
	rayito "github.com/rayito-dev/rayito/sdk"
)

// TestLease: on the local platform, a sandbox with a one-minute idle
// policy stays running through a silent stretch longer than that while a
// lease holds it (its twin without a lease is paused by the platform),
// is paused a few seconds after the lease ends (after its pre-pause
// hook), and a new lease resumes it.
func TestLease(t *testing.T) {
	t.Parallel() // a long wait on sandboxes: beside the other parallel tests (each has its own subnet, testSubnet)
	if !isRoot() {
		t.Skip("needs root: the root local platform (pause uses its cgroup freezer)")
	}
	// An idle "second" of 100 ms: the one-minute idle policy (the API's
	// least) lasts 6 s here.
	const unit = 100 * time.Millisecond
	p := startPlatform(t, "", func(o *localvm.Options) { o.IdleUnit = unit })
	defer p.stop(true)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	create := func() *rayito.Sandbox {
		sbx, err := rayito.Create(ctx, p.opts(rayito.WithTimeout(30*time.Minute), rayito.WithIdlePolicy(time.Minute, time.Hour, false))...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = sbx.Kill(context.Background()) })
		return sbx
	}
	leased, bare := create(), create()
	state := func(sbx *rayito.Sandbox) string {
		info, err := sbx.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return info.State
	}

	var mu sync.Mutex
	var hooked []string
	var errs []error
	l, err := leased.Lease(ctx, rayito.WithHeartbeat(time.Second), rayito.WithPauseAfter(2*time.Second),
		rayito.WithPrePause(func(ctx context.Context, sbx *rayito.Sandbox) error {
			// The sandbox still runs when a hook does.
			res, err := sbx.Commands.Run(ctx, "echo flushed > /tmp/hook")
			mu.Lock()
			defer mu.Unlock()
			if err == nil && res.ExitCode == 0 {
				hooked = append(hooked, sbx.ID())
			}
			return err
		}),
		rayito.WithLeaseErrors(func(err error) { mu.Lock(); errs = append(errs, err); mu.Unlock() }))
	if err != nil {
		t.Fatal(err)
	}
	// The agent's silent model call: nothing reaches either sandbox for
	// longer than the idle time (80 idle "seconds").
	time.Sleep(80 * unit)
	if st := state(bare); st != "SUSPENDED" {
		t.Errorf("the sandbox without a lease is %s after 80 idle seconds, want SUSPENDED (the control)", st)
	}
	if st := state(leased); st != "RUNNING" {
		t.Fatalf("the leased sandbox is %s after a silent 80 idle seconds, want RUNNING", st)
	}
	l.End()
	deadline := time.Now().Add(20 * time.Second)
	for state(leased) != "SUSPENDED" {
		if time.Now().After(deadline) {
			t.Fatalf("the sandbox is %s 20 s after its lease ended, want SUSPENDED", state(leased))
		}
		time.Sleep(250 * time.Millisecond)
	}
	mu.Lock()
	if len(hooked) != 1 || len(errs) != 0 {
		t.Errorf("pre-pause hook runs %v, errors %v", hooked, errs)
	}
	mu.Unlock()

	// A new lease resumes it, with what the hook wrote.
	l2, err := leased.Lease(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer l2.End()
	if st := state(leased); st != "RUNNING" {
		t.Errorf("under a new lease: %s", st)
	}
	res, err := leased.Commands.Run(ctx, "cat /tmp/hook")
	if err != nil || strings.TrimSpace(res.Stdout) != "flushed" {
		t.Errorf("after the resume: %v %+v", err, res)
	}
}

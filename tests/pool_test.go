package tests

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	rayito "github.com/rayito-dev/rayito/sdk"
	"github.com/rayito-dev/rayito/sdk/microvms"
	"github.com/rayito-dev/rayito/sdk/secrets"
)

// poolWarmup writes a file naming the sandbox and starts a process:
// both must be there after the pool's pause and Take's resume.
func poolWarmup(ctx context.Context, sbx *rayito.Sandbox) error {
	if _, err := sbx.Files.Write(ctx, "/home/user/warm.txt", []byte("warmed "+sbx.ID())); err != nil {
		return err
	}
	_, err := sbx.Commands.Start(ctx, "exec sleep 3600")
	return err
}

// waitUntil polls cond for up to within.
func waitUntil(t *testing.T, what string, within time.Duration, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(within); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", within, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// takeConcurrently takes n sandboxes at once: with n above the ready
// slots, the rest fall back to create (a refill takes far longer than the
// takes).
func takeConcurrently(t *testing.T, ctx context.Context, p *rayito.SandboxPool, n int) []*rayito.Sandbox {
	t.Helper()
	out := make([]*rayito.Sandbox, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { out[i], errs[i] = p.Take(ctx) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		for _, s := range out {
			if s != nil {
				_ = s.Kill(context.Background())
			}
		}
		t.Fatal(err)
	}
	return out
}

// suspended lists the platform's paused sandboxes.
func suspended(t *testing.T, ctx context.Context, p *platform) []string {
	t.Helper()
	infos, err := rayito.List(ctx, p.opts(rayito.WithStates("SUSPENDED"))...)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, i := range infos {
		ids = append(ids, i.ID)
	}
	return ids
}

// A pool of 3 on the root local platform: it fills with paused
// sandboxes; three Takes resume them (RUNNING, a command runs, the file
// and the process of the warmup are there), a fourth at the same time
// falls back to create; a slot killed behind the pool's back is swept and
// never handed out; Close kills the paused slots and leaves the taken
// sandboxes running.
func TestPoolLocal(t *testing.T) {
	if !isRoot() {
		t.Skip("the pool pauses its sandboxes: that needs the root platform's cgroup freezer; run as root")
	}
	p := startPlatform(t, "")
	defer p.stop(true)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	pool, err := rayito.NewPool(ctx, rayito.PoolConfig{Size: 3, SweepInterval: 200 * time.Millisecond, Warmup: poolWarmup,
		Create: p.opts(rayito.WithEnvs(map[string]string{"POOL": "yes"}))})
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close(context.Background())
	waitUntil(t, "3 ready slots", 2*time.Minute, func() bool { return pool.Stats().Ready == 3 })
	if st := pool.Stats(); st.KeepsRunning || st.FillFailures != 0 {
		t.Fatalf("stats after the fill: %+v", st)
	}
	slots := suspended(t, ctx, p)
	if len(slots) != 3 {
		t.Fatalf("%d paused sandboxes on the platform, want 3", len(slots))
	}
	isSlot := map[string]bool{}
	for _, id := range slots {
		isSlot[id] = true
	}

	var all []*rayito.Sandbox
	defer func() {
		for _, s := range all {
			_ = s.Kill(context.Background())
		}
	}()
	got := takeConcurrently(t, ctx, pool, 4)
	all = append(all, got...)
	if st := pool.Stats(); st.Hits != 3 || st.Fallbacks != 1 || st.Taken != 4 {
		t.Fatalf("stats after 4 takes: %+v", st)
	}
	hits := 0
	for _, s := range got {
		info, err := s.Info(ctx)
		if err != nil || info.State != "RUNNING" {
			t.Fatalf("taken %s: %+v %v", s.ID(), info, err)
		}
		res, err := s.Commands.Run(ctx, `echo "$POOL"; cat /home/user/warm.txt 2>/dev/null; echo; pgrep -x sleep >/dev/null && echo sleeping; true`)
		if err != nil {
			t.Fatalf("taken %s: %v", s.ID(), err)
		}
		if isSlot[s.ID()] {
			hits++
			if want := "yes\nwarmed " + s.ID() + "\nsleeping\n"; res.Stdout != want {
				t.Errorf("resumed slot %s: %q, want %q", s.ID(), res.Stdout, want)
			}
		} else if res.Stdout != "yes\n\n" {
			t.Errorf("fallback %s: %q (it was not warmed)", s.ID(), res.Stdout)
		}
	}
	if hits != 3 {
		t.Fatalf("%d of the 4 taken sandboxes were pool slots, want 3", hits)
	}

	// A slot killed behind the pool's back.
	waitUntil(t, "the refill", 2*time.Minute, func() bool { return pool.Stats().Ready == 3 })
	victim := suspended(t, ctx, p)[0]
	if err := rayito.Kill(ctx, victim, p.opts()...); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the sweep", time.Minute, func() bool { return pool.Stats().Swept >= 1 })
	waitUntil(t, "the refill", 2*time.Minute, func() bool { return pool.Stats().Ready == 3 })
	more := takeConcurrently(t, ctx, pool, 3)
	all = append(all, more...)
	for _, s := range more {
		if s.ID() == victim {
			t.Fatal("the killed slot was handed out")
		}
	}
	if st := pool.Stats(); st.Hits != 6 || st.Fallbacks != 1 {
		t.Errorf("stats: %+v", st)
	}

	waitUntil(t, "the refill", 2*time.Minute, func() bool { return pool.Stats().Ready == 3 })
	left := suspended(t, ctx, p)
	if err := pool.Close(ctx); err != nil {
		t.Fatal(err)
	}
	for _, id := range left {
		info, err := rayito.GetInfo(ctx, id, p.opts()...)
		if err != nil || (info.State != "TERMINATED" && info.State != "TERMINATING") {
			t.Errorf("slot %s after Close: %+v %v", id, info, err)
		}
	}
	for _, s := range all {
		if info, err := s.Info(ctx); err != nil || info.State != "RUNNING" {
			t.Errorf("taken %s after Close: %+v %v", s.ID(), info, err)
		}
	}
	t.Logf("stats: %+v", pool.Stats())
}

// Take's secret options reach the taken sandbox: WithSecrets' envs in
// its commands, from a resumed slot (and from whatever the second Take
// gets); a sandbox option is refused before any slot is used.
func TestPoolTakeSecrets(t *testing.T) {
	if !isRoot() {
		t.Skip("the pool pauses its sandboxes: that needs the root platform's cgroup freezer; run as root")
	}
	p := startPlatform(t, "")
	defer p.stop(true)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	store := secrets.NewMemoryStore()
	if _, err := store.CreateSecret(ctx, "api/key", []byte("s3cr3t-value")); err != nil {
		t.Fatal(err)
	}
	pool, err := rayito.NewPool(ctx, rayito.PoolConfig{Size: 1, Create: p.opts()})
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close(context.Background())
	waitUntil(t, "a ready slot", 2*time.Minute, func() bool { return pool.Stats().Ready == 1 })
	if _, err := pool.Take(ctx, rayito.WithEnvs(map[string]string{"A": "b"})); !errors.Is(err, rayito.ErrInvalidArgument) {
		t.Fatalf("Take with WithEnvs = %v", err)
	}
	if st := pool.Stats(); st.Ready != 1 || st.Taken != 0 {
		t.Fatalf("a refused Take used a slot: %+v", st)
	}
	secretOpts := []rayito.Option{secrets.WithStore(store), secrets.WithSecrets(map[string]secrets.Ref{"API_KEY": {Name: "api/key"}})}
	// The second Take is a fallback unless the refill beat it.
	for i, want := range []string{"hit", "second"} {
		sbx, err := pool.Take(ctx, secretOpts...)
		if err != nil {
			t.Fatal(err)
		}
		defer sbx.Kill(context.Background())
		res, err := sbx.Commands.Run(ctx, `echo "$API_KEY"`)
		if err != nil || res.Stdout != "s3cr3t-value\n" {
			t.Fatalf("%s: %+v %v", want, res, err)
		}
		if st := pool.Stats(); st.Hits < 1 || st.Taken != i+1 {
			t.Fatalf("%s: stats %+v", want, st)
		}
	}
}

// The pool on the aws backend, through the scripted fake in front of the
// real platform: filling is RunMicrovm then SuspendMicrovm, Take is
// ResumeMicrovm, Close is TerminateMicrovm of the ready slots, all
// signed.
func TestPoolAWSFake(t *testing.T) {
	f := startAWSFake(t)
	// The fake hands the image's name to the platform behind it, which
	// knows its own templates only.
	arn := f.AddImage(rayito.LocalTemplate)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	pool, err := rayito.NewPool(ctx, rayito.PoolConfig{Size: 2, Create: f.opts(t, rayito.WithTemplate(arn))})
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close(context.Background())
	waitUntil(t, "2 ready slots", 2*time.Minute, func() bool { return pool.Stats().Ready == 2 })
	count := func() map[microvms.Operation]int {
		n := map[microvms.Operation]int{}
		for _, r := range f.Requests() {
			if !r.Signed {
				t.Errorf("%s was not signed", r.Op)
			}
			if r.Status < 300 {
				n[r.Op]++
			}
		}
		return n
	}
	if n := count(); n[microvms.OpRunMicrovm] != 2 || n[microvms.OpSuspendMicrovm] != 2 || n[microvms.OpResumeMicrovm] != 0 {
		t.Fatalf("filling: %v", n)
	}
	sbx, err := pool.Take(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer sbx.Kill(context.Background())
	if res, err := sbx.Commands.Run(ctx, "echo taken"); err != nil || res.Stdout != "taken\n" {
		t.Fatalf("run: %+v %v", res, err)
	}
	if n := count(); n[microvms.OpResumeMicrovm] != 1 {
		t.Fatalf("take: %v", n)
	}
	waitUntil(t, "the refill", 2*time.Minute, func() bool { return pool.Stats().Ready == 2 })
	if err := pool.Close(ctx); err != nil {
		t.Fatal(err)
	}
	n := count()
	if n[microvms.OpRunMicrovm] != 3 || n[microvms.OpSuspendMicrovm] != 3 || n[microvms.OpTerminateMicrovm] != 2 {
		t.Errorf("after Close: %v", n)
	}
	for _, r := range f.Requests() {
		if r.Op == microvms.OpTerminateMicrovm && strings.HasSuffix(r.Path, "/"+sbx.ID()) {
			t.Error("Close terminated the taken sandbox")
		}
	}
	t.Logf("calls: %v", n)
}

package tests

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	rayito "github.com/rayito-dev/rayito/sdk"
)

func TestSandboxEndToEnd(t *testing.T) {
	p := startPlatform(t, "")
	defer p.stop(true)
	ctx := context.Background()
	sbx, err := rayito.Create(ctx, p.opts(rayito.WithMetadata(map[string]string{"suite": "e2e"}))...)
	if err != nil {
		t.Fatal(err)
	}
	res, err := sbx.Commands.Exec(ctx, []string{"sh", "-c", "id -un; echo hello"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(res.Stdout, "hello\n") || res.ExitCode != 0 {
		t.Fatalf("result %+v", res)
	}
	if isRoot() && res.Stdout != "user\nhello\n" {
		t.Fatalf("as root the command runs as user: %q", res.Stdout)
	}

	// A non-zero exit is a typed error carrying the result.
	_, err = sbx.Commands.Run(ctx, "echo oops >&2; exit 7")
	var exit *rayito.CommandExitError
	if !errors.As(err, &exit) || exit.Result.ExitCode != 7 || exit.Result.Stderr != "oops\n" {
		t.Fatalf("exit 7: %v", err)
	}

	// Background command, list, reattach, kill.
	// Killed once it has printed (on a loaded machine the kill could come
	// before the shell ran echo).
	printed := make(chan struct{})
	var printedOnce sync.Once
	h, err := sbx.Commands.Start(ctx, "echo started; sleep 60", rayito.WithTag("sleeper"),
		rayito.OnStdout(func([]byte) { printedOnce.Do(func() { close(printed) }) }))
	if err != nil {
		t.Fatal(err)
	}
	procs, err := sbx.Commands.List(ctx)
	if err != nil || !hasTag(procs, "sleeper") {
		t.Fatalf("list %v %v", procs, err)
	}
	again, err := sbx.Commands.Connect(ctx, h.Pid())
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-printed:
	case <-ctx.Done():
		t.Fatal("the command never printed")
	}
	if err := h.Kill(ctx); err != nil {
		t.Fatal(err)
	}
	res, err = again.Wait(ctx)
	if !errors.As(err, &exit) || exit.Result.ExitCode != 128+9 || !strings.Contains(exit.Result.Stdout, "started") {
		t.Fatalf("killed: %+v %v", res, err)
	}

	// Info and List with a metadata filter.
	info, err := sbx.Info(ctx)
	if err != nil || info.State != "RUNNING" || info.Metadata["suite"] != "e2e" || info.AgentVersion == "" {
		t.Fatalf("info %+v %v", info, err)
	}
	found, err := rayito.List(ctx, append(p.opts(), rayito.WithMetadataFilter(map[string]string{"suite": "e2e"}))...)
	if err != nil || len(found) != 1 || found[0].ID != sbx.ID() {
		t.Fatalf("list by metadata: %v %v", found, err)
	}
	none, err := rayito.List(ctx, append(p.opts(), rayito.WithMetadataFilter(map[string]string{"suite": "other"}))...)
	if err != nil || len(none) != 0 {
		t.Fatalf("list by other metadata: %v %v", none, err)
	}

	// Connect with the id and token from another client.
	other, err := rayito.Connect(ctx, sbx.ID(), append(p.opts(), rayito.WithAccessToken(sbx.AccessToken()))...)
	if err != nil {
		t.Fatal(err)
	}
	if r, err := other.Commands.Run(ctx, "echo again"); err != nil || r.Stdout != "again\n" {
		t.Fatalf("connected client: %+v %v", r, err)
	}
	wrong, err := rayito.Connect(ctx, sbx.ID(), append(p.opts(), rayito.WithAccessToken(strings.Repeat("A", 43)))...)
	if err != nil {
		t.Fatal(err)
	}
	var rpc *rayito.RPCError
	if _, err := wrong.Commands.Run(ctx, "true"); !errors.As(err, &rpc) || rpc.Code != rayito.CodeUnauthenticated {
		t.Fatalf("wrong token: %v", err)
	}

	if err := sbx.Kill(ctx); err != nil {
		t.Fatal(err)
	}
	// Termination is asynchronous, as on AWS: TERMINATING, then TERMINATED.
	deadline := time.Now().Add(20 * time.Second)
	for {
		info, err = sbx.Info(ctx)
		if err == nil && info.State == "TERMINATED" {
			break
		}
		if err != nil || time.Now().After(deadline) {
			t.Fatalf("after kill: %+v %v", info, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func hasTag(procs []rayito.ProcessInfo, tag string) bool {
	for _, p := range procs {
		if p.Tag == tag {
			return true
		}
	}
	return false
}

func TestConcurrentCreates(t *testing.T) {
	p := startPlatform(t, "")
	defer p.stop(true)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, 10)
	for i := range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sbx, err := rayito.Create(ctx, p.opts()...)
			if err != nil {
				errs <- err
				return
			}
			defer sbx.Kill(context.WithoutCancel(ctx))
			r, err := sbx.Commands.Exec(ctx, []string{"echo", strings.Repeat("x", i)})
			if err != nil || r.Stdout != strings.Repeat("x", i)+"\n" {
				errs <- errors.Join(err, errors.New("wrong output"))
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestConnectionsAreReused checks that sequential calls share the SDK's
// kept-alive connections to the platform instead of dialing each time
// (a stream closed before its end used to cost its connection).
func TestConnectionsAreReused(t *testing.T) {
	p := startPlatform(t, "")
	defer p.stop(true)
	ctx := context.Background()
	sbx := p.create(ctx)
	defer sbx.Kill(ctx)
	if _, err := sbx.Commands.Exec(ctx, []string{"true"}); err != nil {
		t.Fatal(err)
	}
	before := p.accepted.Load()
	for i := range 20 {
		if _, err := sbx.Commands.Exec(ctx, []string{"echo", "hi"}); err != nil {
			t.Fatal(err)
		}
		name := fmt.Sprintf("f%d", i)
		if _, err := sbx.Files.Write(ctx, name, []byte("data")); err != nil {
			t.Fatal(err)
		}
		if _, err := sbx.Files.Read(ctx, name); err != nil {
			t.Fatal(err)
		}
		if _, err := sbx.Commands.List(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if n := p.accepted.Load() - before; n > 2 {
		t.Fatalf("80 sequential calls opened %d new connections, want at most 2", n)
	}
}

// Create/kill cycles leave no connection behind: the SDK made a
// control-plane client and data-plane transports per sandbox, each keeping
// its connections open, idle, for 90 s (300 cycles took a platform from 16
// to 197 descriptors). The control plane's connections are shared; a
// sandbox's calls to rayd go through tunnels of its own (decision 0010),
// one here, closed when it is killed.
func TestCreateKillCyclesLeaveNoConnections(t *testing.T) {
	p := startPlatform(t, "")
	defer p.stop(true)
	ctx := context.Background()
	cycle := func() {
		sbx := p.create(ctx)
		if _, err := sbx.Commands.Exec(ctx, []string{"true"}); err != nil {
			t.Fatal(err)
		}
		if err := sbx.Kill(ctx); err != nil {
			t.Fatal(err)
		}
	}
	cycle()
	before, fds := p.accepted.Load(), openFDs(t)
	const n = 30
	for range n {
		cycle()
	}
	if got := p.accepted.Load() - before; got > n+4 {
		t.Fatalf("%d create/exec/kill cycles opened %d new connections to the platform, want at most one tunnel each and 4 more", n, got)
	}
	// The killed sandboxes' tunnels close (both ends are in this process).
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		got := openFDs(t)
		if got <= fds+8 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d create/exec/kill cycles left %d descriptors open (%d before)", n, got, fds)
		}
	}
}

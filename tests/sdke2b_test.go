package tests

import (
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	rayito "github.com/rayito-dev/rayito/sdk"
	"github.com/rayito-dev/rayito/sdk/e2b"
)

// sdk/e2b, E2B's vocabulary over rayito, against real sandboxes.
func TestSDKE2B(t *testing.T) {
	if !isRoot() {
		t.Skip("pause and resume need the root platform's cgroup freezer: needs root")
	}
	p := startPlatform(t, "")
	defer p.stop(true)
	ctx := t.Context()
	ro := e2b.WithRayitoOptions(p.opts()...)

	if _, err := e2b.Create(ctx, ro, e2b.WithSecure(false)); !errors.Is(err, e2b.ErrUnimplemented) || !strings.Contains(err.Error(), "secure: false") {
		t.Fatalf("secure: false: %v", err)
	}
	sbx, err := e2b.Create(ctx, ro, e2b.WithTemplate(e2b.DefaultTemplate), e2b.WithTimeout(2*time.Minute),
		e2b.WithMetadata(map[string]string{"suite": "sdke2b"}), e2b.WithEnvs(map[string]string{"GREETING": "hi"}))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _, _ = sbx.Kill(ctx) }()

	// Commands.
	var streamed strings.Builder
	var mu sync.Mutex
	r, err := sbx.Commands.Run(ctx, `echo "$GREETING"`, e2b.OnStdout(func(s string) { mu.Lock(); streamed.WriteString(s); mu.Unlock() }))
	if err != nil || r.Stdout != "hi\n" || streamed.String() != "hi\n" {
		t.Fatalf("run: %+v %q %v", r, streamed.String(), err)
	}
	var ce *e2b.CommandExitError
	if r, err := sbx.Commands.Run(ctx, "echo oops >&2; exit 3"); !errors.As(err, &ce) || ce.ExitCode != 3 || ce.Stderr != "oops\n" || r.ExitCode != 3 {
		t.Fatalf("exit 3: %+v %v", r, err)
	}
	h, err := sbx.Commands.RunBackground(ctx, "sleep 600")
	if err != nil {
		t.Fatal(err)
	}
	ps, err := sbx.Commands.List(ctx)
	if err != nil || !slices.ContainsFunc(ps, func(p e2b.ProcessInfo) bool { return p.Pid == h.Pid() }) {
		t.Fatalf("list: %v %v", ps, err)
	}
	if ok, err := sbx.Commands.Kill(ctx, h.Pid()); !ok || err != nil {
		t.Fatalf("kill: %v %v", ok, err)
	}
	if _, err := h.Wait(ctx); !errors.As(err, &ce) {
		t.Fatalf("wait after kill: %v", err)
	}
	if ok, err := sbx.Commands.Kill(ctx, h.Pid()); ok || err != nil {
		t.Fatalf("second kill: %v %v, want false", ok, err)
	}
	cat, err := sbx.Commands.RunBackground(ctx, "cat", rayito.WithStdin())
	if err != nil {
		t.Fatal(err)
	}
	if err := sbx.Commands.SendStdin(ctx, cat.Pid(), "through stdin\n"); err != nil {
		t.Fatal(err)
	}
	if err := cat.CloseStdin(ctx); err != nil {
		t.Fatal(err)
	}
	if r, err := cat.Wait(ctx); err != nil || r.Stdout != "through stdin\n" {
		t.Fatalf("cat: %+v %v", r, err)
	}

	// Files.
	if _, err := sbx.Files.Write(ctx, "dir/a.txt", []byte("alpha")); err != nil {
		t.Fatal(err)
	}
	if s, err := sbx.Files.Read(ctx, "dir/a.txt"); err != nil || s != "alpha" {
		t.Fatalf("read: %q %v", s, err)
	}
	if _, err := sbx.Files.Read(ctx, "missing.txt"); !errors.Is(err, e2b.ErrNotFound) {
		t.Fatalf("a missing file: %v", err)
	}
	if ok, err := sbx.Files.MakeDir(ctx, "dir"); ok || err != nil {
		t.Fatalf("makeDir of an existing dir: %v %v, want false", ok, err)
	}
	if ok, err := sbx.Files.MakeDir(ctx, "dir/sub"); !ok || err != nil {
		t.Fatalf("makeDir: %v %v", ok, err)
	}
	es, err := sbx.Files.List(ctx, "dir", 1)
	if err != nil || len(es) != 2 {
		t.Fatalf("list: %v %v", es, err)
	}
	if _, err := sbx.Files.Rename(ctx, "dir/a.txt", "dir/b.txt"); err != nil {
		t.Fatal(err)
	}
	if ok, _ := sbx.Files.Exists(ctx, "dir/a.txt"); ok {
		t.Fatal("renamed file still there")
	}
	events := make(chan e2b.FilesystemEvent, 16)
	wh, err := sbx.Files.WatchDir(ctx, "dir", func(ev e2b.FilesystemEvent) { events <- ev }, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sbx.Files.Write(ctx, "dir/c.txt", []byte("c")); err != nil {
		t.Fatal(err)
	}
	select {
	case ev := <-events:
		if ev.Name != "c.txt" {
			t.Errorf("first event %+v", ev)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no watch event")
	}
	if err := wh.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := sbx.Files.Remove(ctx, "dir"); err != nil {
		t.Fatal(err)
	}
	// As on E2B, removing what is not there succeeds.
	if err := sbx.Files.Remove(ctx, "dir"); err != nil {
		t.Fatalf("remove of a missing path: %v", err)
	}

	// Lifecycle.
	if err := sbx.SetTimeout(ctx, 10*time.Minute); err != nil {
		t.Fatal(err)
	}
	info, err := sbx.GetInfo(ctx)
	if err != nil || info.State != "running" || info.Metadata["suite"] != "sdke2b" || info.SandboxID != sbx.SandboxID() {
		t.Fatalf("getInfo: %+v %v", info, err)
	}
	list, err := e2b.List(ctx, e2b.WithListRayitoOptions(p.opts()...), e2b.WithListMetadata(map[string]string{"suite": "sdke2b"}))
	if err != nil || len(list) != 1 || list[0].SandboxID != sbx.SandboxID() {
		t.Fatalf("list: %+v %v", list, err)
	}
	if _, err := sbx.Commands.RunBackground(ctx, "sleep 600"); err != nil {
		t.Fatal(err)
	}
	if ok, err := sbx.Pause(ctx); !ok || err != nil {
		t.Fatalf("pause: %v %v", ok, err)
	}
	if ok, err := sbx.Pause(ctx); ok || err != nil {
		t.Fatalf("second pause: %v %v, want false", ok, err)
	}
	if paused, err := e2b.List(ctx, e2b.WithListRayitoOptions(p.opts()...), e2b.WithListState("paused")); err != nil || len(paused) != 1 {
		t.Fatalf("list paused: %+v %v", paused, err)
	}
	again, err := e2b.Connect(ctx, sbx.SandboxID(), ro)
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := again.IsRunning(ctx); !ok || err != nil {
		t.Fatalf("isRunning after connect: %v %v", ok, err)
	}
	if r, err := again.Commands.Run(ctx, "pgrep -c -f 'sleep 600'"); err != nil || strings.TrimSpace(r.Stdout) != "1" {
		t.Fatalf("the background process after resume: %+v %v", r, err)
	}
	if _, err := again.GetHost(8080); !errors.Is(err, e2b.ErrUnimplemented) {
		t.Fatalf("getHost: %v", err)
	}
	if ok, err := again.Kill(ctx); !ok || err != nil {
		t.Fatalf("kill: %v %v", ok, err)
	}
	if ok, err := e2b.Kill(ctx, sbx.SandboxID(), ro); ok || err != nil {
		t.Fatalf("kill of a killed sandbox: %v %v, want false", ok, err)
	}
}

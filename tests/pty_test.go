package tests

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	rayito "github.com/rayito-dev/rayito/sdk"
)

// syncBuf collects terminal output from the SDK's callback goroutine.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) write(p []byte) { s.mu.Lock(); s.b.Write(p); s.mu.Unlock() }
func (s *syncBuf) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

func (s *syncBuf) waitFor(t *testing.T, text string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(s.String(), text) {
		if time.Now().After(deadline) {
			t.Fatalf("no %q in terminal output %q", text, s.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestPtyEndToEnd(t *testing.T) {
	p := startPlatform(t, "")
	defer p.stop(true)
	ctx := context.Background()
	sbx := p.create(ctx)
	defer sbx.Kill(ctx)
	var out syncBuf
	h, err := sbx.Pty.Create(ctx, rayito.WithSize(100, 30), rayito.OnData(out.write))
	if err != nil {
		t.Fatal(err)
	}
	if err := h.SendInput(ctx, []byte("stty size; echo $TERM\n")); err != nil {
		t.Fatal(err)
	}
	out.waitFor(t, "30 100")
	out.waitFor(t, "xterm-256color")
	if err := h.Resize(ctx, 120, 40); err != nil {
		t.Fatal(err)
	}
	if err := h.SendInput(ctx, []byte("stty size\n")); err != nil {
		t.Fatal(err)
	}
	out.waitFor(t, "40 120")

	// Reattach from another client replays the output.
	var again syncBuf
	other, err := sbx.Pty.Connect(ctx, h.Pid(), rayito.OnData(again.write))
	if err != nil {
		t.Fatal(err)
	}
	again.waitFor(t, "30 100")
	if err := h.SendInput(ctx, []byte("exit 3\n")); err != nil {
		t.Fatal(err)
	}
	code, err := h.Wait(ctx)
	if err != nil || code != 3 {
		t.Fatalf("exit: %d %v", code, err)
	}
	if code, err := other.Wait(ctx); err != nil || code != 3 {
		t.Fatalf("reattached exit: %d %v", code, err)
	}
	if err := h.Resize(ctx, 0, 10); err == nil {
		t.Fatal("a zero size was accepted")
	}
}

func TestCLIShell(t *testing.T) {
	env := cliEnv(t)
	state := t.TempDir()
	if r := runCLI(t, env, "local", "up", "--state-dir", state); r.code != 0 {
		t.Fatalf("local up: %+v", r)
	}
	defer runCLI(t, env, "local", "down", "--state-dir", state)
	r := runCLI(t, env, "sandbox", "create")
	id := strings.TrimSpace(r.stdout)
	if r.code != 0 || id == "" {
		t.Fatalf("create: %+v", r)
	}
	r = runCLIInput(t, env, "echo hello-$((6*7)); exit 4\n", "sandbox", "shell", id)
	if r.code != 4 || !strings.Contains(r.stdout, "hello-42") {
		t.Fatalf("shell: %+v", r)
	}
}

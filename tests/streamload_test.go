package tests

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rayito-dev/rayito/localvm"
	rayito "github.com/rayito-dev/rayito/sdk"
)

// TestStreamLoad opens more streams to one sandbox than rayd allows at
// once: the platform stays up, the streams over the budget get a clear
// ResourceExhausted, and control calls (List, Exec, Kill) still get
// through while the budget is spent.
func TestStreamLoad(t *testing.T) {
	if !isRoot() {
		t.Skip("needs root: a fully isolated local sandbox")
	}
	panics := &panicLog{}
	p := startPlatform(t, "", func(o *localvm.Options) { o.Logger = slog.New(panics) })
	defer p.stop(true)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	sbx := p.create(ctx)
	defer sbx.Kill(context.WithoutCancel(ctx))

	const n = 300
	var (
		mu      sync.Mutex
		handles []*rayito.CommandHandle
		errs    []error
		wg      sync.WaitGroup
	)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h, err := sbx.Commands.Start(ctx, "sleep 600")
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			handles = append(handles, h)
		}()
	}
	wg.Wait()
	t.Logf("%d streams open, %d refused", len(handles), len(errs))
	for _, err := range errs {
		t.Logf("refused: %v", err)
		break
	}
	for _, err := range errs {
		if !errors.Is(err, rayito.ErrResourceExhausted) {
			t.Fatalf("a stream over the budget: %v, want ErrResourceExhausted", err)
		}
	}
	if len(handles) == 0 {
		t.Fatal("no stream opened")
	}
	// Control calls get through.
	if _, err := sbx.Commands.List(ctx); err != nil {
		t.Fatalf("List with the stream budget spent: %v", err)
	}
	if r, err := sbx.Commands.Run(ctx, "echo ok"); err == nil || errors.Is(err, rayito.ErrResourceExhausted) {
		_ = r
	} else {
		t.Fatalf("Run with the stream budget spent: %v", err)
	}
	if _, err := sbx.Files.Stat(ctx, "/home/user"); err != nil {
		t.Fatalf("Stat with the stream budget spent: %v", err)
	}
	if err := handles[0].Kill(ctx); err != nil {
		t.Fatalf("a handle's Kill with the stream budget spent: %v", err)
	}
	// A slot freed is a stream possible again.
	deadline := time.Now().Add(30 * time.Second)
	for {
		r, err := sbx.Commands.Run(ctx, "echo again")
		if err == nil {
			if r.Stdout != "again\n" {
				t.Fatalf("stdout %q", r.Stdout)
			}
			break
		}
		if !errors.Is(err, rayito.ErrResourceExhausted) || time.Now().After(deadline) {
			t.Fatalf("Run after a stream ended: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// The platform is alive and served every request without a panic.
	other := p.create(ctx)
	defer other.Kill(context.WithoutCancel(ctx))
	if _, err := other.Commands.Run(ctx, "true"); err != nil {
		t.Fatalf("another sandbox after the load: %v", err)
	}
	if n := panics.count.Load(); n > 0 {
		t.Fatalf("the platform logged %d panics while serving (first: %s)", n, panics.first())
	}
}

// panicLog is a slog handler that counts the records that mention a
// panic (net/http logs a recovered handler panic as "http: panic serving").
type panicLog struct {
	count atomic.Int64
	mu    sync.Mutex
	msg   string
}

func (h *panicLog) Enabled(context.Context, slog.Level) bool { return true }
func (h *panicLog) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *panicLog) WithGroup(string) slog.Handler            { return h }
func (h *panicLog) Handle(_ context.Context, r slog.Record) error {
	if strings.Contains(r.Message, "panic") {
		if h.count.Add(1) == 1 {
			h.mu.Lock()
			h.msg, _, _ = strings.Cut(r.Message, "\n")
			h.mu.Unlock()
		}
	}
	return nil
}

func (h *panicLog) first() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.msg
}

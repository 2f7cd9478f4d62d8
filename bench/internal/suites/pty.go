package suites

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"github.com/rayito-dev/rayito/bench/internal/harness"
	rayito "github.com/rayito-dev/rayito/sdk"
)

// Pty is the PTY keystroke echo (BENCHMARKS.md §2.6): one byte into `cat`
// on a terminal, timed until its echo returns; n=300.
func Pty(ctx context.Context, e *Env) harness.Result {
	sbx, err := e.Warm(ctx)
	if err != nil {
		return failed("pty", fmt.Errorf("warm sandbox: %w", err))
	}
	lp, err := startLocalPty(e.Pin)
	if err != nil {
		return failed("pty", fmt.Errorf("local pty: %w", err))
	}
	defer lp.close()

	echoes := make(chan []byte, 1024)
	h, err := sbx.Pty.Create(ctx, rayito.WithShell("cat"), rayito.OnData(func(b []byte) {
		select {
		case echoes <- append([]byte(nil), b...):
		default:
		}
	}))
	if err != nil {
		return failed("pty", err)
	}
	defer func() {
		kctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_ = h.Kill(kctx)
		cancel()
	}()
	drain(echoes)

	subjects := []harness.Subject{
		{Name: "F", Run: func(context.Context) (float64, error) { return lp.roundTrip() }},
		{Name: "R", Run: func(ctx context.Context) (float64, error) {
			t := time.Now()
			if err := h.SendInput(ctx, []byte{'x'}); err != nil {
				return 0, err
			}
			return awaitEcho(t, echoes)
		}},
	}
	if e.Peer != nil {
		pp, err := e.Peer.StartPty(ctx, "/bin/cat", nil, 80, 24)
		if err != nil {
			return failed("pty", fmt.Errorf("peer pty: %w", err))
		}
		defer func() {
			kctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			_ = pp.Kill(kctx)
			cancel()
		}()
		drain(pp.Output())
		subjects = append(subjects, harness.Subject{Name: "P", Optional: true, Run: func(ctx context.Context) (float64, error) {
			t := time.Now()
			if err := pp.SendInput(ctx, []byte{'x'}); err != nil {
				return 0, err
			}
			return awaitEcho(t, pp.Output())
		}})
	}
	s, err := harness.Loop(ctx, e.warmup(10), e.n(300), subjects...)
	if err != nil {
		return failed("pty", err)
	}
	note := "F = cat on a local pty (/dev/ptmx) owned by the harness; R = Pty.Create(Shell: cat) + SendInput, until the echo arrives in OnData"
	if e.Peer != nil {
		note += "; P = envd Start /bin/cat with pty 80x24 + SendInput (input.pty), until the data.pty echo"
	}
	return harness.FromSamples("pty", "ms", false, s, note)
}

// drain discards what arrives until 50 ms pass in silence.
func drain[T any](ch <-chan T) {
	for {
		select {
		case <-ch:
		case <-time.After(50 * time.Millisecond):
			return
		}
	}
}

func awaitEcho(t time.Time, ch <-chan []byte) (float64, error) {
	select {
	case b, ok := <-ch:
		d := harness.Ms(time.Since(t))
		if !ok {
			return d, fmt.Errorf("terminal closed")
		}
		if !bytes.Contains(b, []byte{'x'}) {
			return d, fmt.Errorf("echo %q", b)
		}
		return d, nil
	case <-time.After(5 * time.Second):
		return 0, fmt.Errorf("no echo within 5s")
	}
}

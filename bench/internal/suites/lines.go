package suites

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/rayito-dev/rayito/bench/internal/harness"
	rayito "github.com/rayito-dev/rayito/sdk"
)

const (
	linesCount = 10000
	lineBytes  = 1024
)

// linesArgv prints linesCount lines of lineBytes (1023 spaces and a
// newline), one write(2) per line (awk's fflush), so that per-message
// overhead shows rather than pipe coalescing.
var linesArgv = []string{"awk", "BEGIN{s=sprintf(\"%" + strconv.Itoa(lineBytes-1) + "s\",\"\"); for(i=0;i<" + strconv.Itoa(linesCount) + ";i++){print s; fflush()}}"}

// Lines is the per-message side of streaming (BENCHMARKS.md §2.4): 10 000
// lines of 1 KiB, each its own write, counted at the client; n=10.
func Lines(ctx context.Context, e *Env) harness.Result {
	sbx, err := e.Warm(ctx)
	if err != nil {
		return failed("lines", fmt.Errorf("warm sandbox: %w", err))
	}
	const total = linesCount * lineBytes
	rate := func(n int64, d time.Duration, err error) (float64, error) {
		if err == nil && n != total {
			err = fmt.Errorf("got %d bytes, want %d", n, total)
		}
		return float64(n) / lineBytes / 1000 / d.Seconds(), err
	}
	subjects := []harness.Subject{
		{Name: "F", Run: func(context.Context) (float64, error) {
			t := time.Now()
			cmd := floorCmdPlain(linesArgv...)
			p, err := cmd.StdoutPipe()
			if err != nil {
				return 0, err
			}
			if err := e.Pin.Start(cmd); err != nil {
				return 0, err
			}
			n, err := io.CopyBuffer(io.Discard, p, make([]byte, 64<<10))
			if werr := cmd.Wait(); err == nil {
				err = werr
			}
			return rate(n, time.Since(t), err)
		}},
		{Name: "R", Run: func(ctx context.Context) (float64, error) {
			var n int64
			t := time.Now()
			_, err := sbx.Commands.Exec(ctx, linesArgv, rayito.OnStdout(func(b []byte) { n += int64(len(b)) }), rayito.WithMaxOutputBytes(1))
			return rate(n, time.Since(t), err)
		}},
	}
	if e.Peer != nil {
		subjects = append(subjects, harness.Subject{Name: "P", Optional: true, Run: func(ctx context.Context) (float64, error) {
			t := time.Now()
			res, err := e.Peer.Run(ctx, linesArgv[0], linesArgv[1:], nil)
			var n int64
			if res != nil {
				n = res.StdoutBytes
			}
			return rate(n, time.Since(t), err)
		}})
	}
	s, err := harness.Loop(ctx, e.warmup(2), e.n(10), subjects...)
	if err != nil {
		return failed("lines", err)
	}
	note := "10 000 lines of 1 KiB from awk, one write per line (fflush); rate = thousands of lines per second until the command ended and all bytes arrived; F = through a local pipe; R = Commands.Exec with OnStdout"
	if e.Peer != nil {
		note += "; P = envd Start of the same argv"
	}
	return harness.FromSamples("lines", "klines/s", true, s, note)
}

package suites

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/rayito-dev/rayito/bench/internal/harness"
	rayito "github.com/rayito-dev/rayito/sdk"
)

const streamBytes = 100 << 20

// Stream is streaming stdout throughput (BENCHMARKS.md §2.4): `head -c
// 104857600 /dev/zero`, bytes counted at the client; n=5.
func Stream(ctx context.Context, e *Env) harness.Result {
	sbx, err := e.Warm(ctx)
	if err != nil {
		return failed("stream", fmt.Errorf("warm sandbox: %w", err))
	}
	argv := []string{"head", "-c", strconv.Itoa(streamBytes), "/dev/zero"}
	want := func(n int64, err error) error {
		if err == nil && n != streamBytes {
			err = fmt.Errorf("got %d bytes, want %d", n, streamBytes)
		}
		return err
	}

	httpSrv, httpURL, err := zeroServer(streamBytes)
	if err != nil {
		return failed("stream", err)
	}
	defer httpSrv.Close()
	hc := &http.Client{Transport: &http.Transport{DisableCompression: true}}
	defer hc.CloseIdleConnections()

	subjects := []harness.Subject{
		{Name: "F", Run: func(context.Context) (float64, error) {
			t := time.Now()
			cmd := floorCmdPlain(argv...)
			p, err := cmd.StdoutPipe()
			if err != nil {
				return 0, err
			}
			if err := e.Pin.Start(cmd); err != nil {
				return 0, err
			}
			n, err := io.CopyBuffer(io.Discard, p, make([]byte, 256<<10))
			if werr := cmd.Wait(); err == nil {
				err = werr
			}
			return harness.MBps(n, time.Since(t)), want(n, err)
		}},
		{Name: "F loopback HTTP/1.1", Optional: true, Run: func(ctx context.Context) (float64, error) {
			t := time.Now()
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, httpURL, nil)
			if err != nil {
				return 0, err
			}
			resp, err := hc.Do(req)
			if err != nil {
				return 0, err
			}
			n, err := io.CopyBuffer(io.Discard, resp.Body, make([]byte, 256<<10))
			resp.Body.Close()
			return harness.MBps(n, time.Since(t)), want(n, err)
		}},
		{Name: "R", Run: func(ctx context.Context) (float64, error) {
			var n int64
			t := time.Now()
			_, err := sbx.Commands.Exec(ctx, argv, rayito.OnStdout(func(b []byte) { n += int64(len(b)) }), rayito.WithMaxOutputBytes(1))
			return harness.MBps(n, time.Since(t)), want(n, err)
		}},
	}
	if e.Peer != nil {
		subjects = append(subjects, harness.Subject{Name: "P", Optional: true, Run: func(ctx context.Context) (float64, error) {
			t := time.Now()
			res, err := e.Peer.Run(ctx, argv[0], argv[1:], nil)
			var n int64
			if res != nil {
				n = res.StdoutBytes
			}
			return harness.MBps(n, time.Since(t)), want(n, err)
		}})
	}
	s, err := harness.Loop(ctx, e.warmup(1), e.n(5), subjects...)
	if err != nil {
		return failed("stream", err)
	}
	note := "100 MiB of /dev/zero via head -c; F = the same command through a local pipe; secondary floor: the same bytes over loopback HTTP/1.1 from an in-harness server; R = Commands.Exec with OnStdout counting bytes"
	if e.Peer != nil {
		note += "; P = envd process.Start of the same argv (JSON+base64 framing)"
	}
	r := harness.FromSamples("stream", "MB/s", true, s, note)
	if h := r.Extra["F loopback HTTP/1.1"]; h != nil {
		r.SetMetric(harness.MetricStreamHTTPFloor, h.P50)
		if r.R != nil {
			r.Details = append(r.Details, fmt.Sprintf("R is %.0f %% of the loopback-HTTP floor (BENCHMARKS.md asks ≥ 25 %%)", 100*r.R.P50/h.P50))
		}
	}
	return r
}

// zeroServer serves size zero bytes on GET / over loopback HTTP/1.1.
func zeroServer(size int) (*http.Server, string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, "", err
	}
	buf := make([]byte, 256<<10)
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(size))
		for left := size; left > 0; {
			k := min(left, len(buf))
			if _, err := w.Write(buf[:k]); err != nil {
				return
			}
			left -= k
		}
	})}
	go func() { _ = srv.Serve(ln) }()
	return srv, "http://" + ln.Addr().String() + "/", nil
}

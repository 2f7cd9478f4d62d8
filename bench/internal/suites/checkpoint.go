package suites

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/rayito-dev/rayito/bench/internal/harness"
	rayito "github.com/rayito-dev/rayito/sdk"
)

// checkpointSize is the checkpoint suite's HOME: 100 MiB.
const checkpointSize = 100 << 20

// Checkpoint is a checkpoint of a HOME holding 100 MiB (issue 28): the
// throughput of rayd's tar + gzip level 1 + upload in 8 MiB parts to the
// local platform's store, n=5. Half the bytes are random (they do not
// compress), half text-like (they do), as a HOME of code and data is.
//
// F = the harness doing the same archive work in-process (Go's tar and
// gzip level 1 of the same bytes, discarded); secondary floor: an
// HTTP/1.1 PUT of the same 100 MiB to an in-harness loopback server (the
// transfer alone). R = Sandbox.Checkpoint of a sandbox created with
// WithPersist, whose HOME holds the file; also reported: the restore of
// that checkpoint into a fresh sandbox's HOME (the extra "R restore").
func Checkpoint(ctx context.Context, e *Env) harness.Result {
	const suite = "checkpoint100m"
	data := make([]byte, checkpointSize)
	_, _ = rand.Read(data[:checkpointSize/2])
	for i := checkpointSize / 2; i < checkpointSize; i++ {
		data[i] = "the quick brown fox jumps over the lazy dog 0123456789\n"[i%55]
	}
	loc := rayito.S3Prefix{Prefix: "bench", Name: fmt.Sprintf("checkpoint-%d", time.Now().UnixNano())}
	sbx, err := rayito.Create(ctx, append(e.opts(), rayito.WithPersist(loc))...)
	if err != nil {
		return failed(suite, fmt.Errorf("create: %w", err))
	}
	defer sbx.Kill(context.WithoutCancel(ctx))
	if err := e.pinSandboxes(sbx); err != nil {
		return failed(suite, err)
	}
	if _, err := sbx.Files.Write(ctx, "data.bin", data); err != nil {
		return failed(suite, fmt.Errorf("write HOME: %w", err))
	}
	hs, hurl, err := blobServer()
	if err != nil {
		return failed(suite, err)
	}
	defer hs.Close()
	hc := &http.Client{Transport: &http.Transport{DisableCompression: true}}
	defer hc.CloseIdleConnections()
	var archived int64
	restoreTo, err := rayito.Create(ctx, e.opts()...)
	if err != nil {
		return failed(suite, fmt.Errorf("create: %w", err))
	}
	defer restoreTo.Kill(context.WithoutCancel(ctx))

	subjects := []harness.Subject{
		{Name: "F", Run: func(context.Context) (float64, error) {
			t := time.Now()
			zw, _ := gzip.NewWriterLevel(io.Discard, gzip.BestSpeed)
			tw := tar.NewWriter(zw)
			if err := tw.WriteHeader(&tar.Header{Name: "data.bin", Mode: 0o644, Size: checkpointSize, Typeflag: tar.TypeReg}); err != nil {
				return 0, err
			}
			if _, err := tw.Write(data); err != nil {
				return 0, err
			}
			if err := tw.Close(); err != nil {
				return 0, err
			}
			if err := zw.Close(); err != nil {
				return 0, err
			}
			return harness.MBps(checkpointSize, time.Since(t)), nil
		}},
		{Name: "F loopback HTTP/1.1 PUT", Optional: true, Run: func(ctx context.Context) (float64, error) {
			t := time.Now()
			err := httpPut(ctx, hc, hurl, data)
			return harness.MBps(checkpointSize, time.Since(t)), err
		}},
		{Name: "R", Run: func(ctx context.Context) (float64, error) {
			t := time.Now()
			info, err := sbx.Checkpoint(ctx)
			d := time.Since(t)
			if err == nil {
				archived = info.Bytes
				if info.ContentBytes != checkpointSize {
					err = fmt.Errorf("checkpoint of %d bytes, want %d", info.ContentBytes, checkpointSize)
				}
			}
			return harness.MBps(checkpointSize, d), err
		}},
		{Name: "R restore", Optional: true, Run: func(ctx context.Context) (float64, error) {
			t := time.Now()
			info, err := restoreTo.RestoreWith(ctx, rayito.PersistRequest{Location: &loc})
			d := time.Since(t)
			if err == nil && info.ContentBytes != checkpointSize {
				err = fmt.Errorf("restore of %d bytes, want %d", info.ContentBytes, checkpointSize)
			}
			return harness.MBps(checkpointSize, d), err
		}},
	}
	s, err := harness.Loop(ctx, e.warmup(1), e.n(5), subjects...)
	if err != nil {
		return failed(suite, err)
	}
	note := fmt.Sprintf("a HOME of 100 MiB (half random, half text; archive %.1f MiB): MB/s of HOME content; F = Go tar + gzip level 1 of the same bytes in the harness, discarded; secondary floor: an HTTP/1.1 PUT of them to a loopback server; R = Sandbox.Checkpoint (rayd: read HOME as the user, tar, gzip 1, 8 MiB parts two at a time, manifest; the local platform's store, files in its state dir); R restore = RestoreWith of it into another sandbox (download, sha256, scan, extract)", float64(archived)/(1<<20))
	return harness.FromSamples(suite, "MB/s", true, s, note)
}

// httpPut PUTs body to url.
func httpPut(ctx context.Context, hc *http.Client, url string, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.ContentLength = int64(len(body))
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("PUT: %s", resp.Status)
	}
	return nil
}

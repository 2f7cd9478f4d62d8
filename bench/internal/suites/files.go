package suites

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/rayito-dev/rayito/bench/internal/harness"
	"github.com/rayito-dev/rayito/bench/internal/procfs"
)

// Files1M is file write+read of 1 MiB (BENCHMARKS.md §2.5), n=50.
func Files1M(ctx context.Context, e *Env) harness.Result {
	return files(ctx, e, "files1m", 1<<20, e.n(50), e.warmup(10))
}

// Files100M is file write+read of 100 MiB, n=5.
func Files100M(ctx context.Context, e *Env) harness.Result {
	return files(ctx, e, "files100m", 100<<20, e.n(5), e.warmup(1))
}

func files(ctx context.Context, e *Env, suite string, size, n, warm int) harness.Result {
	sbx, err := e.Warm(ctx)
	if err != nil {
		return failed(suite, fmt.Errorf("warm sandbox: %w", err))
	}
	data := make([]byte, size)
	_, _ = rand.Read(data)
	sum := sha256.Sum256(data)
	verify := func(got []byte) error {
		if len(got) != len(data) || sha256.Sum256(got) != sum {
			return fmt.Errorf("read back %d bytes that differ from the %d written", len(got), len(data))
		}
		return nil
	}
	local := filepath.Join(e.Tmp, suite+".bin")
	remote := "bench-" + suite + ".bin"
	peerPath := filepath.Join(e.Tmp, "peer-"+suite+".bin")
	defer os.Remove(local)
	defer os.Remove(peerPath)
	rbuf := bytes.NewBuffer(make([]byte, 0, size))

	hs, hurl, err := blobServer()
	if err != nil {
		return failed(suite, err)
	}
	defer hs.Close()
	hc := &http.Client{Transport: &http.Transport{DisableCompression: true}}
	defer hc.CloseIdleConnections()

	subjects := []harness.Subject{
		{Name: "F", Run: func(context.Context) (float64, error) {
			var got []byte
			d, err := timeIt(func() error {
				if err := os.WriteFile(local, data, 0o600); err != nil {
					return err
				}
				var err error
				got, err = os.ReadFile(local)
				return err
			})
			if err == nil {
				err = verify(got)
			}
			return d, err
		}},
		{Name: "F loopback HTTP/1.1", Optional: true, Run: func(ctx context.Context) (float64, error) {
			rbuf.Reset()
			d, err := timeIt(func() error { return httpRoundTrip(ctx, hc, hurl, data, rbuf) })
			if err == nil {
				err = verify(rbuf.Bytes())
			}
			return d, err
		}},
		{Name: "R", Run: func(ctx context.Context) (float64, error) {
			rbuf.Reset()
			d, err := timeIt(func() error {
				if _, err := sbx.Files.Write(ctx, remote, data); err != nil {
					return err
				}
				rc, err := sbx.Files.ReadStream(ctx, remote)
				if err != nil {
					return err
				}
				defer rc.Close()
				_, err = rbuf.ReadFrom(rc)
				return err
			})
			if err == nil {
				err = verify(rbuf.Bytes())
			}
			return d, err
		}},
	}
	if e.Peer != nil {
		subjects = append(subjects, peerFilesSubject(e, peerPath, data, rbuf, verify))
	}
	s, err := harness.Loop(ctx, warm, n, subjects...)
	if err != nil {
		return failed(suite, err)
	}
	note := fmt.Sprintf("write then read %d random bytes, sha256 verified outside the timer; F = os.WriteFile+os.ReadFile in %s (%s); secondary floor: HTTP/1.1 upload+download of the same bytes to an in-harness server (memory); R = Files.Write + Files.ReadStream of a relative path (sandbox home)",
		size, e.Tmp, procfs.FSType(e.Tmp))
	if e.Peer != nil {
		note += "; P = envd POST /files (multipart) + GET /files in the same temp dir"
	}
	r := harness.FromSamples(suite, "ms", false, s, note)
	addThroughput(&r, size)
	return r
}

// peerFilesSubject is subject P: envd's upload then download of data at
// path, verified outside the timer.
func peerFilesSubject(e *Env, path string, data []byte, rbuf *bytes.Buffer, verify func([]byte) error) harness.Subject {
	return harness.Subject{Name: "P", Optional: true, Run: func(ctx context.Context) (float64, error) {
		rbuf.Reset()
		d, err := timeIt(func() error {
			if err := e.Peer.Upload(ctx, path, data); err != nil {
				return err
			}
			_, err := e.Peer.Download(ctx, path, rbuf)
			return err
		})
		if err == nil {
			err = verify(rbuf.Bytes())
		}
		return d, err
	}}
}

// addThroughput adds each subject's MB/s (size bytes written then read
// over its p50 time) to r's details.
func addThroughput(r *harness.Result, size int) {
	mb := float64(2*size) / 1e6
	for _, x := range []struct {
		name string
		sm   *harness.Summary
	}{{"F", r.F}, {"R", r.R}, {"P", r.P}} {
		if x.sm != nil && x.sm.P50 > 0 {
			r.Details = append(r.Details, fmt.Sprintf("%s: %.0f MB/s (write+read bytes over p50 time)", x.name, mb/(x.sm.P50/1000)))
		}
	}
}

// blobServer keeps the last PUT body in memory and serves it on GET.
func blobServer() (*http.Server, string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, "", err
	}
	var mu sync.Mutex
	var blob []byte
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case http.MethodPut:
			b := bytes.NewBuffer(make([]byte, 0, max(r.ContentLength, 0)))
			if _, err := b.ReadFrom(r.Body); err != nil {
				http.Error(w, "read", http.StatusBadRequest)
				return
			}
			mu.Lock()
			blob = b.Bytes()
			mu.Unlock()
			w.WriteHeader(http.StatusNoContent)
		case http.MethodGet:
			mu.Lock()
			b := blob
			mu.Unlock()
			w.Header().Set("Content-Length", fmt.Sprint(len(b)))
			_, _ = w.Write(b)
		default:
			http.Error(w, "method", http.StatusMethodNotAllowed)
		}
	})}
	go func() { _ = srv.Serve(ln) }()
	return srv, "http://" + ln.Addr().String() + "/blob", nil
}

func httpRoundTrip(ctx context.Context, hc *http.Client, url string, data []byte, into *bytes.Buffer) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, url, bytes.NewReader(data))
	if err != nil {
		return err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		return fmt.Errorf("PUT: %s", resp.Status)
	}
	req, err = http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err = hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, err = into.ReadFrom(resp.Body)
	return err
}

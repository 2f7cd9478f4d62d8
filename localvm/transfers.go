package localvm

import (
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/rayito-dev/rayito/localvm/internal/services"
	"github.com/rayito-dev/rayito/proto/localplatform"
)

// Pre-signed transfers (localplatform.TransferSettings): while it serves,
// the platform also serves its store's transfer objects on a loopback port
// of its own, path-style, to its owner only (the same check as the
// control endpoint's, owner.go), and hands the owner that port's URL and
// transfer credentials on the control endpoint's
// localplatform.TransferSettingsPath. Sandboxes' rayds reach the same
// objects through their services sockets (internal/services).

// transferStore is the platform's store as transfers use it.
type transferStore interface {
	Transfers() http.Handler
	TransferCredentials(now time.Time) aws.Credentials
	SweepTransfers(now time.Time, maxAge time.Duration) (int, error)
}

// sweepEvery is how often a serving platform deletes the transfer
// objects older than services.TransferRetention (download objects, and
// uploads never imported, would stay in the state directory).
const sweepEvery = time.Hour

// transferListener is the owner's way to the store while Serve serves.
type transferListener struct {
	mu  sync.Mutex
	url string // http://HOST:PORT, "" when not serving
}

// serveTransfers listens on a free port of ln's loopback address (else
// 127.0.0.1) and serves the store's transfer objects there to the owner
// until ctx ends; the returned function waits for it to stop. Without a
// store (tests' fakes) it does nothing.
func (s *Server) serveTransfers(ctx context.Context, ln net.Listener) (func(), error) {
	if s.deps.transfers == nil {
		return func() {}, nil
	}
	host := "127.0.0.1"
	if ta, ok := ln.Addr().(*net.TCPAddr); ok && ta.IP.IsLoopback() {
		host = ta.IP.String()
	}
	var lc net.ListenConfig
	tln, err := lc.Listen(ctx, "tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return nil, err
	}
	store := s.deps.transfers.Transfers()
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !s.ownerOnly(w, r) {
				return
			}
			store.ServeHTTP(w, r)
		}),
		ReadHeaderTimeout: readHeaderTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		IdleTimeout:       idleTimeout,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
		BaseContext:       func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
		ConnContext:       connClient,
	}
	url := "http://" + tln.Addr().String()
	s.xfer.mu.Lock()
	s.xfer.url = url
	s.xfer.mu.Unlock()
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(tln)
	}()
	go func() {
		t := time.NewTicker(sweepEvery)
		defer t.Stop()
		for {
			if n, err := s.deps.transfers.SweepTransfers(time.Now(), services.TransferRetention); err != nil {
				s.log.Warn("localvm: sweeping old transfer objects", "err", err)
			} else if n > 0 {
				s.log.Info("localvm: swept old transfer objects", "count", n)
			}
			select {
			case <-ctx.Done():
			case <-t.C:
				continue
			}
			break
		}
		sctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
		defer cancel()
		if err := srv.Shutdown(sctx); err != nil {
			_ = srv.Close()
		}
	}()
	return func() {
		<-done
		s.xfer.mu.Lock()
		if s.xfer.url == url {
			s.xfer.url = ""
		}
		s.xfer.mu.Unlock()
	}, nil
}

// transferSettings answers localplatform.TransferSettingsPath (after the
// owner check): the store's URL for the owner and fresh transfer
// credentials. Never cached, never logged.
func (s *Server) transferSettings(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", http.MethodGet)
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	s.xfer.mu.Lock()
	url := s.xfer.url
	s.xfer.mu.Unlock()
	if s.deps.transfers == nil || url == "" {
		http.Error(w, "this platform serves no transfers", http.StatusNotFound)
		return
	}
	c := s.deps.transfers.TransferCredentials(time.Now())
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(localplatform.TransferSettings{
		StoreURL: url, Bucket: localplatform.DefaultBucket, Region: localplatform.Region, Prefix: localplatform.TransferPrefix,
		AccessKeyID: c.AccessKeyID, SecretAccessKey: c.SecretAccessKey, Expiration: c.Expires.UTC(),
	})
}

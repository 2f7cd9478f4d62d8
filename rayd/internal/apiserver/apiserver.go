// Package apiserver serves rayd's RPC API: Connect, gRPC and gRPC-Web over
// HTTP/1.1 and cleartext HTTP/2 (h2c) on one port, with server timeouts,
// header limits, a connection cap and panic recovery.
//
// Every call passes three gates, in this order:
//
//   - the access token (package auth): every RPC but HealthService.Health;
//   - the sandbox's timeout ([Options].Holds): while it has expired, or is in
//     its resume grace, every RPC but Health and LifecycleService.SetTimeout
//     answers FailedPrecondition with reason SANDBOX_TIMEOUT;
//   - the suspend gate ([Options].Quiesce, package quiesce): while rayd is
//     suspending every RPC but Health answers Unavailable with reason
//     SUSPENDING, and the streams open when the suspend began end with that
//     same error (the processes they follow keep running).
//
// The plain HTTP endpoints ([Options].Extra) pass the same gates. The E2B
// shim's ports ([EnvdHandler]: E2B's envd services and endpoints, and the
// code interpreter's) are built the same way, with GET /health as their
// only anonymous endpoint.
package apiserver

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"time"

	"connectrpc.com/connect"

	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
	"github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1/raydv1connect"
	"github.com/rayito-dev/rayito/rayd/internal/auth"
	"github.com/rayito-dev/rayito/rayd/internal/netlimit"
	"github.com/rayito-dev/rayito/rayd/internal/quiesce"
	"github.com/rayito-dev/rayito/rayd/internal/rpcerr"
	"github.com/rayito-dev/rayito/rayd/internal/service/unimplemented"
	"github.com/rayito-dev/rayito/rayd/internal/streamlimit"
)

// Limits of the API port.
const (
	// MaxConns bounds concurrent connections; more are closed at accept.
	// It is well above the streams a sandbox serves at once
	// ([Options].Streams, streamlimit.Default): a client that holds one
	// connection per stream (HTTP/1.1) and has every stream slot taken
	// still has connections for its unary control calls.
	MaxConns = 1024
	// MaxStreams bounds concurrent HTTP/2 streams per connection.
	MaxStreams = 256
	// MaxMessageBytes bounds one decoded request message.
	MaxMessageBytes = 8 << 20
	// MaxHeaderBytes bounds request headers.
	MaxHeaderBytes = 64 << 10
	// ReadHeaderTimeout cuts a client that never finishes its header.
	ReadHeaderTimeout = 10 * time.Second
	// IdleTimeout closes idle keep-alive connections.
	IdleTimeout = 2 * time.Minute
)

// Mount is one built service: it returns its path and handler.
type Mount func(opts ...connect.HandlerOption) (string, http.Handler)

// Options configure the API handler.
type Options struct {
	Authorizer auth.Authorizer
	// Services are the built services.
	Services []Mount
	// Extra are plain HTTP handlers mounted on the mux behind the same
	// access-token gate as the RPCs, keyed by pattern (e.g. the file
	// endpoints at "/files").
	Extra  map[string]http.Handler
	Logger *slog.Logger
	// Holds reports whether the sandbox's timeout holds the API (EXPIRED
	// or RESUME_GRACE); nil: never.
	Holds func() bool
	// Quiesce is the suspend gate; nil: none.
	Quiesce *quiesce.Gate
	// Streams bounds the streams (streaming RPCs and the plain HTTP
	// endpoints in Extra) open at once; share one Limit between the
	// handlers of one sandbox. Nil: no bound. Unary RPCs are not counted.
	Streams *streamlimit.Limit
}

// Handler returns the API's HTTP handler: the built services, and every
// other service of the contract answering Unimplemented.
func Handler(opts Options) http.Handler {
	return handler(opts, raydv1connect.HealthServiceHealthProcedure, true)
}

// EnvdHealthPath is the E2B envd liveness probe, the envd port's only
// anonymous endpoint.
const EnvdHealthPath = "/health"

// EnvdHandler returns the handler of the E2B envd port: the built
// services (E2B's process.Process and filesystem.Filesystem) and the
// plain HTTP endpoints in Extra, behind the same gates, options and
// limits as the API. Only GET /health (EnvdHealthPath) needs no token,
// and there are no Unimplemented Rayito services.
func EnvdHandler(opts Options) http.Handler {
	return handler(opts, EnvdHealthPath, false)
}

// handler builds a port's handler; health is the one anonymous
// procedure or path, also exempt from the timeout and suspend gates.
func handler(opts Options, health string, withUnimplemented bool) http.Handler {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	gate := auth.NewInterceptor(opts.Authorizer, health)
	hold := holdGate{holds: opts.Holds, exempt: map[string]bool{
		health: true,
		raydv1connect.LifecycleServiceSetTimeoutProcedure: true,
	}}
	suspend := suspendGate{g: opts.Quiesce, exempt: map[string]bool{health: true}}
	streams := streamGate{limit: opts.Streams, exempt: map[string]bool{health: true}}
	recoverPanic := connect.WithRecover(func(_ context.Context, spec connect.Spec, _ http.Header, _ any) error {
		// The panic value may hold user data: log only where it happened.
		log.Error("panic in RPC handler", "procedure", spec.Procedure)
		return rpcerr.New(raydv1.ErrorReason_ERROR_REASON_INTERNAL, "internal error")
	})
	common := []connect.HandlerOption{
		recoverPanic,
		connect.WithReadMaxBytes(MaxMessageBytes),
		connect.WithSendMaxBytes(MaxMessageBytes),
		// Every error a handler (or a later interceptor) returns goes
		// through rpcerr.
		connect.WithInterceptors(rpcerr.Interceptor()),
	}
	mux := http.NewServeMux()
	for _, m := range opts.Services {
		mux.Handle(m(append(common, connect.WithInterceptors(gate, hold, suspend, streams))...))
	}
	for _, u := range unimplemented.Services() {
		if !withUnimplemented {
			break
		}
		mux.Handle(u.Mount(append(common, connect.WithInterceptors(gate, hold, suspend, unimplemented.Interceptor(u.Feature)))...))
	}
	for pattern, h := range opts.Extra {
		mux.Handle(pattern, gate.Handler(hold.handler(suspend.handler(streams.handler(h)))))
	}
	return mux
}

// Server returns an http.Server for h speaking HTTP/1.1 and h2c. There is
// no read or write timeout: streams are long-lived by design.
func Server(h http.Handler, log *slog.Logger) *http.Server {
	var protocols http.Protocols
	protocols.SetHTTP1(true)
	protocols.SetUnencryptedHTTP2(true)
	srv := &http.Server{
		Handler:           h,
		Protocols:         &protocols,
		ReadHeaderTimeout: ReadHeaderTimeout,
		IdleTimeout:       IdleTimeout,
		MaxHeaderBytes:    MaxHeaderBytes,
		HTTP2: &http.HTTP2Config{
			MaxConcurrentStreams: MaxStreams,
			MaxReadFrameSize:     1 << 20,
			// Uploads: a window of 4 MiB per stream instead of 1 MiB.
			MaxReceiveBufferPerStream:     4 << 20,
			MaxReceiveBufferPerConnection: 16 << 20,
			PingTimeout:                   15 * time.Second,
			SendPingTimeout:               60 * time.Second,
		},
	}
	if log != nil {
		srv.ErrorLog = slog.NewLogLogger(log.Handler(), slog.LevelDebug)
	}
	return srv
}

// Serve serves h on ln (capped at MaxConns connections) until ctx ends,
// then shuts down gracefully within grace.
func Serve(ctx context.Context, ln net.Listener, h http.Handler, log *slog.Logger, grace time.Duration) error {
	srv := Server(h, log)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(netlimit.Listener(ln, MaxConns)) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), grace)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		_ = srv.Close()
	}
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

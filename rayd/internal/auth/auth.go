// Package auth is rayd's access-token gate: one Connect interceptor that
// covers unary and streaming RPCs alike. Every procedure needs the
// x-access-token header except the ones listed as anonymous (Health).
package auth

import (
	"context"
	"net/http"

	"connectrpc.com/connect"

	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
	"github.com/rayito-dev/rayito/rayd/internal/rpcerr"
)

// Header carries the access token.
const Header = "x-access-token"

// Authorizer checks a presented token. It must compare in constant time and
// return false while no token is installed.
type Authorizer interface {
	Authorize(token string) bool
}

// msgUnauthenticated is the one answer for a missing, wrong or premature
// token: the client learns nothing about which it was.
const msgUnauthenticated = "missing or invalid access token"

// Interceptor gates RPCs on the access token.
type Interceptor struct {
	authz     Authorizer
	anonymous map[string]bool
}

var _ connect.Interceptor = (*Interceptor)(nil)

// NewInterceptor returns the gate. anonymous lists full procedure names
// (e.g. "/rayito.rayd.v1.HealthService/Health") that need no token.
func NewInterceptor(a Authorizer, anonymous ...string) *Interceptor {
	set := make(map[string]bool, len(anonymous))
	for _, p := range anonymous {
		set[p] = true
	}
	return &Interceptor{authz: a, anonymous: set}
}

func (i *Interceptor) check(procedure string, token string) error {
	if i.anonymous[procedure] || i.authz.Authorize(token) {
		return nil
	}
	return rpcerr.New(raydv1.ErrorReason_ERROR_REASON_UNAUTHENTICATED, msgUnauthenticated)
}

// WrapUnary gates unary RPCs.
func (i *Interceptor) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		if req.Spec().IsClient {
			return next(ctx, req)
		}
		if err := i.check(req.Spec().Procedure, req.Header().Get(Header)); err != nil {
			return nil, err
		}
		return next(ctx, req)
	}
}

// WrapStreamingClient leaves client-side streams alone.
func (i *Interceptor) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

// WrapStreamingHandler gates server, client and bidi streams before the
// handler reads or sends anything.
func (i *Interceptor) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		if err := i.check(conn.Spec().Procedure, conn.RequestHeader().Get(Header)); err != nil {
			return err
		}
		return next(ctx, conn)
	}
}

// Handler gates a plain HTTP handler (the /files endpoints) with the same
// check as the RPCs: the procedure is the request's path, and a refusal is
// the same Unauthenticated error, answered through rpcerr.WriteHTTP.
func (i *Interceptor) Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := i.check(r.URL.Path, r.Header.Get(Header)); err != nil {
			rpcerr.WriteHTTP(w, err)
			return
		}
		next.ServeHTTP(w, r)
	})
}

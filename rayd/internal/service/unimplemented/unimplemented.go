// Package unimplemented mounts the services whose feature has not landed
// yet. Every RPC of such a service answers Unimplemented with a message
// that names the feature, so a client can tell "not built" from "broken".
// docs/features.md lists the same services.
package unimplemented

import (
	"context"
	"net/http"

	"connectrpc.com/connect"

	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
	"github.com/rayito-dev/rayito/rayd/internal/rpcerr"
)

// Service is one not-yet-built service.
type Service struct {
	// Feature is the product feature, e.g. "network policy (NetworkService)".
	Feature string
	// Mount returns the service's path and handler given handler options.
	Mount func(opts ...connect.HandlerOption) (string, http.Handler)
}

// Services lists the services that answer Unimplemented in this build
// (none today: every service of the contract is built, some of their
// sections and options answer Unimplemented or UNSUPPORTED themselves).
func Services() []Service { return nil }

// Interceptor answers every call with Unimplemented naming feature. It runs
// after authentication, so an unauthenticated caller learns nothing.
func Interceptor(feature string) connect.Interceptor {
	return &interceptor{msg: feature + " is not built yet in this rayd; see docs/features.md"}
}

type interceptor struct{ msg string }

func (i *interceptor) WrapUnary(connect.UnaryFunc) connect.UnaryFunc {
	return func(context.Context, connect.AnyRequest) (connect.AnyResponse, error) {
		return nil, rpcerr.New(raydv1.ErrorReason_ERROR_REASON_UNIMPLEMENTED, i.msg)
	}
}

func (i *interceptor) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (i *interceptor) WrapStreamingHandler(connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(context.Context, connect.StreamingHandlerConn) error {
		return rpcerr.New(raydv1.ErrorReason_ERROR_REASON_UNIMPLEMENTED, i.msg)
	}
}

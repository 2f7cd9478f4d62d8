package raydtest

import (
	"context"
	"encoding/base64"
	"net/http"

	"connectrpc.com/connect"

	"github.com/rayito-dev/rayito/proto/gen/envd/filesystem/filesystemconnect"
	"github.com/rayito-dev/rayito/proto/gen/envd/process/processconnect"
	"github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1/raydv1connect"
	"github.com/rayito-dev/rayito/rayd/internal/auth"
	"github.com/rayito-dev/rayito/rayd/internal/service/envdprocess"
)

// WithToken adds the access token to every call, unary or streaming.
func WithToken(token string) connect.ClientOption {
	return connect.WithInterceptors(connect.UnaryInterceptorFunc(func(next connect.UnaryFunc) connect.UnaryFunc {
		return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
			req.Header().Set(auth.Header, token)
			return next(ctx, req)
		}
	}), streamToken(token))
}

type streamToken string

func (s streamToken) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc { return next }
func (s streamToken) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return func(ctx context.Context, spec connect.Spec) connect.StreamingClientConn {
		conn := next(ctx, spec)
		conn.RequestHeader().Set(auth.Header, string(s))
		return conn
	}
}
func (s streamToken) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return next
}

// withToken puts the harness token first, then opts.
func (h *Harness) withToken(opts []connect.ClientOption) []connect.ClientOption {
	return append([]connect.ClientOption{WithToken(h.Token)}, opts...)
}

// Processes is a ProcessService client with the token.
func (h *Harness) Processes(opts ...connect.ClientOption) raydv1connect.ProcessServiceClient {
	return raydv1connect.NewProcessServiceClient(h.Client, h.APIURL, h.withToken(opts)...)
}

// Ptys is a PtyService client with the token.
func (h *Harness) Ptys(opts ...connect.ClientOption) raydv1connect.PtyServiceClient {
	return raydv1connect.NewPtyServiceClient(h.Client, h.APIURL, h.withToken(opts)...)
}

// Files is a FilesystemService client with the token.
func (h *Harness) Files(opts ...connect.ClientOption) raydv1connect.FilesystemServiceClient {
	return raydv1connect.NewFilesystemServiceClient(h.Client, h.APIURL, h.withToken(opts)...)
}

// Code is a CodeService client with the token, without gzip (the SDK
// does not accept it on the local platform either).
func (h *Harness) Code() raydv1connect.CodeServiceClient {
	return raydv1connect.NewCodeServiceClient(h.Client, h.APIURL, WithToken(h.Token), connect.WithAcceptCompression("gzip", nil, nil))
}

// HTTP1 is a plain HTTP/1.1 client, like undici on http://: the E2B
// SDK's transport to the envd port.
var HTTP1 = &http.Client{Transport: &http.Transport{DisableCompression: true}}

// EnvdHeaders sets the E2B SDK's headers on every call: the token (when
// not empty), the user as Basic credentials (when not empty) and
// Keepalive-Ping-Interval (when not empty).
type EnvdHeaders struct {
	Token, User string
	Keepalive   string
}

// Set sets the headers on h.
func (e EnvdHeaders) Set(h http.Header) {
	if e.Token != "" {
		h.Set(auth.Header, e.Token)
	}
	if e.User != "" {
		h.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(e.User+":")))
	}
	if e.Keepalive != "" {
		h.Set(envdprocess.KeepaliveHeader, e.Keepalive)
	}
}

// WrapUnary implements connect.Interceptor.
func (e EnvdHeaders) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		e.Set(req.Header())
		return next(ctx, req)
	}
}

// WrapStreamingClient implements connect.Interceptor.
func (e EnvdHeaders) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return func(ctx context.Context, spec connect.Spec) connect.StreamingClientConn {
		conn := next(ctx, spec)
		e.Set(conn.RequestHeader())
		return conn
	}
}

// WrapStreamingHandler implements connect.Interceptor.
func (e EnvdHeaders) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return next
}

// EnvdProcess is an envd process client as the E2B SDK makes it (Connect
// with JSON over HTTP/1.1) with the headers hd.
func (h *Harness) EnvdProcess(hd EnvdHeaders) processconnect.ProcessClient {
	return processconnect.NewProcessClient(HTTP1, h.EnvdURL, connect.WithProtoJSON(), connect.WithInterceptors(hd))
}

// EnvdFS is an envd filesystem client as the E2B SDK makes it with the
// headers hd.
func (h *Harness) EnvdFS(hd EnvdHeaders) filesystemconnect.FilesystemClient {
	return filesystemconnect.NewFilesystemClient(HTTP1, h.EnvdURL, connect.WithProtoJSON(), connect.WithInterceptors(hd))
}

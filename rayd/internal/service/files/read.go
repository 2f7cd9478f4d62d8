package files

import (
	"context"
	"errors"
	"io"

	"connectrpc.com/connect"

	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
	"github.com/rayito-dev/rayito/proto/limits"
	"github.com/rayito-dev/rayito/rayd/internal/keepalive"
	"github.com/rayito-dev/rayito/rayd/internal/rpcerr"
)

// Read streams a file: its entry, then chunks of ReadChunk bytes, with a
// keepalive after limits.KeepAliveInterval of silence.
func (s *Service) Read(ctx context.Context, req *connect.Request[raydv1.ReadRequest], stream *connect.ServerStream[raydv1.ReadResponse]) error {
	u, err := s.user(req.Msg.GetUser())
	if err != nil {
		return err
	}
	r, e, err := s.fs.ReadFile(ctx, u, req.Msg.GetPath())
	if err != nil {
		return rpcerr.From(err)
	}
	defer r.Close()
	out := keepalive.Start(limits.KeepAliveInterval, stream.Send, func() *raydv1.ReadResponse {
		return &raydv1.ReadResponse{Event: &raydv1.ReadResponse_Keepalive{Keepalive: &raydv1.KeepAlive{}}}
	})
	defer out.Stop()
	if err := out.Send(&raydv1.ReadResponse{Event: &raydv1.ReadResponse_Entry{Entry: entryInfo(e)}}); err != nil {
		return err
	}
	buf := make([]byte, ReadChunk)
	for {
		if err := ctx.Err(); err != nil {
			return rpcerr.New(raydv1.ErrorReason_ERROR_REASON_CANCELED, "canceled")
		}
		n, rerr := io.ReadFull(r, buf)
		if n > 0 {
			// Send copies nothing: the message must own its bytes.
			chunk := make([]byte, n)
			copy(chunk, buf[:n])
			if err := out.Send(&raydv1.ReadResponse{Event: &raydv1.ReadResponse_Chunk{Chunk: chunk}}); err != nil {
				return err
			}
		}
		if rerr == io.EOF || errors.Is(rerr, io.ErrUnexpectedEOF) {
			return nil
		}
		if rerr != nil {
			return rpcerr.New(raydv1.ErrorReason_ERROR_REASON_INTERNAL, "read failed")
		}
	}
}

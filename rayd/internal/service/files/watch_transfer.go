package files

import (
	"context"

	"connectrpc.com/connect"

	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
	"github.com/rayito-dev/rayito/proto/limits"
	"github.com/rayito-dev/rayito/rayd/internal/keepalive"
	"github.com/rayito-dev/rayito/rayd/internal/transfer"
)

// WatchTransfer streams a transfer's state: the current one, then one per
// change, until it is DONE, FAILED or CANCELLED (a keepalive after 30 s
// of silence). Cutting the stream does not stop the transfer.
func (s *Service) WatchTransfer(ctx context.Context, req *connect.Request[raydv1.WatchTransferRequest], stream *connect.ServerStream[raydv1.WatchTransferResponse]) error {
	m, err := s.transferManager()
	if err != nil {
		return err
	}
	if _, err := s.user(nil); err != nil {
		return err
	}
	if _, err := m.Get(req.Msg.GetTransferId()); err != nil {
		return transferError(err)
	}
	out := keepalive.Start(limits.KeepAliveInterval, stream.Send, func() *raydv1.WatchTransferResponse {
		return &raydv1.WatchTransferResponse{Event: &raydv1.WatchTransferResponse_Keepalive{Keepalive: &raydv1.KeepAlive{}}}
	})
	defer out.Stop()
	err = m.Watch(ctx, req.Msg.GetTransferId(), func(st transfer.State) error {
		return out.Send(&raydv1.WatchTransferResponse{Event: &raydv1.WatchTransferResponse_State{State: transferState(st)}})
	})
	if err != nil {
		return transferError(err)
	}
	return nil
}

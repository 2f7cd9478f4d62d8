package files

import (
	"context"

	"connectrpc.com/connect"

	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
)

// CancelTransfer cancels a transfer (an ended one keeps how it ended; a
// cancelled import leaves no file) and returns its state.
func (s *Service) CancelTransfer(ctx context.Context, req *connect.Request[raydv1.CancelTransferRequest]) (*connect.Response[raydv1.CancelTransferResponse], error) {
	m, err := s.transferManager()
	if err != nil {
		return nil, err
	}
	if _, err := s.user(nil); err != nil {
		return nil, err
	}
	st, err := m.Cancel(ctx, req.Msg.GetTransferId())
	if err != nil {
		return nil, transferError(err)
	}
	return connect.NewResponse(&raydv1.CancelTransferResponse{State: transferState(st)}), nil
}

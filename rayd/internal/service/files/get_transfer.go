package files

import (
	"context"

	"connectrpc.com/connect"

	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
)

// GetTransfer returns a transfer's state.
func (s *Service) GetTransfer(ctx context.Context, req *connect.Request[raydv1.GetTransferRequest]) (*connect.Response[raydv1.GetTransferResponse], error) {
	m, err := s.transferManager()
	if err != nil {
		return nil, err
	}
	if _, err := s.user(nil); err != nil {
		return nil, err
	}
	st, err := m.Get(req.Msg.GetTransferId())
	if err != nil {
		return nil, transferError(err)
	}
	return connect.NewResponse(&raydv1.GetTransferResponse{State: transferState(st)}), nil
}

package network

import (
	"context"

	"connectrpc.com/connect"

	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
	"github.com/rayito-dev/rayito/rayd/internal/rpcerr"
)

// GetNetwork returns the policy in force; of an operator proxy only
// whether one is configured, never its address or credentials.
func (s *Service) GetNetwork(ctx context.Context, _ *connect.Request[raydv1.GetNetworkRequest]) (*connect.Response[raydv1.GetNetworkResponse], error) {
	if s.opts.State.Boot() == nil {
		return nil, rpcerr.New(raydv1.ErrorReason_ERROR_REASON_UNAUTHENTICATED, "missing or invalid access token")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return connect.NewResponse(&raydv1.GetNetworkResponse{State: s.stateLocked()}), nil
}

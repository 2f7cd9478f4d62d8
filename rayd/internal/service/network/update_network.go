package network

import (
	"context"

	"connectrpc.com/connect"

	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
	"github.com/rayito-dev/rayito/rayd/internal/netpolicy"
	"github.com/rayito-dev/rayito/rayd/internal/rpcerr"
)

// UpdateNetwork replaces the whole policy (see the package doc): bad input
// is InvalidArgument and changes nothing; without the capability it is
// FailedPrecondition (EGRESS_UNAVAILABLE); a failed install is Internal
// (EGRESS_UPDATE_FAILED) with deny-all in force.
func (s *Service) UpdateNetwork(ctx context.Context, req *connect.Request[raydv1.UpdateNetworkRequest]) (*connect.Response[raydv1.UpdateNetworkResponse], error) {
	if s.opts.State.Boot() == nil {
		return nil, rpcerr.New(raydv1.ErrorReason_ERROR_REASON_UNAUTHENTICATED, "missing or invalid access token")
	}
	m := req.Msg.GetPolicy()
	p, err := netpolicy.Parse(m.GetAllowOut(), m.GetDenyOut())
	if err != nil {
		return nil, policyErr(err)
	}
	upstream, err := validUpstream(m.GetEgressProxy())
	if err != nil {
		return nil, err
	}
	if err := s.waitStarted(ctx); err != nil {
		return nil, rpcerr.From(err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.available {
		return nil, rpcerr.New(raydv1.ErrorReason_ERROR_REASON_EGRESS_UNAVAILABLE, "rayd cannot program this sandbox's network, so no policy can be enforced")
	}
	if len(p.Hosts()) > 0 && (s.opts.Proxy == nil || s.opts.DNS == nil) {
		return nil, rpcerr.New(raydv1.ErrorReason_ERROR_REASON_EGRESS_UNAVAILABLE, "host rules need rayd's egress proxy, which is not running")
	}
	if err := s.installLocked(ctx, p, upstream); err != nil {
		return nil, err
	}
	return connect.NewResponse(&raydv1.UpdateNetworkResponse{State: s.stateLocked()}), nil
}

package configure

import (
	"context"

	"connectrpc.com/connect"

	"github.com/rayito-dev/rayito/gateway"
	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
	"github.com/rayito-dev/rayito/rayd/internal/rpcerr"
)

// SecretAudit returns the gateway's audit trail: which secret went to
// which host, through which mechanism, how many times; and the
// placeholders seen going to a host that does not hold them. Empty while
// no secret was configured.
func (s *Service) SecretAudit(ctx context.Context, _ *connect.Request[raydv1.SecretAuditRequest]) (*connect.Response[raydv1.SecretAuditResponse], error) {
	if s.opts.State.Boot() == nil {
		return nil, rpcerr.New(raydv1.ErrorReason_ERROR_REASON_UNAUTHENTICATED, "missing or invalid access token")
	}
	s.mu.Lock()
	gw := s.gw
	s.mu.Unlock()
	resp := &raydv1.SecretAuditResponse{}
	if gw == nil {
		return connect.NewResponse(resp), nil
	}
	recs, dropped := gw.Audit()
	resp.Dropped = dropped
	for _, r := range recs {
		resp.Records = append(resp.Records, &raydv1.SecretAuditRecord{
			Mechanism: auditMechanism[r.Mechanism], Name: r.Name, Header: r.Header, Host: r.Host, Port: uint32(r.Port),
			Outcome: auditOutcome[r.Outcome], Count: r.Count, LastUnixMs: r.Last.UnixMilli(),
		})
	}
	return connect.NewResponse(resp), nil
}

var auditMechanism = map[string]raydv1.SecretMechanism{
	gateway.AuditPlaceholder: raydv1.SecretMechanism_SECRET_MECHANISM_PLACEHOLDER,
	gateway.AuditHeaderRule:  raydv1.SecretMechanism_SECRET_MECHANISM_HEADER_RULE,
	gateway.AuditRoute:       raydv1.SecretMechanism_SECRET_MECHANISM_GATEWAY_ROUTE,
}

var auditOutcome = map[string]raydv1.SecretOutcome{
	gateway.AuditSent:      raydv1.SecretOutcome_SECRET_OUTCOME_SENT,
	gateway.AuditWrongHost: raydv1.SecretOutcome_SECRET_OUTCOME_WRONG_HOST,
	gateway.AuditPlainHTTP: raydv1.SecretOutcome_SECRET_OUTCOME_PLAIN_HTTP,
}

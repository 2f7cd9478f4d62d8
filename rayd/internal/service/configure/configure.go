package configure

import (
	"context"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
	"github.com/rayito-dev/rayito/rayd/internal/rpcerr"
)

// Configure applies the sections present, in the fixed order events →
// telemetry → gateway → placeholders → S3 → EFS, each on its own: an
// invalid section keeps its previous configuration and does not stop the
// others. A request with the request_id of the last one gets the last
// answer again without applying anything.
func (s *Service) Configure(ctx context.Context, req *connect.Request[raydv1.ConfigureRequest]) (*connect.Response[raydv1.ConfigureResponse], error) {
	if s.opts.State.Boot() == nil {
		return nil, rpcerr.New(raydv1.ErrorReason_ERROR_REASON_UNAUTHENTICATED, "missing or invalid access token")
	}
	m := req.Msg
	s.mu.Lock()
	defer s.mu.Unlock()
	if id := m.GetRequestId(); id != "" && id == s.lastID && s.lastResp != nil {
		return connect.NewResponse(proto.Clone(s.lastResp).(*raydv1.ConfigureResponse)), nil
	}
	var results []*raydv1.SectionResult
	notBuilt := func(sec raydv1.ConfigSection, what string) {
		results = append(results, unsupported(sec, ClassNotBuilt, what+" are not built in this rayd"))
	}
	if m.LifecycleEvents != nil {
		results = append(results, s.applyEvents(m.LifecycleEvents))
	}
	if m.TelemetryExport != nil {
		results = append(results, s.applyTelemetry(m.TelemetryExport))
	}
	if m.SecretGateway != nil {
		results = append(results, s.applyRoutes(m.SecretGateway))
	}
	if m.SecretPlaceholders != nil {
		results = append(results, s.applyPlaceholders(ctx, m.SecretPlaceholders))
	}
	if m.S3Mounts != nil {
		results = append(results, s.applyS3Mounts(ctx, m.S3Mounts))
	}
	if m.EfsVolumes != nil {
		notBuilt(raydv1.ConfigSection_CONFIG_SECTION_EFS_VOLUMES, "EFS volumes")
	}
	if len(results) > 0 {
		s.generation++
	}
	for _, r := range results {
		s.results[r.Section] = r
	}
	resp := &raydv1.ConfigureResponse{Results: results, ConfigGeneration: s.generation}
	s.lastID, s.lastResp = m.GetRequestId(), proto.Clone(resp).(*raydv1.ConfigureResponse)
	return connect.NewResponse(resp), nil
}

package configure

import (
	"context"
	"slices"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
	"github.com/rayito-dev/rayito/rayd/internal/rpcerr"
)

// ConfigureStatus reports the last outcome of every section configured so
// far, with the routes' and placeholders' live counters.
func (s *Service) ConfigureStatus(ctx context.Context, _ *connect.Request[raydv1.ConfigureStatusRequest]) (*connect.Response[raydv1.ConfigureStatusResponse], error) {
	if s.opts.State.Boot() == nil {
		return nil, rpcerr.New(raydv1.ErrorReason_ERROR_REASON_UNAUTHENTICATED, "missing or invalid access token")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	resp := &raydv1.ConfigureStatusResponse{ConfigGeneration: s.generation}
	for _, r := range s.results {
		r = proto.Clone(r).(*raydv1.SectionResult)
		if r.Section == raydv1.ConfigSection_CONFIG_SECTION_TELEMETRY_EXPORT && r.Code == raydv1.SectionCode_SECTION_CODE_APPLIED {
			r = s.telemetryResult(r)
		}
		if r.Section == raydv1.ConfigSection_CONFIG_SECTION_S3_MOUNTS {
			r = s.s3Status(r)
		}
		if s.gw != nil {
			switch r.Section {
			case raydv1.ConfigSection_CONFIG_SECTION_SECRET_GATEWAY:
				r.Routes = routeStatus(s.gw)
			case raydv1.ConfigSection_CONFIG_SECTION_SECRET_PLACEHOLDERS:
				r.Placeholders = s.placeholderStatus(s.gw)
			}
		}
		resp.Sections = append(resp.Sections, r)
	}
	slices.SortFunc(resp.Sections, func(a, b *raydv1.SectionResult) int { return int(a.Section) - int(b.Section) })
	return connect.NewResponse(resp), nil
}

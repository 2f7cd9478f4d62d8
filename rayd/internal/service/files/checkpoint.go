package files

import (
	"context"

	"connectrpc.com/connect"

	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
)

// Checkpoint archives HOME to S3 (package persist): `started` once the
// location is accepted, `progress` as the archive uploads, `done` with its
// sha256 and counts. See the proto for the rules.
func (s *Service) Checkpoint(ctx context.Context, req *connect.Request[raydv1.CheckpointRequest], stream *connect.ServerStream[raydv1.PersistEvent]) error {
	r, err := s.persistRequest(req.Msg.GetLocation(), req.Msg.GetName())
	if err != nil {
		return err
	}
	r.Excludes = req.Msg.GetExclude()
	var c persistCall
	c.start(&r, stream.Send)
	res, err := s.persist.Checkpoint(ctx, r)
	return c.finish(ctx, res, err)
}

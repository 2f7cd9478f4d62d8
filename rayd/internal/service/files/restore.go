package files

import (
	"context"

	"connectrpc.com/connect"

	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
)

// Restore extracts a checkpoint into HOME (package persist): `started`
// once the manifest is read (with the archive's size), `progress` as it
// downloads and extracts, `done` with its counts. NOT_FOUND without a
// manifest. See the proto for the rules.
func (s *Service) Restore(ctx context.Context, req *connect.Request[raydv1.RestoreRequest], stream *connect.ServerStream[raydv1.PersistEvent]) error {
	r, err := s.persistRequest(req.Msg.GetLocation(), req.Msg.GetName())
	if err != nil {
		return err
	}
	var c persistCall
	c.start(&r, stream.Send)
	res, err := s.persist.Restore(ctx, r)
	return c.finish(ctx, res, err)
}

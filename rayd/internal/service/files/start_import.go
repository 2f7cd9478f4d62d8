package files

import (
	"context"
	"os"
	"time"

	"connectrpc.com/connect"

	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
	"github.com/rayito-dev/rayito/rayd/internal/rpcerr"
	"github.com/rayito-dev/rayito/rayd/internal/transfer"
)

// StartImport checks a pre-signed GET (and DELETE) for the sandbox-bound
// object (the URL policy of package transfer, before any I/O) and starts
// fetching it into a file as the user; GetTransfer and WatchTransfer
// follow it.
func (s *Service) StartImport(ctx context.Context, req *connect.Request[raydv1.StartImportRequest]) (*connect.Response[raydv1.StartImportResponse], error) {
	m, err := s.transferManager()
	if err != nil {
		return nil, err
	}
	msg := req.Msg
	u, err := s.user(msg.GetUser())
	if err != nil {
		return nil, err
	}
	if msg.GetGet() == nil || msg.GetObject() == nil {
		return nil, rpcerr.Invalid("an import needs its object and a pre-signed GET")
	}
	r := transfer.ImportRequest{
		Object: object(msg.GetObject()), Get: signed(msg.GetGet()), WaitForObject: msg.GetWaitForObject(),
		MaxBytes: msg.GetMaxBytes(), ExpectedSHA256: msg.GetExpectedSha256(), Metadata: msg.GetMetadata(),
		Path: msg.GetPath(), User: u, Mode: os.FileMode(msg.GetMode() & 0o777),
	}
	if ms := msg.GetExpiresAtUnixMs(); ms > 0 {
		r.ExpiresAt = time.UnixMilli(ms)
	}
	if d := msg.GetDelete(); d != nil {
		sd := signed(d)
		r.Delete = &sd
	}
	id, err := m.StartImport(r)
	if err != nil {
		return nil, transferError(err)
	}
	return connect.NewResponse(&raydv1.StartImportResponse{TransferId: id}), nil
}

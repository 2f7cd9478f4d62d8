package files

import (
	"context"

	"connectrpc.com/connect"

	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
	"github.com/rayito-dev/rayito/rayd/internal/rpcerr"
	"github.com/rayito-dev/rayito/rayd/internal/transfer"
)

// StartExport checks the pre-signed PUT (or the parts of a multipart
// upload) for the sandbox-bound object and starts uploading the file, read
// as the user; GetTransfer and WatchTransfer follow it (a multipart
// upload's part ETags come in its state: the caller completes it).
func (s *Service) StartExport(ctx context.Context, req *connect.Request[raydv1.StartExportRequest]) (*connect.Response[raydv1.StartExportResponse], error) {
	m, err := s.transferManager()
	if err != nil {
		return nil, err
	}
	msg := req.Msg
	u, err := s.user(msg.GetUser())
	if err != nil {
		return nil, err
	}
	if msg.GetObject() == nil {
		return nil, rpcerr.Invalid("an export needs its object")
	}
	r := transfer.ExportRequest{Object: object(msg.GetObject()), Path: msg.GetPath(), User: u}
	switch up := msg.GetUpload().(type) {
	case *raydv1.StartExportRequest_Put:
		p := signed(up.Put)
		r.Put = &p
	case *raydv1.StartExportRequest_Multipart:
		r.PartSize = up.Multipart.GetPartSize()
		for _, p := range up.Multipart.GetParts() {
			r.Parts = append(r.Parts, signed(p))
		}
	}
	id, err := m.StartExport(r)
	if err != nil {
		return nil, transferError(err)
	}
	return connect.NewResponse(&raydv1.StartExportResponse{TransferId: id}), nil
}

package envdprocess

import (
	"context"

	"connectrpc.com/connect"

	"github.com/rayito-dev/rayito/proto/gen/envd/process"
	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
	"github.com/rayito-dev/rayito/rayd/internal/rpcerr"
)

// MsgStreamInput is StreamInput's answer.
const MsgStreamInput = "process.Process/StreamInput (client streaming) is not implemented in rayd's envd: use SendInput, as the e2b JS SDK does"

// StreamInput is not implemented: the e2b SDKs' fetch transport cannot
// issue client streams and never calls it.
func (s *Service) StreamInput(context.Context, *connect.ClientStream[process.StreamInputRequest]) (*connect.Response[process.StreamInputResponse], error) {
	return nil, rpcerr.New(raydv1.ErrorReason_ERROR_REASON_UNIMPLEMENTED, MsgStreamInput)
}

package lifecycle

import (
	"context"
	"time"

	"connectrpc.com/connect"

	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
	"github.com/rayito-dev/rayito/rayd/internal/deadline"
	"github.com/rayito-dev/rayito/rayd/internal/rpcerr"
)

// maxTimeoutMs bounds timeout_ms before it becomes a Duration: far past any
// cap (8 h), so a larger value is refused as past the cap, not overflowed.
const maxTimeoutMs = 1 << 40

var modes = map[raydv1.TimeoutMode]deadline.Mode{
	raydv1.TimeoutMode_TIMEOUT_MODE_EXACT:    deadline.ModeExact,
	raydv1.TimeoutMode_TIMEOUT_MODE_AT_LEAST: deadline.ModeAtLeast,
}

// SetTimeout moves the deadline: EXACT sets the remaining running time (it
// may shorten it), AT_LEAST only extends it; never past the cap.
//
// Errors: InvalidArgument for timeout_ms 0 or mode UNSPECIFIED, and past
// the cap (the message carries cap_unix_ms=<n>); FailedPrecondition
// LIFECYCLE_UNMANAGED without a lifecycle block, SANDBOX_TIMEOUT once a
// kill-mode timeout expired.
func (s *Service) SetTimeout(_ context.Context, req *connect.Request[raydv1.SetTimeoutRequest]) (*connect.Response[raydv1.SetTimeoutResponse], error) {
	ms := min(req.Msg.GetTimeoutMs(), maxTimeoutMs)
	mode, ok := modes[req.Msg.GetMode()]
	if !ok {
		return nil, rpcerr.From(deadline.ErrInvalid)
	}
	st, err := s.dl.SetTimeout(time.Duration(ms)*time.Millisecond, mode)
	if err != nil {
		return nil, rpcerr.From(err)
	}
	return connect.NewResponse(&raydv1.SetTimeoutResponse{State: Render(st)}), nil
}

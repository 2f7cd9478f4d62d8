package lifecycle

import (
	"context"
	"errors"
	"testing"
	"time"

	"connectrpc.com/connect"

	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
	"github.com/rayito-dev/rayito/rayd/internal/deadline"
	"github.com/rayito-dev/rayito/rayd/internal/rpcerr"
)

func TestRender(t *testing.T) {
	t.Parallel()
	if got := Render(deadline.State{Phase: deadline.PhaseUnmanaged}); got.GetPhase() != raydv1.LifecyclePhase_LIFECYCLE_PHASE_UNMANAGED || got.GetDeadlineUnixMs() != 0 {
		t.Fatalf("unmanaged %v", got)
	}
	at := time.UnixMilli(1_700_000_000_000)
	got := Render(deadline.State{Phase: deadline.PhaseResumeGrace, Deadline: at, Cap: at.Add(time.Hour), Timeout: 90 * time.Second,
		Action: deadline.ActionPause, AutoResume: true, Extensions: 3})
	if got.GetPhase() != raydv1.LifecyclePhase_LIFECYCLE_PHASE_RESUME_GRACE || got.GetDeadlineUnixMs() != at.UnixMilli() || got.GetCapUnixMs() != at.Add(time.Hour).UnixMilli() ||
		got.GetTimeoutMs() != 90_000 || got.GetOnTimeout() != raydv1.TimeoutAction_TIMEOUT_ACTION_PAUSE || !got.GetAutoResume() || got.GetExtensions() != 3 {
		t.Fatalf("grace %v", got)
	}
}

func reason(err error) raydv1.ErrorReason {
	var ce *connect.Error
	if !errors.As(err, &ce) {
		return raydv1.ErrorReason_ERROR_REASON_UNSPECIFIED
	}
	return rpcerr.ReasonOf(ce)
}

func TestSetTimeoutErrors(t *testing.T) {
	t.Parallel()
	dl := deadline.New(deadline.Options{})
	s := New(dl)
	call := func(ms uint64, mode raydv1.TimeoutMode) (*raydv1.LifecycleState, error) {
		resp, err := s.SetTimeout(context.Background(), connect.NewRequest(&raydv1.SetTimeoutRequest{TimeoutMs: ms, Mode: mode}))
		if err != nil {
			return nil, err
		}
		return resp.Msg.GetState(), nil
	}
	if _, err := call(1000, raydv1.TimeoutMode_TIMEOUT_MODE_EXACT); reason(err) != raydv1.ErrorReason_ERROR_REASON_LIFECYCLE_UNMANAGED {
		t.Fatalf("unmanaged: %v", err)
	}
	if _, err := call(1000, raydv1.TimeoutMode_TIMEOUT_MODE_UNSPECIFIED); reason(err) != raydv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT {
		t.Fatalf("unspecified: %v", err)
	}
	dl.Start(deadline.Policy{Timeout: time.Hour, Cap: 2 * time.Hour, Action: deadline.ActionKill})
	if _, err := call(^uint64(0), raydv1.TimeoutMode_TIMEOUT_MODE_AT_LEAST); reason(err) != raydv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT {
		t.Fatalf("huge: %v", err)
	}
	st, err := call(60_000, raydv1.TimeoutMode_TIMEOUT_MODE_EXACT)
	if err != nil || st.GetPhase() != raydv1.LifecyclePhase_LIFECYCLE_PHASE_ACTIVE || st.GetTimeoutMs() != 60_000 || st.GetOnTimeout() != raydv1.TimeoutAction_TIMEOUT_ACTION_KILL {
		t.Fatalf("EXACT: %v %v", st, err)
	}
}

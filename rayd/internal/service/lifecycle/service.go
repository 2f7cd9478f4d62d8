// Package lifecycle implements LifecycleService: the sandbox's server-side
// timeout, kept by package deadline (on running time, within the cap, with
// the run payload's on_timeout action). One file per RPC.
package lifecycle

import (
	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
	"github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1/raydv1connect"
	"github.com/rayito-dev/rayito/rayd/internal/deadline"
)

// Service implements raydv1connect.LifecycleServiceHandler.
type Service struct {
	dl *deadline.Manager
}

var _ raydv1connect.LifecycleServiceHandler = (*Service)(nil)

// New returns the service over the sandbox's deadline.
func New(dl *deadline.Manager) *Service { return &Service{dl: dl} }

var phases = map[deadline.Phase]raydv1.LifecyclePhase{
	deadline.PhaseUnmanaged:   raydv1.LifecyclePhase_LIFECYCLE_PHASE_UNMANAGED,
	deadline.PhaseActive:      raydv1.LifecyclePhase_LIFECYCLE_PHASE_ACTIVE,
	deadline.PhaseResumeGrace: raydv1.LifecyclePhase_LIFECYCLE_PHASE_RESUME_GRACE,
	deadline.PhaseExpired:     raydv1.LifecyclePhase_LIFECYCLE_PHASE_EXPIRED,
}

var actions = map[deadline.Action]raydv1.TimeoutAction{
	deadline.ActionKill:  raydv1.TimeoutAction_TIMEOUT_ACTION_KILL,
	deadline.ActionPause: raydv1.TimeoutAction_TIMEOUT_ACTION_PAUSE,
}

// Render renders a deadline state for the wire (Health reports it too). An
// unmanaged lifetime carries only its phase.
func Render(st deadline.State) *raydv1.LifecycleState {
	out := &raydv1.LifecycleState{Phase: phases[st.Phase]}
	if st.Phase == deadline.PhaseUnmanaged || out.Phase == raydv1.LifecyclePhase_LIFECYCLE_PHASE_UNSPECIFIED {
		out.Phase = raydv1.LifecyclePhase_LIFECYCLE_PHASE_UNMANAGED
		return out
	}
	out.DeadlineUnixMs = st.Deadline.UnixMilli()
	out.CapUnixMs = st.Cap.UnixMilli()
	out.TimeoutMs = uint64(max(st.Timeout.Milliseconds(), 0))
	out.OnTimeout = actions[st.Action]
	out.AutoResume = st.AutoResume
	out.Extensions = st.Extensions
	return out
}

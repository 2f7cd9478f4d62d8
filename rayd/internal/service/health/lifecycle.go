package health

import (
	"context"

	"connectrpc.com/connect"

	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
	"github.com/rayito-dev/rayito/rayd/internal/hooks"
)

// LifecycleSource is what Health and HookAudit report of the lifecycle
// hooks and of the sandbox's timeout. The daemon wires it.
type LifecycleSource interface {
	// HookStatus is the hooks' phase, generations and last resume.
	HookStatus() hooks.Status
	// HookAudit is the hooks' audit ring, oldest first, and the anomaly
	// count since boot.
	HookAudit() ([]hooks.AuditEntry, uint64)
	// Timeout is the managed lifetime (LifecycleService's state).
	Timeout() *raydv1.LifecycleState
}

// SetLifecycle wires the hooks and the timeout into Health (hook_phase,
// generations, clock_offset_ms, lifecycle) and HookAudit. Call it before
// serving.
func (s *Service) SetLifecycle(l LifecycleSource) { s.lifecycle = l }

// HookAudit returns the most recent hook calls, oldest first, and every
// anomaly since boot. It needs the token (every RPC but Health does). An
// entry holds the hook, the caller's class and uid and the outcome: never
// a body, a header or a payload.
func (s *Service) HookAudit(_ context.Context, _ *connect.Request[raydv1.HookAuditRequest]) (*connect.Response[raydv1.HookAuditResponse], error) {
	resp := &raydv1.HookAuditResponse{Anomalies: s.anomalies()}
	if s.lifecycle == nil {
		return connect.NewResponse(resp), nil
	}
	entries, anomalies := s.lifecycle.HookAudit()
	resp.Anomalies = anomalies
	resp.Entries = make([]*raydv1.HookAuditEntry, len(entries))
	for i, e := range entries {
		resp.Entries[i] = &raydv1.HookAuditEntry{
			TimeUnixMs: e.Time.UnixMilli(),
			Hook:       e.Hook,
			Caller:     string(e.Caller),
			Uid:        e.UID,
			Outcome:    string(e.Outcome),
			Anomaly:    e.Anomaly,
		}
	}
	return connect.NewResponse(resp), nil
}

package health

import (
	"context"
	"testing"
	"time"

	"connectrpc.com/connect"

	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
	"github.com/rayito-dev/rayito/rayd/internal/hooks"
	"github.com/rayito-dev/rayito/rayd/internal/sandbox"
)

type fakeSource struct{}

func (fakeSource) HookStatus() hooks.Status {
	return hooks.Status{Phase: hooks.PhaseResumed, SuspendGeneration: 2, ResumeGeneration: 2, ClockOffset: 1500 * time.Millisecond}
}

func (fakeSource) HookAudit() ([]hooks.AuditEntry, uint64) {
	return []hooks.AuditEntry{
		{Time: time.UnixMilli(1000), Hook: "run", Caller: hooks.CallerPlatform, UID: 0, Outcome: hooks.OutcomeInstalled},
		{Time: time.UnixMilli(2000), Hook: "suspend", Caller: hooks.CallerSandbox, UID: 1000, Outcome: hooks.OutcomeChanged, Anomaly: true},
	}, 7
}

func (fakeSource) Timeout() *raydv1.LifecycleState {
	return &raydv1.LifecycleState{Phase: raydv1.LifecyclePhase_LIFECYCLE_PHASE_ACTIVE, DeadlineUnixMs: 42}
}

func TestHealthReportsLifecycle(t *testing.T) {
	t.Parallel()
	s := New(sandbox.New(sandbox.Options{}), func() uint64 { return 7 }, nil)
	s.SetLifecycle(fakeSource{})
	resp, err := s.Health(context.Background(), connect.NewRequest(&raydv1.HealthRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	h := resp.Msg
	if h.GetHookPhase() != "resumed" || h.GetSuspendGeneration() != 2 || h.GetResumeGeneration() != 2 || h.GetClockOffsetMs() != 1500 ||
		h.GetLifecycle().GetPhase() != raydv1.LifecyclePhase_LIFECYCLE_PHASE_ACTIVE || h.GetLifecycle().GetDeadlineUnixMs() != 42 || h.GetHookAnomalies() != 7 {
		t.Fatalf("health %v", h)
	}
}

func TestHookAudit(t *testing.T) {
	t.Parallel()
	s := New(sandbox.New(sandbox.Options{}), func() uint64 { return 0 }, nil)
	resp, err := s.HookAudit(context.Background(), connect.NewRequest(&raydv1.HookAuditRequest{}))
	if err != nil || len(resp.Msg.GetEntries()) != 0 {
		t.Fatalf("unwired: %v %v", resp, err)
	}
	s.SetLifecycle(fakeSource{})
	resp, err = s.HookAudit(context.Background(), connect.NewRequest(&raydv1.HookAuditRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	e := resp.Msg.GetEntries()
	if resp.Msg.GetAnomalies() != 7 || len(e) != 2 {
		t.Fatalf("audit %v", resp.Msg)
	}
	if e[1].GetHook() != "suspend" || e[1].GetCaller() != "sandbox" || e[1].GetUid() != 1000 || e[1].GetOutcome() != "changed" || !e[1].GetAnomaly() || e[1].GetTimeUnixMs() != 2000 {
		t.Fatalf("entry %v", e[1])
	}
}

package health

import (
	"context"
	"testing"

	"connectrpc.com/connect"

	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
	"github.com/rayito-dev/rayito/rayd/internal/sandbox"
	"github.com/rayito-dev/rayito/rayd/internal/version"
)

// agent_version is the plain semver the SDK compares: never the revision.
func TestHealthReportsVersion(t *testing.T) {
	t.Parallel()
	s := New(sandbox.New(sandbox.Options{}), func() uint64 { return 0 }, nil)
	resp, err := s.Health(context.Background(), connect.NewRequest(&raydv1.HealthRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.Msg.GetAgentVersion(); got != version.Version {
		t.Fatalf("agent_version = %q, want %q", got, version.Version)
	}
}

// Health reports what the platform said of the sandbox's isolation and
// limits, and nothing when it said nothing (a microVM).
func TestHealthReportsIsolationAndLimits(t *testing.T) {
	t.Parallel()
	get := func(s *Service) *raydv1.HealthResponse {
		resp, err := s.Health(context.Background(), connect.NewRequest(&raydv1.HealthRequest{}))
		if err != nil {
			t.Fatal(err)
		}
		return resp.Msg
	}
	s := New(sandbox.New(sandbox.Options{}), func() uint64 { return 0 }, nil)
	if h := get(s); h.GetIsolation() != raydv1.Isolation_ISOLATION_UNSPECIFIED || h.GetLimits() != nil {
		t.Fatalf("nothing said: isolation %v, limits %v", h.GetIsolation(), h.GetLimits())
	}
	for flag, want := range map[string]raydv1.Isolation{"full": raydv1.Isolation_ISOLATION_FULL, "rootless": raydv1.Isolation_ISOLATION_ROOTLESS, "none": raydv1.Isolation_ISOLATION_NONE} {
		s.SetIsolation(flag)
		if got := get(s).GetIsolation(); got != want {
			t.Errorf("-isolation %s: %v", flag, got)
		}
	}
	s.SetLimits(2<<30, 1024)
	if l := get(s).GetLimits(); l.GetMemoryBytes() != 2<<30 || l.GetProcesses() != 1024 {
		t.Errorf("limits = %v", l)
	}
}

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

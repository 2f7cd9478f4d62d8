package sandbox

import (
	"context"
	"strings"
	"testing"

	"github.com/rayito-dev/rayito/proto/accesstoken"
	"github.com/rayito-dev/rayito/rayd/internal/hooks"
)

func TestRunInstallsOnceValidated(t *testing.T) {
	t.Parallel()
	tok, _ := accesstoken.New()
	digest, _ := accesstoken.Digest(tok)
	good := `{"metadata":{"k":"v"},"token_sha256":"` + digest + `","v":1,"workdir":"/srv"}`
	cases := map[string]struct {
		id, payload string
		want        hooks.Outcome
	}{
		"valid":          {"microvm-1", good, hooks.OutcomeInstalled},
		"bad payload":    {"microvm-1", `{"v":1}`, hooks.OutcomeTokenless},
		"empty id":       {"", good, hooks.OutcomeTokenless},
		"id with space":  {"a b", good, hooks.OutcomeTokenless},
		"id too long":    {strings.Repeat("a", 257), good, hooks.OutcomeTokenless},
		"id not ascii":   {"microvm-é", good, hooks.OutcomeTokenless},
		"payload as nul": {"microvm-1", "\x00", hooks.OutcomeTokenless},
	}
	for name, c := range cases {
		s := New(Options{})
		if s.Authorize(tok) {
			t.Fatalf("%s: authorized before /run", name)
		}
		if got := s.Run(context.Background(), c.id, c.payload); got != c.want {
			t.Errorf("%s: outcome %v, want %v", name, got, c.want)
		}
		if got := s.Authorize(tok); got != (c.want == hooks.OutcomeInstalled) {
			t.Errorf("%s: Authorize = %v", name, got)
		}
		if s.Authorize("") || s.Authorize(tok+"x") {
			t.Errorf("%s: a bad token was authorized", name)
		}
	}
	s := New(Options{})
	s.Run(context.Background(), "microvm-1", good)
	b := s.Boot()
	if b.SandboxID != "microvm-1" || b.User != "user" || b.Workdir != "/srv" || !b.WorkdirSet || b.Metadata["k"] != "v" {
		t.Fatalf("boot %+v", b)
	}
}

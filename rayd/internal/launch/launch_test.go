package launch

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"connectrpc.com/connect"

	"github.com/rayito-dev/rayito/rayd/internal/identity"
	"github.com/rayito-dev/rayito/rayd/internal/sandbox"
)

func testBuilder(t *testing.T, passwd, group string) *Builder {
	t.Helper()
	dir := t.TempDir()
	pw, gr := filepath.Join(dir, "passwd"), filepath.Join(dir, "group")
	if err := os.WriteFile(pw, []byte(passwd), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(gr, []byte(group), 0o644); err != nil {
		t.Fatal(err)
	}
	return &Builder{Resolver: &identity.Resolver{PasswdPath: pw, GroupPath: gr}, Privileged: true}
}

const (
	passwd = "root:x:0:0:root:/root:/bin/bash\nuser:x:1000:1000::/home/user:/bin/bash\nwheel:x:1001:0::/home/wheel:/bin/sh\nbob:x:1002:1002::/home/bob:/bin/sh\n"
	group  = "root:x:0:\nuser:x:1000:\nbob:x:1002:\n"
)

// codeOf is the code rpcerr gives each sentinel (rpcerr imports this
// package, so its own table is tested there).
func codeOf(err error) connect.Code {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, ErrInvalid):
		return connect.CodeInvalidArgument
	case errors.Is(err, ErrExecutableNotFound), errors.Is(err, ErrCwdNotFound):
		return connect.CodeNotFound
	case errors.Is(err, ErrUserDenied), errors.Is(err, ErrNotExecutable):
		return connect.CodePermissionDenied
	case errors.Is(err, ErrAccounts):
		return connect.CodeInternal
	}
	return connect.CodeUnknown
}

func TestSpecEnvironmentAndIdentity(t *testing.T) {
	t.Parallel()
	b := testBuilder(t, passwd, group)
	boot := &sandbox.Boot{User: "user", Workdir: "/", Envs: map[string]string{"A": "1", "PATH": "/opt/bin"}}
	spec, err := b.Spec(boot, Request{Cmd: "/bin/sh", Args: []string{"-c", "true"}, Envs: map[string]string{"A": "2", "Z": "3"}})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"PATH=/opt/bin", "HOME=/home/user", "USER=user", "LOGNAME=user", "A=2", "Z=3"}
	if !slices.Equal(spec.Env, want) {
		t.Fatalf("env %q, want %q", spec.Env, want)
	}
	if spec.Identity == nil || spec.Identity.UID != 1000 || spec.Args[0] != "/bin/sh" || spec.Dir != "/" {
		t.Fatalf("spec %+v", spec)
	}
}

func TestSpecRefusals(t *testing.T) {
	t.Parallel()
	b := testBuilder(t, passwd, group)
	boot := &sandbox.Boot{User: "user", Workdir: "/"}
	cases := map[string]struct {
		req  Request
		want connect.Code
	}{
		"root without allow": {Request{User: "root", Cmd: "true"}, connect.CodePermissionDenied},
		"group 0":            {Request{User: "wheel", Cmd: "true"}, connect.CodePermissionDenied},
		"unknown":            {Request{User: "nobody-here", Cmd: "true"}, connect.CodePermissionDenied},
		"empty cmd":          {Request{Cmd: ""}, connect.CodeInvalidArgument},
		"NUL env":            {Request{Cmd: "true", Envs: map[string]string{"A": "x\x00"}}, connect.CodeInvalidArgument},
		"negative timeout":   {Request{Cmd: "true", Timeout: -1}, connect.CodeInvalidArgument},
		"missing exe":        {Request{Cmd: "definitely-not-a-command"}, connect.CodeNotFound},
		"missing cwd":        {Request{Cmd: "true", Cwd: ptr("/nonexistent-dir")}, connect.CodeNotFound},
	}
	for name, c := range cases {
		if _, err := b.Spec(boot, c.req); codeOf(err) != c.want {
			t.Errorf("%s: %v, want %v", name, err, c.want)
		}
	}
	if spec, err := b.Spec(boot, Request{User: "bob", Cmd: "true"}); err != nil || spec.Identity.UID != 1002 {
		t.Fatalf("bob: %v %+v", err, spec.Identity)
	}
	b.Resolver.AllowRoot = true
	if spec, err := b.Spec(boot, Request{User: "root", Cmd: "true"}); err != nil || spec.Identity.UID != 0 {
		t.Fatalf("root allowed: %v", err)
	}
}

func TestDefaultUserFallsBackToUID1000(t *testing.T) {
	t.Parallel()
	// No "user" entry: uid 1000 under another name is the default user.
	b := testBuilder(t, "root:x:0:0::/root:/bin/sh\ncloud:x:1000:1000::/home/cloud:/bin/sh\n", "cloud:x:1000:\n")
	spec, err := b.Spec(&sandbox.Boot{User: "user", Workdir: "/home/user"}, Request{Cmd: "true"})
	if err != nil || spec.Identity.UID != 1000 || spec.Identity.Username != "cloud" {
		t.Fatalf("%v %+v", err, spec.Identity)
	}
	// No uid 1000 at all: a synthesized user:user.
	b = testBuilder(t, "root:x:0:0::/root:/bin/sh\n", "")
	spec, err = b.Spec(&sandbox.Boot{User: "user", Workdir: "/home/user"}, Request{Cmd: "true"})
	if err != nil || spec.Identity.UID != 1000 || spec.Identity.Home != "/home/user" {
		t.Fatalf("%v %+v", err, spec.Identity)
	}
	// The default workdir falls back quietly; an explicit one must exist.
	if spec.Dir == "" {
		t.Fatal("no workdir")
	}
	if _, err := b.Spec(&sandbox.Boot{User: "user", Workdir: "/nonexistent", WorkdirSet: true}, Request{Cmd: "true"}); codeOf(err) != connect.CodeNotFound {
		t.Fatalf("explicit missing workdir: %v", err)
	}
}

func TestRelativeCwdIsUnderHome(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	if err := os.Mkdir(filepath.Join(home, "proj"), 0o755); err != nil {
		t.Fatal(err)
	}
	b := testBuilder(t, "user:x:1000:1000::"+home+":/bin/sh\n", "user:x:1000:\n")
	spec, err := b.Spec(&sandbox.Boot{User: "user"}, Request{Cmd: "true", Cwd: ptr("proj")})
	if err != nil || spec.Dir != filepath.Join(home, "proj") {
		t.Fatalf("%v dir %q", err, spec.Dir)
	}
}

func TestUnprivilegedRunsAsSelf(t *testing.T) {
	t.Parallel()
	b := testBuilder(t, passwd, group)
	b.Privileged, b.SelfUID = false, uint32(os.Getuid())
	spec, err := b.Spec(&sandbox.Boot{User: "user"}, Request{Cmd: "true"})
	if err != nil || spec.Identity != nil {
		t.Fatalf("default user without root: %v %+v", err, spec.Identity)
	}
	if os.Getuid() != 1002 {
		if _, err := b.Spec(&sandbox.Boot{User: "user"}, Request{User: "bob", Cmd: "true"}); codeOf(err) != connect.CodePermissionDenied {
			t.Fatalf("another user without root: %v", err)
		}
	}
}

func ptr[T any](v T) *T { return &v }

// Every refusal of the identity rules has words for the client, no code.
func TestDeniedWhyCoversEveryReason(t *testing.T) {
	for _, r := range []string{identity.ReasonUnknownUser, identity.ReasonRootNotAllowed, identity.ReasonUIDOutOfRange, identity.ReasonGIDOutOfRange, identity.ReasonInGroup0} {
		if w := deniedWhy[r]; w == "" || strings.Contains(w, "_") && !strings.Contains(w, "RAYITO_ALLOW_ROOT") {
			t.Errorf("reason %s: %q", r, w)
		}
	}
	b := testBuilder(t, passwd, group)
	_, err := b.Spec(&sandbox.Boot{User: "user"}, Request{Cmd: "true", User: "root"})
	var pm interface{ PublicMessage() string }
	if !errors.As(err, &pm) || pm.PublicMessage() != "user not allowed: "+deniedWhy[identity.ReasonRootNotAllowed] {
		t.Errorf("root without RAYITO_ALLOW_ROOT: %v", err)
	}
}

// TestBuilderEnv: the Builder's Env comes after PATH, HOME, USER and
// LOGNAME and before the sandbox's and the request's envs, which win; a
// PTY's TERM is kept.
func TestBuilderEnv(t *testing.T) {
	t.Parallel()
	b := testBuilder(t, passwd, group)
	b.Env = func() map[string]string {
		return map[string]string{"HTTP_PROXY": "http://127.0.0.1:9180", "NO_PROXY": "localhost", "TERM": "dumb"}
	}
	boot := &sandbox.Boot{User: "user", Workdir: "/", Envs: map[string]string{"NO_PROXY": "from-sandbox"}}
	spec, err := b.Spec(boot, Request{Cmd: "/bin/sh", Envs: map[string]string{"HTTP_PROXY": "from-request"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := lookupEnv(spec.Env, "HTTP_PROXY"); got != "from-request" {
		t.Errorf("HTTP_PROXY = %q", got)
	}
	if got := lookupEnv(spec.Env, "NO_PROXY"); got != "from-sandbox" {
		t.Errorf("NO_PROXY = %q", got)
	}
	if !strings.HasPrefix(spec.Env[0], "PATH=") {
		t.Errorf("env starts %q", spec.Env[0])
	}
	spec, err = b.PTYSpec(boot, Request{}, 80, 24)
	if err != nil {
		t.Fatal(err)
	}
	if got := lookupEnv(spec.Env, "TERM"); got != Term {
		t.Errorf("PTY TERM = %q", got)
	}
	if got := lookupEnv(spec.Env, "HTTP_PROXY"); got != "http://127.0.0.1:9180" {
		t.Errorf("PTY HTTP_PROXY = %q", got)
	}
}

package launch

import (
	"os"
	"slices"
	"testing"

	"connectrpc.com/connect"

	"github.com/rayito-dev/rayito/rayd/internal/sandbox"
)

func TestPTYSpecLoginShell(t *testing.T) {
	t.Parallel()
	b := testBuilder(t, passwd, group)
	boot := &sandbox.Boot{User: "user", Workdir: "/", Envs: map[string]string{"A": "1"}}
	spec, err := b.PTYSpec(boot, Request{Envs: map[string]string{"Z": "3"}}, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"PATH=" + DefaultPath, "HOME=/home/user", "USER=user", "LOGNAME=user", "TERM=xterm-256color", "A=1", "Z=3"}
	if !slices.Equal(spec.Env, want) {
		t.Fatalf("env %q, want %q", spec.Env, want)
	}
	if spec.Path != "/bin/bash" || !slices.Equal(spec.Args, []string{"-bash"}) || spec.PTY == nil || spec.Stdin {
		t.Fatalf("spec %+v", spec)
	}
	if spec.Identity == nil || spec.Identity.UID != 1000 || spec.Dir != "/" {
		t.Fatalf("spec %+v", spec)
	}
	// bob's shell is /bin/sh; a requested shell wins and is looked up in
	// PATH; the request may set TERM.
	spec, err = b.PTYSpec(boot, Request{User: "bob"}, 120, 40)
	if err != nil || spec.Path != "/bin/sh" || spec.Args[0] != "-sh" || spec.PTY.Cols != 120 || spec.PTY.Rows != 40 {
		t.Fatalf("%v %+v", err, spec)
	}
	spec, err = b.PTYSpec(boot, Request{Shell: ptr("sh"), Envs: map[string]string{"TERM": "vt100"}}, 0, 0)
	if err != nil || spec.Args[0] != "-sh" || !slices.Contains(spec.Env, "TERM=vt100") || slices.Contains(spec.Env, "TERM=xterm-256color") {
		t.Fatalf("%v %+v", err, spec)
	}
}

func TestPTYSpecFallbackShell(t *testing.T) {
	t.Parallel()
	b := testBuilder(t, "user:x:1000:1000::/home/user:/usr/sbin/nologin\nbob:x:1002:1002::/home/bob:/nonexistent/shell\n", "user:x:1000:\nbob:x:1002:\n")
	fallback := "/bin/sh"
	if _, err := os.Stat("/bin/bash"); err == nil {
		fallback = "/bin/bash"
	}
	for _, u := range []string{"user", "bob"} {
		spec, err := b.PTYSpec(&sandbox.Boot{User: "user"}, Request{User: u}, 0, 0)
		if err != nil || spec.Path != fallback {
			t.Fatalf("%s: %v %q", u, err, spec.Path)
		}
	}
	// No passwd entry for uid 1000: the synthesized user gets the fallback.
	b = testBuilder(t, "root:x:0:0::/root:/bin/sh\n", "")
	spec, err := b.PTYSpec(&sandbox.Boot{User: "user"}, Request{}, 0, 0)
	if err != nil || spec.Path != fallback {
		t.Fatalf("%v %q", err, spec.Path)
	}
}

func TestPTYSpecRefusals(t *testing.T) {
	t.Parallel()
	b := testBuilder(t, passwd, group)
	boot := &sandbox.Boot{User: "user", Workdir: "/"}
	cases := []struct {
		name       string
		req        Request
		cols, rows uint16
		want       connect.Code
	}{
		{"cols", Request{}, 4097, 24, connect.CodeInvalidArgument},
		{"rows", Request{}, 80, 4097, connect.CodeInvalidArgument},
		{"empty shell", Request{Shell: ptr("")}, 0, 0, connect.CodeInvalidArgument},
		{"missing shell", Request{Shell: ptr("/no/such/shell")}, 0, 0, connect.CodeNotFound},
		{"root", Request{User: "root"}, 0, 0, connect.CodePermissionDenied},
		{"cwd", Request{Cwd: ptr("/no/such/dir")}, 0, 0, connect.CodeNotFound},
	}
	for _, c := range cases {
		if _, err := b.PTYSpec(boot, c.req, c.cols, c.rows); codeOf(err) != c.want {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
}

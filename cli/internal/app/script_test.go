package app

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/rayito-dev/rayito/cli/internal/cliutil"
	"github.com/rayito-dev/rayito/localvm"
)

func TestMain(m *testing.M) {
	// The platform launches each sandbox's init by re-executing this
	// binary; testscript runs `rayito` in it too.
	localvm.MaybeRunInit()
	testscript.Main(m, map[string]func(){
		"rayito": func() { os.Exit(Main(context.Background(), os.Args, Stdio())) },
	})
}

// TestScripts runs testdata/script/*.txtar: golden stdout, stderr and exit
// codes of `rayito` run in process, against one local platform started by
// this test.
func TestScripts(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a local platform")
	}
	ep, stateDir := startPlatform(t)
	// The token store reads the process's XDG_STATE_HOME; the scripts'
	// rayito and the in-process create below share it.
	tokens := t.TempDir()
	t.Setenv("XDG_STATE_HOME", tokens)
	testscript.Run(t, testscript.Params{
		Dir: "testdata/script",
		// [root]: the platform runs as root (full isolation, cgroup limits,
		// the cgroup freezer that pause and resume need). [kernel]: the
		// code interpreter's Python kernel is installed.
		Condition: func(cond string) (bool, error) {
			switch cond {
			case "root":
				return os.Geteuid() == 0, nil
			case "kernel":
				// python3-ipykernel and python3-matplotlib (make deps).
				return exec.Command("/usr/bin/python3", "-c", "import ipykernel, matplotlib").Run() == nil, nil
			}
			return false, fmt.Errorf("unknown condition %q", cond)
		},
		Setup: func(e *testscript.Env) error {
			e.Setenv("RAYITO_ENDPOINT", ep)
			e.Setenv("XDG_STATE_HOME", tokens)
			e.Setenv("STATEDIR", stateDir)
			return nil
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			// status N CMD [ARGS...]: run CMD (as exec does, keeping its
			// stdout and stderr) and want exit status N.
			"status": cmdStatus,
			// sleep DURATION: wait (to let a background command run).
			"sleep": func(ts *testscript.TestScript, neg bool, args []string) {
				if neg || len(args) != 1 {
					ts.Fatalf("usage: sleep DURATION")
				}
				d, err := time.ParseDuration(args[0])
				if err != nil {
					ts.Fatalf("sleep: %v", err)
				}
				time.Sleep(d)
			},
			// waitended ID: wait (at most a minute) until the sandbox ID
			// is TERMINATED.
			"waitended": func(ts *testscript.TestScript, neg bool, args []string) {
				if neg || len(args) != 1 {
					ts.Fatalf("usage: waitended ID")
				}
				for deadline := time.Now().Add(time.Minute); ; {
					var out, errb bytes.Buffer
					f := &cliutil.Factory{IO: cliutil.IO{In: strings.NewReader(""), Out: &out, Err: &errb}, Env: ts.Getenv}
					_ = NewRoot(f).Run(context.Background(), []string{"rayito", "sandbox", "info", "--json", args[0]})
					if strings.Contains(out.String(), `"state": "TERMINATED"`) {
						return
					}
					if time.Now().After(deadline) {
						ts.Fatalf("waitended: %s not TERMINATED after a minute: %s%s", args[0], out.String(), errb.String())
					}
					time.Sleep(100 * time.Millisecond)
				}
			},
			// mode PATH PERM: PATH (not followed) has the permission bits
			// PERM (octal) less the umask, and no set-id bit.
			"mode": cmdMode,
			// symlinkto PATH TARGET: PATH is a symbolic link to TARGET.
			"symlinkto": func(ts *testscript.TestScript, neg bool, args []string) {
				if neg || len(args) != 2 {
					ts.Fatalf("usage: symlinkto PATH TARGET")
				}
				got, err := os.Readlink(ts.MkAbs(args[0]))
				if err != nil || got != args[1] {
					ts.Fatalf("%s: link to %q (%v), want %q", args[0], got, err, args[1])
				}
			},
			// idprefix VAR ID N: $VAR is the first N characters of the
			// UUID of sandbox id ID.
			"idprefix": func(ts *testscript.TestScript, neg bool, args []string) {
				if neg || len(args) != 3 {
					ts.Fatalf("usage: idprefix VAR ID N")
				}
				n, err := strconv.Atoi(args[2])
				uuid := strings.TrimPrefix(args[1], "microvm-")
				if err != nil || n < 1 || n > len(uuid) {
					ts.Fatalf("idprefix: bad N %q", args[2])
				}
				ts.Setenv(args[0], uuid[:n])
			},
			// sandbox VAR [FLAGS...]: create a sandbox (with create's
			// FLAGS), its id in $VAR.
			"sandbox": func(ts *testscript.TestScript, neg bool, args []string) {
				if neg || len(args) < 1 {
					ts.Fatalf("usage: sandbox VAR [FLAGS...]")
				}
				var out, errb bytes.Buffer
				f := &cliutil.Factory{IO: cliutil.IO{In: strings.NewReader(""), Out: &out, Err: &errb}, Env: ts.Getenv}
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
				defer cancel()
				if err := NewRoot(f).Run(ctx, append([]string{"rayito", "sandbox", "create"}, args[1:]...)); err != nil {
					ts.Fatalf("create: %v %s", err, errb.String())
				}
				ts.Setenv(args[0], strings.TrimSpace(out.String()))
			},
		},
	})
}

// startPlatform serves an in-process local platform with a state dir (so
// a scope) and subnet of its own for the test's duration.
func startPlatform(t *testing.T) (endpoint, stateDir string) {
	t.Helper()
	stateDir = t.TempDir()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	ctx, cancel := context.WithCancel(context.Background())
	srv, err := localvm.New(ctx, localvm.Options{StateDir: stateDir, Logger: log, Subnet: netip.MustParsePrefix("10.217.0.0/16")})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	t.Cleanup(func() {
		dctx, dcancel := context.WithTimeout(context.Background(), time.Minute)
		defer dcancel()
		if err := srv.TerminateAll(dctx); err != nil {
			t.Errorf("TerminateAll: %v", err)
		}
		cancel()
		<-done
		if err := srv.Close(dctx); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return "http://" + ln.Addr().String(), filepath.Clean(stateDir)
}

// cmdStatus is the scripts' `status N CMD [ARGS...]`: run CMD (as exec
// does, keeping its stdout and stderr) and want exit status N.
func cmdStatus(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 2 {
		ts.Fatalf("usage: status N CMD [ARGS...]")
	}
	want, err := strconv.Atoi(args[0])
	if err != nil {
		ts.Fatalf("status: %v", err)
	}
	got := 0
	if err := ts.Exec(args[1], args[2:]...); err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			ts.Fatalf("status: %v", err)
		}
		got = ee.ExitCode()
	}
	if got != want {
		ts.Fatalf("exit status %d, want %d", got, want)
	}
}

// cmdMode is the scripts' `mode PATH PERM`.
func cmdMode(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: mode PATH PERM")
	}
	perm, err := strconv.ParseUint(args[1], 8, 32)
	if err != nil {
		ts.Fatalf("mode: %v", err)
	}
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		ts.Fatalf("mode: %v", err)
	}
	var mask uint64
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Umask:"); ok {
			mask, _ = strconv.ParseUint(strings.TrimSpace(v), 8, 32)
		}
	}
	fi, err := os.Lstat(ts.MkAbs(args[0]))
	if err != nil {
		ts.Fatalf("mode: %v", err)
	}
	want := fs.FileMode(perm &^ mask)
	if got := fi.Mode() &^ fs.ModeType; got != want {
		ts.Fatalf("%s: mode %v, want %v (%s less the umask %03o)", args[0], got, want, args[1], mask)
	}
}

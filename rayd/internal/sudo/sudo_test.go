package sudo

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rayito-dev/rayito/proto/accesstoken"
	"github.com/rayito-dev/rayito/proto/runpayload"
	"github.com/rayito-dev/rayito/rayd/internal/identity"
	"github.com/rayito-dev/rayito/rayd/internal/launch"
	"github.com/rayito-dev/rayito/rayd/internal/proc"
	"github.com/rayito-dev/rayito/rayd/internal/sandbox"
)

func TestParseArgs(t *testing.T) {
	for _, c := range []struct {
		args []string
		want Request
		err  string
	}{
		{args: []string{"id"}, want: Request{Args: []string{"id"}}},
		{args: []string{"-u", "user", "--", "-x", "y"}, want: Request{User: "user", Args: []string{"-x", "y"}}},
		{args: []string{"-Eu", "bob", "ls", "-l"}, want: Request{User: "bob", PreserveEnv: true, Args: []string{"ls", "-l"}}},
		{args: []string{"-ubob", "ls"}, want: Request{User: "bob", Args: []string{"ls"}}},
		{args: []string{"--user=bob", "--preserve-env=A,B", "--chdir", "/tmp", "FOO=1", "BAR=a=b", "env", "X=1"}, want: Request{User: "bob", Preserve: []string{"A", "B"}, Chdir: "/tmp", SetEnv: []string{"FOO=1", "BAR=a=b"}, Args: []string{"env", "X=1"}}},
		{args: []string{"-i"}, want: Request{Login: true}},
		{args: []string{"-s", "echo", "a"}, want: Request{Shell: true, Args: []string{"echo", "a"}}},
		{args: []string{"-n", "-H", "-S", "-p", "pw:", "true"}, want: Request{Args: []string{"true"}}},
		{args: []string{"-i", "-s"}, err: "both"},
		{args: []string{"-g", "wheel", "id"}, err: "-g is not supported"},
		{args: []string{"--group=wheel", "id"}, err: "--group is not supported"},
		{args: []string{"-u"}, err: "requires an argument"},
	} {
		o, err := parseArgs(c.args)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%q: %v, want %q", c.args, err, c.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", c.args, err)
			continue
		}
		if got, _ := json.Marshal(o.req); string(got) != string(must(json.Marshal(c.want))) {
			t.Errorf("%q: %s, want %s", c.args, got, must(json.Marshal(c.want)))
		}
	}
	if got := shellEscape([]string{"echo", "a b", "$HOME", "x;y", "é"}); got != `echo a\ b $HOME x\;y \é` {
		t.Errorf("shellEscape: %s", got)
	}
}

func must(b []byte, _ error) []byte { return b }

// env is a sudo server with a supervisor, a started sandbox state, and a
// socket.
type env struct {
	t      *testing.T
	socket string
	sup    *proc.Supervisor
	state  *sandbox.State
}

func newEnv(t *testing.T, started bool) *env {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: sudo switches users (rayd runs as root)")
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	sup, err := proc.New(proc.Options{Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		sup.Shutdown(ctx, time.Second)
	})
	state := sandbox.New(sandbox.Options{Logger: log})
	if started {
		tok, _ := accesstoken.New()
		digest, _ := accesstoken.Digest(tok)
		raw, err := runpayload.Encode(&runpayload.Payload{V: 1, TokenSHA256: digest, Envs: map[string]string{"SANDBOX_ENV": "x"}})
		if err != nil {
			t.Fatal(err)
		}
		state.Run(context.Background(), "microvm-test", raw)
	}
	srv := &Server{State: state, Sup: sup, Log: log,
		Builder: &launch.Builder{Resolver: &identity.Resolver{AllowRoot: true}, Privileged: true}}
	socket := filepath.Join(t.TempDir(), "run", "sudo.sock")
	ln, err := Listen(socket)
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(socket); err != nil || fi.Mode().Perm() != 0o666 {
		t.Fatalf("socket mode: %v %v", fi, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return &env{t: t, socket: socket, sup: sup, state: state}
}

type result struct {
	code           int
	sig            syscall.Signal
	stdout, stderr string // the command's (its descriptors 1 and 2) and sudo's own
	sudoErr        string
}

// sudo runs the client with args, the command's descriptors being files
// of its own, and the caller's environment callerEnv.
func (e *env) sudo(callerEnv []string, signals chan os.Signal, args ...string) result {
	e.t.Helper()
	dir := e.t.TempDir()
	in, _ := os.Open(os.DevNull)
	out, _ := os.Create(filepath.Join(dir, "out"))
	errf, _ := os.Create(filepath.Join(dir, "err"))
	defer in.Close()
	defer out.Close()
	defer errf.Close()
	var sudoOut, sudoErr bytes.Buffer
	code, sig := run(client{socket: e.socket, fds: [3]int{int(in.Fd()), int(out.Fd()), int(errf.Fd())}, env: callerEnv, cwd: "/", signals: signals},
		args, &sudoOut, &sudoErr)
	o, _ := os.ReadFile(filepath.Join(dir, "out"))
	ee, _ := os.ReadFile(filepath.Join(dir, "err"))
	return result{code: code, sig: sig, stdout: sudoOut.String() + string(o), stderr: string(ee), sudoErr: sudoErr.String()}
}

func TestSudo(t *testing.T) {
	e := newEnv(t, true)
	caller := []string{"FOO=1", "TERM=xterm-test", "LC_ALL=C.UTF-8", "PATH=/evil", "HOME=/home/user", "USER=user", "SHELL=/bin/sh"}
	if r := e.sudo(caller, nil, "id", "-u"); r.code != 0 || r.stdout != "0\n" {
		t.Fatalf("sudo id -u: %+v", r)
	}
	if r := e.sudo(caller, nil, "-u", "user", "id", "-u"); r.code != 0 || r.stdout != "1000\n" {
		t.Fatalf("sudo -u user id -u: %+v", r)
	}
	// sudo's environment: reset, but for the terminal and the locale; the
	// target's PATH, HOME, USER; who asked; not the sandbox's own envs.
	r := e.sudo(caller, nil, "BAR=2", "env")
	got := strings.Split(strings.TrimSpace(r.stdout), "\n")
	for _, want := range []string{"TERM=xterm-test", "LC_ALL=C.UTF-8", "BAR=2", "HOME=/root", "USER=root", "LOGNAME=root",
		"PATH=" + launch.DefaultPath, "SUDO_USER=root", "SUDO_UID=0", "SUDO_GID=0", "SUDO_COMMAND=env"} {
		if !slices.Contains(got, want) {
			t.Errorf("sudo env: no %s in %q", want, got)
		}
	}
	for _, not := range []string{"FOO=1", "PATH=/evil", "HOME=/home/user", "SANDBOX_ENV=x"} {
		if slices.Contains(got, not) {
			t.Errorf("sudo env: %s kept", not)
		}
	}
	if r := e.sudo(caller, nil, "-E", "env"); !strings.Contains(r.stdout, "\nFOO=1\n") || strings.Contains(r.stdout, "PATH=/evil") {
		t.Errorf("sudo -E env: %q", r.stdout)
	}
	if r := e.sudo(caller, nil, "--preserve-env=FOO", "env"); !strings.Contains(r.stdout, "\nFOO=1\n") {
		t.Errorf("sudo --preserve-env=FOO env: %q", r.stdout)
	}
	if r := e.sudo(caller, nil, "sh", "-c", "echo out; echo err >&2; exit 7"); r.code != 7 || r.stdout != "out\n" || r.stderr != "err\n" {
		t.Errorf("exit code and descriptors: %+v", r)
	}
	if r := e.sudo(caller, nil, "-i", "pwd"); r.code != 0 || r.stdout != "/root\n" {
		t.Errorf("sudo -i pwd: %+v", r)
	}
	if r := e.sudo(caller, nil, "-s", "echo", "a b", "$0"); r.code != 0 || r.stdout != "a b /bin/sh\n" {
		t.Errorf("sudo -s: %+v", r)
	}
	if r := e.sudo(caller, nil, "nosuchcommand"); r.code != 1 || r.sudoErr != "sudo: nosuchcommand: command not found\n" {
		t.Errorf("not found: %+v", r)
	}
	if r := e.sudo(caller, nil, "-u", "nosuchuser", "id"); r.code != 1 || !strings.Contains(r.sudoErr, "nosuchuser") {
		t.Errorf("unknown user: %+v", r)
	}
	if r := e.sudo(caller, nil, "-D", "/nonexistent", "id"); r.code != 1 || !strings.Contains(r.sudoErr, "unable to change directory to /nonexistent") {
		t.Errorf("-D: %+v", r)
	}
	// Killed by a signal: the client learns which.
	if r := e.sudo(caller, nil, "sh", "-c", "kill -TERM $$"); r.sig != syscall.SIGTERM || r.code != 143 {
		t.Errorf("killed: %+v", r)
	}
	// A signal the client receives reaches the command's group.
	sigs := make(chan os.Signal, 1)
	go func() {
		time.Sleep(500 * time.Millisecond)
		sigs <- syscall.SIGINT
	}()
	if r := e.sudo(caller, sigs, "sh", "-c", `trap "echo interrupted; exit 3" INT; sleep 20 & wait`); r.code != 3 || r.stdout != "interrupted\n" {
		t.Errorf("forwarded SIGINT: %+v", r)
	}
	if r := e.sudo(caller, nil, "-l"); r.code != 0 || !strings.Contains(r.stdout, "NOPASSWD: ALL") {
		t.Errorf("sudo -l: %+v", r)
	}
	if n := len(e.sup.List()); n != 0 {
		t.Errorf("%d processes left", n)
	}
}

// A client that goes away takes its command with it, as a hung-up
// terminal does: killing sudo (E2B's commands.kill) ends what it started.
func TestSudoClientGone(t *testing.T) {
	e := newEnv(t, true)
	c, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: e.socket, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	body, _ := json.Marshal(Request{Args: []string{"sleep", "30"}, Cwd: "/"})
	null, _ := os.Open(os.DevNull)
	defer null.Close()
	fd := int(null.Fd())
	if _, _, err := c.WriteMsgUnix(header(len(body)), unix.UnixRights(fd, fd, fd), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write(body); err != nil {
		t.Fatal(err)
	}
	line := make([]byte, 64)
	n, _ := c.Read(line)
	if !strings.Contains(string(line[:n]), `"started":true`) {
		t.Fatalf("reply %q", line[:n])
	}
	if len(e.sup.List()) != 1 {
		t.Fatal("the command does not run")
	}
	c.Close()
	deadline := time.Now().Add(5 * time.Second)
	for len(e.sup.List()) != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the command outlived its client")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestSudoRefusals(t *testing.T) {
	e := newEnv(t, false)
	if r := e.sudo(nil, nil, "id"); r.code != 1 || r.sudoErr != "sudo: the sandbox has not started yet\n" {
		t.Errorf("before /run: %+v", r)
	}
	// No socket: root is not allowed in this sandbox.
	var out, errb bytes.Buffer
	if code, _ := run(client{socket: filepath.Join(t.TempDir(), "none.sock"), fds: [3]int{0, 1, 2}}, []string{"id"}, &out, &errb); code != 1 || errb.String() != NotAllowed+"\n" {
		t.Errorf("no socket: %d %q", code, errb.String())
	}
	if code, _ := run(client{socket: e.socket}, []string{"-g", "x", "id"}, &out, &errb); code != 1 {
		t.Errorf("unsupported option: %d", code)
	}
	// Two descriptors, or none, or a bad body: refused with a reason.
	for name, send := range map[string]func(c *net.UnixConn){
		"two descriptors": func(c *net.UnixConn) {
			body, _ := json.Marshal(Request{Args: []string{"id"}})
			_, _, _ = c.WriteMsgUnix(header(len(body)), unix.UnixRights(0, 1), nil)
			_, _ = c.Write(body)
		},
		"no descriptors": func(c *net.UnixConn) { _, _ = c.Write(header(2)); _, _ = c.Write([]byte("{}")) },
		"bad body": func(c *net.UnixConn) {
			_, _, _ = c.WriteMsgUnix(header(5), unix.UnixRights(0, 1, 2), nil)
			_, _ = c.Write([]byte("{nope"))
		},
		"too large": func(c *net.UnixConn) {
			_, _, _ = c.WriteMsgUnix(append([]byte("RSU1"), 0xff, 0xff, 0xff, 0xff), unix.UnixRights(0, 1, 2), nil)
		},
	} {
		c, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: e.socket, Net: "unix"})
		if err != nil {
			t.Fatal(err)
		}
		send(c)
		b, _ := io.ReadAll(io.LimitReader(c, 4096))
		c.Close()
		var rep Reply
		if err := json.Unmarshal(bytes.TrimSpace(b), &rep); err != nil || rep.Error == "" {
			t.Errorf("%s: %q", name, b)
		}
	}
}

// FuzzDecodeRequest: any body never panics the server's parser, and
// what it accepts has a command (or a shell) and no NUL byte.
func FuzzDecodeRequest(f *testing.F) {
	for _, seed := range []string{`{"args":["id"]}`, `{"login":true}`, `{"args":[""]}`, `{"set_env":["A=1","=x"]}`,
		`{"args":["a"],"preserve":["PATH","1x"]}`, `{"args":["a\u0000"]}`, `{}`, `{"args":["x"]} {}`, `{"nope":1}`} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := decodeRequest(body)
		if err != nil {
			return
		}
		if len(req.Args) == 0 && !req.Login && !req.Shell {
			t.Fatalf("accepted without a command: %q", body)
		}
		for _, s := range append(req.Args, req.Env...) {
			if strings.ContainsRune(s, 0) {
				t.Fatalf("accepted a NUL byte: %q", body)
			}
		}
	})
}

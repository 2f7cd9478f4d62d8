package sudo

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rayito-dev/rayito/rayd/internal/launch"
	"github.com/rayito-dev/rayito/rayd/internal/proc"
	"github.com/rayito-dev/rayito/rayd/internal/sandbox"
)

// Server bounds.
const (
	// requestTimeout bounds the reading of a request.
	requestTimeout = 10 * time.Second
	// maxSessions bounds the sudo sessions at a time (each holds a
	// connection; its command also counts among the sandbox's processes).
	maxSessions = 64
	// hangupGrace is how long a command whose client went away has
	// between SIGHUP and SIGKILL.
	hangupGrace = 2 * time.Second
	// maxCommandLine bounds SUDO_COMMAND.
	maxCommandLine = 4096
)

// keptEnv are the caller's variables sudo keeps (its env_keep defaults),
// besides those that start with LC_.
var keptEnv = []string{"TERM", "COLORTERM", "COLORS", "LS_COLORS", "DISPLAY", "XAUTHORITY", "XAUTHORIZATION",
	"LANG", "LANGUAGE", "LINGUAS", "TZ", "PS1", "PS2"}

// forwardable are the signals the client may forward to its command.
var forwardable = map[syscall.Signal]bool{syscall.SIGINT: true, syscall.SIGTERM: true, syscall.SIGHUP: true, syscall.SIGQUIT: true,
	syscall.SIGUSR1: true, syscall.SIGUSR2: true, syscall.SIGWINCH: true, syscall.SIGCONT: true, syscall.SIGALRM: true}

// Server serves sudo to the sandbox's processes. Create it only where
// root is allowed (the Builder's Resolver.AllowRoot, rayd as root).
type Server struct {
	State   *sandbox.State
	Sup     *proc.Supervisor
	Builder *launch.Builder
	Log     *slog.Logger

	mu       sync.Mutex
	sessions int
	conns    map[net.Conn]struct{}
}

// Listen makes the socket at path (its directory 0755 when missing; a
// stale socket replaced, anything else there refused), open to every
// user of the sandbox (0666).
func Listen(path string) (*net.UnixListener, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode().Type() != fs.ModeSocket {
			return nil, fmt.Errorf("sudo: %s exists and is not a socket", path)
		}
		if err := os.Remove(path); err != nil {
			return nil, err
		}
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(path, 0o666); err != nil {
		ln.Close()
		return nil, err
	}
	return ln, nil
}

// Serve accepts sessions on ln until ctx ends; it then closes ln and the
// open sessions (their commands end with the sandbox's processes).
func (s *Server) Serve(ctx context.Context, ln *net.UnixListener) error {
	s.mu.Lock()
	if s.conns == nil {
		s.conns = map[net.Conn]struct{}{}
	}
	s.mu.Unlock()
	stop := context.AfterFunc(ctx, func() {
		ln.Close()
		s.mu.Lock()
		for c := range s.conns {
			c.Close()
		}
		s.mu.Unlock()
	})
	defer stop()
	// Sessions are not waited for: each ends with its command, which the
	// sandbox's processes' shutdown ends.
	for {
		c, err := ln.AcceptUnix()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return err
		}
		s.mu.Lock()
		full := s.sessions >= maxSessions || ctx.Err() != nil
		if !full {
			s.sessions++
			s.conns[c] = struct{}{}
		}
		s.mu.Unlock()
		if full {
			_ = c.SetDeadline(time.Now().Add(time.Second))
			reply(c, Reply{Error: "too many sudo sessions at a time"})
			c.Close()
			continue
		}
		go func() {
			defer func() {
				s.mu.Lock()
				s.sessions--
				delete(s.conns, c)
				s.mu.Unlock()
				c.Close()
			}()
			s.session(c)
		}()
	}
}

func reply(c net.Conn, r Reply) {
	b, _ := json.Marshal(r)
	_, _ = c.Write(append(b, '\n'))
}

// session serves one request: it starts the command with the caller's
// descriptors and reports its end. Nothing of the request (command,
// environment) is logged.
func (s *Server) session(c *net.UnixConn) {
	_ = c.SetDeadline(time.Now().Add(requestTimeout))
	files, req, cred, err := readRequest(c)
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
	if err != nil {
		reply(c, Reply{Error: err.Error()})
		return
	}
	spec, err := s.spec(req, cred)
	if err != nil {
		reply(c, Reply{Error: err.Error()})
		return
	}
	spec.Files = files
	p, err := s.Sup.Start(spec)
	if err != nil {
		msg := "cannot start the command"
		if errors.Is(err, proc.ErrTooManyProcesses) {
			msg = "too many processes in the sandbox"
		}
		reply(c, Reply{Error: msg})
		return
	}
	for _, f := range files {
		f.Close()
	}
	files = nil
	s.Log.Info("sudo: command started", "caller_uid", cred.Uid, "target_uid", spec.Identity.UID, "pid", p.Pid())
	_ = c.SetDeadline(time.Time{})
	reply(c, Reply{Started: true})
	go forwardSignals(c, p)
	<-p.Done()
	ex, _ := p.Exit()
	code := int(ex.ExitCode)
	reply(c, Reply{Exit: &code, Signal: int(ex.Signal)})
}

// forwardSignals relays the client's signals to the command's process
// group until the client goes; a client that goes before its command
// ends hangs it up (SIGHUP, then SIGKILL), as a closed terminal would:
// killing sudo (E2B's commands.kill kills its process group) ends the
// command it started.
func forwardSignals(c *net.UnixConn, p *proc.Process) {
	dec := json.NewDecoder(io.LimitReader(c, 1<<20))
	for {
		var f Forward
		if err := dec.Decode(&f); err != nil {
			break
		}
		if sig := syscall.Signal(f.Signal); forwardable[sig] {
			_ = p.Signal(sig)
		}
	}
	select {
	case <-p.Done():
		return
	default:
	}
	_ = p.Signal(syscall.SIGHUP)
	select {
	case <-p.Done():
	case <-time.After(hangupGrace):
		_ = p.Signal(syscall.SIGKILL)
	}
}

// readRequest reads the header with the caller's three descriptors, the
// body, and the caller's credentials.
func readRequest(c *net.UnixConn) ([]*os.File, *Request, *unix.Ucred, error) {
	hdr := make([]byte, headerLen)
	oob := make([]byte, unix.CmsgSpace(4*8))
	n, oobn, flags, _, err := c.ReadMsgUnix(hdr, oob)
	if err != nil {
		return nil, nil, nil, errors.New("no request")
	}
	var files []*os.File
	if cmsgs, err := unix.ParseSocketControlMessage(oob[:oobn]); err == nil {
		for _, m := range cmsgs {
			fds, err := unix.ParseUnixRights(&m)
			if err != nil {
				continue
			}
			for _, fd := range fds {
				files = append(files, os.NewFile(uintptr(fd), "sudo-caller"))
			}
		}
	}
	if flags&unix.MSG_CTRUNC != 0 || len(files) != 3 {
		return files, nil, nil, errors.New("a request passes exactly three descriptors (0, 1, 2)")
	}
	if n < headerLen {
		if _, err := io.ReadFull(c, hdr[n:]); err != nil {
			return files, nil, nil, errors.New("a truncated request")
		}
	}
	size, err := parseHeader(hdr)
	if err != nil {
		return files, nil, nil, err
	}
	body := make([]byte, size)
	if _, err := io.ReadFull(c, body); err != nil {
		return files, nil, nil, errors.New("a truncated request")
	}
	req, err := decodeRequest(body)
	if err != nil {
		return files, nil, nil, err
	}
	cred, err := peerCred(c)
	if err != nil {
		return files, nil, nil, errors.New("cannot tell who is asking")
	}
	return files, req, cred, nil
}

// decodeRequest parses and checks a request body.
func decodeRequest(body []byte) (*Request, error) {
	var req Request
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil || dec.More() {
		return nil, errors.New("a malformed request")
	}
	if len(req.Args) == 0 && !req.Login && !req.Shell {
		return nil, errors.New("no command")
	}
	if len(req.Args) > 0 && req.Args[0] == "" {
		return nil, errors.New("an empty command")
	}
	if req.Login && req.Shell {
		return nil, errors.New("-i and -s go alone")
	}
	for _, kv := range req.SetEnv {
		if k, _, ok := strings.Cut(kv, "="); !ok || !validName(k) {
			return nil, errors.New("a VAR=value operand with an invalid name")
		}
	}
	for _, k := range req.Preserve {
		if !validName(k) {
			return nil, errors.New("--preserve-env names an invalid variable")
		}
	}
	for _, s := range append(append([]string{req.Cwd, req.User, req.Chdir}, req.Env...), req.Args...) {
		if strings.ContainsRune(s, 0) {
			return nil, errors.New("a NUL byte in the request")
		}
	}
	return &req, nil
}

func validName(k string) bool {
	if k == "" || len(k) > 256 {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

func peerCred(c *net.UnixConn) (*unix.Ucred, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return nil, err
	}
	var cred *unix.Ucred
	var cerr error
	if err := raw.Control(func(fd uintptr) {
		cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return nil, err
	}
	return cred, cerr
}

// spec is the process to start for req from the caller cred: sudo's
// rules (the target account under the sandbox's identity rules, the
// environment reset but for what sudo keeps, the SUDO_* variables).
func (s *Server) spec(req *Request, cred *unix.Ucred) (proc.Spec, error) {
	boot := s.State.Boot()
	if boot == nil {
		return proc.Spec{}, errors.New("the sandbox has not started yet")
	}
	target, err := s.targetUser(req.User)
	if err != nil {
		return proc.Spec{}, err
	}
	id, err := s.Builder.Identity(boot, target)
	if err != nil {
		var le *launch.Error
		if errors.As(err, &le) {
			return proc.Spec{}, fmt.Errorf("%s: %s", target, le.PublicMessage())
		}
		return proc.Spec{}, err
	}
	callerEnv := map[string]string{}
	for _, kv := range req.Env {
		if k, v, ok := strings.Cut(kv, "="); ok && validName(k) {
			callerEnv[k] = v
		}
	}
	envs := keptEnvs(req, callerEnv)
	if req.Login {
		delete(envs, "HOME")
	}
	shell := id.Shell
	if shell == "" {
		shell = "/bin/sh"
	}
	envs["SHELL"] = shell

	lr := launch.Request{User: target}
	argv0 := ""
	switch {
	case req.Login || req.Shell:
		sh := shell
		if req.Shell {
			if v := callerEnv["SHELL"]; v != "" {
				sh = v
			}
		}
		lr.Cmd = sh
		if req.Login {
			argv0 = "-" + filepath.Base(sh)
		}
		if len(req.Args) > 0 {
			lr.Args = []string{"-c", shellEscape(req.Args)}
		}
	default:
		lr.Cmd, lr.Args = req.Args[0], req.Args[1:]
	}
	commandLine := strings.Join(append([]string{lr.Cmd}, lr.Args...), " ")
	if len(commandLine) > maxCommandLine {
		commandLine = commandLine[:maxCommandLine]
	}
	envs["SUDO_USER"] = s.callerName(cred)
	envs["SUDO_UID"] = strconv.FormatUint(uint64(cred.Uid), 10)
	envs["SUDO_GID"] = strconv.FormatUint(uint64(cred.Gid), 10)
	envs["SUDO_COMMAND"] = commandLine
	lr.Envs = envs
	switch {
	case req.Login:
		home := id.Home
		lr.Cwd = &home
	case req.Chdir != "":
		lr.Cwd = &req.Chdir
	case req.Cwd != "":
		lr.Cwd = &req.Cwd
	}
	// sudo resets the environment: the sandbox's own variables (its
	// creation's envs) are not the target's.
	reset := *boot
	reset.Envs = nil
	spec, err := s.Builder.Spec(&reset, lr)
	if err != nil {
		var le *launch.Error
		switch {
		case errors.Is(err, launch.ErrExecutableNotFound):
			return proc.Spec{}, fmt.Errorf("%s: command not found", lr.Cmd)
		case errors.Is(err, launch.ErrCwdNotFound) && lr.Cwd != nil:
			return proc.Spec{}, fmt.Errorf("unable to change directory to %s", *lr.Cwd)
		case errors.As(err, &le):
			return proc.Spec{}, errors.New(le.PublicMessage())
		}
		return proc.Spec{}, err
	}
	if argv0 != "" {
		spec.Args[0] = argv0
	}
	if spec.Identity == nil {
		// rayd without root: the server is never created then.
		return proc.Spec{}, errors.New("rayd cannot switch users here")
	}
	return spec, nil
}

// targetUser is the account sudo runs as: user, root when empty, and
// sudo's #UID by its uid.
func (s *Server) targetUser(user string) (string, error) {
	target := user
	if target == "" {
		target = "root"
	}
	if strings.HasPrefix(target, "#") {
		// sudo's -u #UID.
		uid, err := strconv.ParseUint(target[1:], 10, 32)
		if err != nil {
			return "", fmt.Errorf("unknown user %s", target)
		}
		id, err := s.Builder.Resolver.ResolveUID(uint32(uid))
		if err != nil {
			return "", fmt.Errorf("unknown user %s", target)
		}
		target = id.Username
	}
	return target, nil
}

// callerName is the caller's user name (SUDO_USER), its uid when it has
// none.
func (s *Server) callerName(cred *unix.Ucred) string {
	caller := strconv.FormatUint(uint64(cred.Uid), 10)
	if cid, err := s.Builder.Resolver.ResolveUID(cred.Uid); err == nil {
		caller = cid.Username
	} else if cred.Uid == 0 {
		caller = "root"
	}
	return caller
}

// keptEnvs are the caller's variables (callerEnv) that sudo keeps: the
// locale, keptEnv, all with -E (but not with -i), the ones named with
// --preserve-env, then req's VAR=value; never the target's own (PATH,
// USER and the SUDO_* variables).
func keptEnvs(req *Request, callerEnv map[string]string) map[string]string {
	envs := map[string]string{}
	keep := func(k string) {
		if v, ok := callerEnv[k]; ok {
			envs[k] = v
		}
	}
	for k := range callerEnv {
		if strings.HasPrefix(k, "LC_") {
			keep(k)
		}
	}
	for _, k := range keptEnv {
		keep(k)
	}
	if req.PreserveEnv && !req.Login {
		for k := range callerEnv {
			keep(k)
		}
	}
	for _, k := range req.Preserve {
		keep(k)
	}
	for _, kv := range req.SetEnv {
		k, v, _ := strings.Cut(kv, "=")
		envs[k] = v
	}
	// Always the target's: its PATH (sudo's secure_path), and who it is.
	for _, k := range []string{"PATH", "USER", "LOGNAME", "USERNAME", "SUDO_USER", "SUDO_UID", "SUDO_GID", "SUDO_COMMAND"} {
		delete(envs, k)
	}
	return envs
}

// readReplies reads the server's lines for the client.
func readReplies(r io.Reader, each func(Reply) bool) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 64<<10)
	for sc.Scan() {
		var rep Reply
		if err := json.Unmarshal(sc.Bytes(), &rep); err != nil {
			return errors.New("a malformed reply")
		}
		if !each(rep) {
			return nil
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	return io.ErrUnexpectedEOF
}
